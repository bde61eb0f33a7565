#include "chief/summaries.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "chief/model_graph.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "models/model_options.h"
#include "ps/optimizer_config.h"
#include "ps_protocol/shard_layout.h"

namespace pstrain {
namespace {

int64_t NextMultiple(int64_t step, int64_t every) {
  return every > 0 ? (step / every + 1) * every : INT64_MAX;
}

// Adds the time from construction to destruction to `*total`.
class CostTimer {
 public:
  explicit CostTimer(absl::Duration* total) : total_(total), start_(absl::Now()) {}
  ~CostTimer() { *total_ += absl::Now() - start_; }

 private:
  absl::Duration* total_;
  absl::Time start_;
};

}  // namespace

google::protobuf::Map<std::string, google::protobuf::Value> RunHParams(const JobConfig& job) {
  static constexpr const char* kStrings[] = {"model", "update", "learning_rate_schedule",
                                             "wire_format"};
  static constexpr const char* kNumbers[] = {"learning_rate",        "momentum",    "weight_decay",
                                             "batch_size",           "train_steps", "seed",
                                             "replicas_to_aggregate"};
  const TrainingSpec& t = job.training;
  google::protobuf::Map<std::string, google::protobuf::Value> hparams;
  for (const char* key : kStrings) {
    absl::StatusOr<std::string> v = GetTrainingField(t, key);
    CHECK(v.ok()) << v.status();
    if (!v->empty()) hparams[key].set_string_value(*v);
  }
  for (const char* key : kNumbers) {
    absl::StatusOr<std::string> v = GetTrainingField(t, key);
    CHECK(v.ok()) << v.status();
    double number = 0;
    CHECK(absl::SimpleAtod(*v, &number)) << key << " = " << *v;
    hparams[key].set_number_value(number);
  }
  hparams["optimizer"].set_string_value(EffectiveOptimizer(t));
  if (EffectiveOptimizer(t) == "momentum") hparams["nesterov"].set_bool_value(t.nesterov);
  hparams["num_ps"].set_number_value(static_cast<double>(job.cluster.ps.size()));
  hparams["num_replicas"].set_number_value(NumTrainingReplicas(job));
  return hparams;
}

absl::StatusOr<std::unique_ptr<TrainingSummaries>> TrainingSummaries::Create(
    Env* env, const JobConfig& job, const Model* model, std::unique_ptr<ParameterServers> servers,
    int64_t start_step) {
  PSTRAIN_ASSIGN_OR_RETURN(OptimizerConfig optimizer,
                           OptimizerConfigFromSpec(job.training, NumTrainingReplicas(job)));
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<EventWriter> events,
      EventWriter::Create(env, job.training.job_dir, absl::Seconds(job.training.flush_secs)));
  PSTRAIN_RETURN_IF_ERROR(
      events->WriteSessionStart(RunHParams(job), job.training.job_dir, absl::Now()));
  // The model's graph, once per file (a restarted chief's new file has its
  // own): TensorBoard's GRAPHS tab.
  if (model != nullptr && model->spec() != nullptr) {
    ModelGraphOptions graph_options;
    graph_options.optimizer = EffectiveOptimizer(job.training);
    graph_options.embedding_optimizer = job.training.embedding_optimizer;
    graph_options.num_ps = static_cast<int>(job.cluster.ps.size());
    const ShardLayout layout = ComputeShardLayout(*model, std::max(graph_options.num_ps, 1));
    absl::StatusOr<tensorboard::GraphDef> graph = ModelGraph(*model, layout, graph_options);
    if (graph.ok()) {
      PSTRAIN_RETURN_IF_ERROR(events->WriteGraph(*graph));
    } else {
      LOG(WARNING) << "no graph for TensorBoard: " << graph.status();
    }
  }
  PSTRAIN_RETURN_IF_ERROR(events->Flush());
  return std::unique_ptr<TrainingSummaries>(new TrainingSummaries(
      job, model, std::move(servers), std::move(events), optimizer.learning_rate, start_step));
}

TrainingSummaries::TrainingSummaries(const JobConfig& job, const Model* model,
                                     std::unique_ptr<ParameterServers> servers,
                                     std::unique_ptr<EventWriter> events,
                                     LearningRateSchedule learning_rate, int64_t start_step)
    : spec_(job.training),
      model_(model),
      servers_(std::move(servers)),
      events_(std::move(events)),
      learning_rate_(std::move(learning_rate)),
      next_scalars_(NextMultiple(start_step, spec_.save_summary_steps)),
      next_histograms_(NextMultiple(start_step, spec_.histogram_steps)) {}

absl::Status TrainingSummaries::Observe(const std::vector<PsStatus>& statuses) {
  absl::MutexLock lock(&mu_);
  CostTimer timer(&cost_);
  return ObserveLocked(statuses, false);
}

absl::Status TrainingSummaries::Finish(const std::vector<PsStatus>& statuses) {
  absl::MutexLock lock(&mu_);
  absl::Status status;
  {
    CostTimer timer(&cost_);
    // The session end is written even if the last scalars or histograms
    // could not be.
    status = ObserveLocked(statuses, true);
    status.Update(events_->WriteSessionEnd(tensorboard::STATUS_SUCCESS, absl::Now()));
    status.Update(events_->Flush());
  }
  const absl::Duration run = absl::Now() - started_;
  LOG(INFO) << "summaries: " << absl::FormatDuration(cost_) << " spent writing them, "
            << absl::StrFormat(
                   "%.3f", 100 * absl::FDivDuration(cost_, std::max(run, absl::Milliseconds(1))))
            << "% of the job's " << absl::FormatDuration(absl::Trunc(run, absl::Milliseconds(1)))
            << " (off the training path, on the chief's checkpointer thread)";
  return status;
}

absl::Duration TrainingSummaries::cost() const {
  absl::MutexLock lock(&mu_);
  return cost_;
}

absl::Status TrainingSummaries::WriteInputImages(const Dataset& data, const std::string& name,
                                                 int count, int64_t step) {
  absl::MutexLock lock(&mu_);
  CostTimer timer(&cost_);
  const int n = static_cast<int>(std::min<int64_t>(count, data.size()));
  for (int i = 0; i < n; ++i) {
    const size_t size = static_cast<size_t>(data.example_size());
    PSTRAIN_RETURN_IF_ERROR(events_->WriteImage(
        n > 1 ? absl::StrCat(name, "/image/", i) : absl::StrCat(name, "/image"), step, data.height,
        data.width, data.channels, absl::Span<const uint8_t>(data.images.data() + i * size, size)));
  }
  return events_->Flush();
}

absl::Status TrainingSummaries::ObserveLocked(const std::vector<PsStatus>& statuses, bool final) {
  if (statuses.empty()) return absl::OkStatus();
  int64_t step = INT64_MAX;
  for (const PsStatus& s : statuses) step = std::min(step, s.global_step);
  // Chunk 0, on ps 0, carries the replicas' progress reports.
  const PsStatus& first = statuses.front();
  const absl::Time now = absl::Now();
  if (!have_baseline_ || first.loss_batches < last_batches_ || step < last_step_) {
    // The first look, or a ps that started afresh: counting begins here.
    have_baseline_ = true;
    last_step_ = step;
    last_time_ = now;
    last_loss_sum_ = first.loss_sum;
    last_batches_ = first.loss_batches;
    last_examples_ = first.examples;
    return absl::OkStatus();
  }
  if ((final || step >= next_scalars_) && step > last_step_) {
    const double secs = std::max(absl::ToDoubleSeconds(now - last_time_), 1e-6);
    const int64_t batches = first.loss_batches - last_batches_;
    if (batches > 0) {
      PSTRAIN_RETURN_IF_ERROR(events_->WriteScalar(
          "loss", step, static_cast<float>((first.loss_sum - last_loss_sum_) / batches)));
    }
    PSTRAIN_RETURN_IF_ERROR(events_->WriteScalar("learning_rate", step, learning_rate_.At(step)));
    PSTRAIN_RETURN_IF_ERROR(events_->WriteScalar("global_step/sec", step,
                                                 static_cast<float>((step - last_step_) / secs)));
    PSTRAIN_RETURN_IF_ERROR(events_->WriteScalar(
        "examples/sec", step, static_cast<float>((first.examples - last_examples_) / secs)));
    last_step_ = step;
    last_time_ = now;
    last_loss_sum_ = first.loss_sum;
    last_batches_ = first.loss_batches;
    last_examples_ = first.examples;
    next_scalars_ = NextMultiple(step, spec_.save_summary_steps);
  }
  if (step >= next_histograms_ ||
      (final && spec_.histogram_steps > 0 && step > last_histogram_step_)) {
    PSTRAIN_RETURN_IF_ERROR(WriteHistogramsLocked());
    next_histograms_ = NextMultiple(step, spec_.histogram_steps);
  }
  return absl::OkStatus();
}

absl::Status TrainingSummaries::WriteHistogramsLocked() {
  PSTRAIN_ASSIGN_OR_RETURN(ParameterView view, servers_->Read());
  last_histogram_step_ = view.global_step;
  for (const VariableInfo& v : model_->variables()) {
    const float* base = v.trainable ? view.params : view.state;
    PSTRAIN_RETURN_IF_ERROR(events_->WriteHistogram(
        v.name, view.global_step, absl::Span<const float>(base + v.offset, v.size)));
  }
  return events_->Flush();
}

}  // namespace pstrain
