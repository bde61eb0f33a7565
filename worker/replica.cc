#include "worker/replica.h"

#include "absl/strings/str_cat.h"
#include "common/cluster_trace.h"
#include "common/status_macros.h"
#include "data/stream/file_pattern.h"
#include "glog/logging.h"
#include "input/job_input.h"
#include "input/model_input.h"
#include "io/event_writer.h"

namespace pstrain {

int ReplicaId(const JobConfig& job, const TaskSpec& task) {
  const int chief = job.training.chief_trains ? 1 : 0;
  if (task.job_name == "chief") return job.training.chief_trains ? 0 : -1;
  if (task.job_name == "worker") return chief + task.task_index;
  return -1;
}

ReplicaSpec ReplicaSpecOf(const JobConfig& job, int replica) {
  return ReplicaSpecOf(job.training, replica, NumTrainingReplicas(job));
}

ReplicaSpec ReplicaSpecOf(const TrainingSpec& t, int replica, int num_replicas) {
  ReplicaSpec spec;
  spec.replica = replica;
  spec.num_replicas = num_replicas;
  spec.sync = t.update == UpdateMode::kSync;
  spec.batch_size = t.batch_size;
  spec.seed = t.seed;
  spec.use_distortion_for_training = t.use_distortion_for_training;
  spec.train_steps = StepLimit(t);
  spec.log_every_n_steps = t.log_every_n_steps;
  return spec;
}

absl::StatusOr<std::unique_ptr<EvalInput>> EvalInput::Open(Env* env, const TrainingSpec& t,
                                                           const Model& model) {
  std::unique_ptr<EvalInput> input(new EvalInput(env, t.eval_batch_size));
  if (t.eval_files.empty()) {
    absl::StatusOr<Dataset> test = LoadModelData(env, model, t.data_dir, Split::kTest);
    if (!test.ok() && !t.train_files.empty()) {
      // A job that streams its training input may not have meant data_dir.
      return absl::Status(
          test.status().code(),
          absl::StrCat("the evaluation reads data_dir's test split, as training.eval_files is not "
                       "set: ",
                       test.status().message(),
                       "; or give training.eval_files, the files to evaluate on"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(input->data_, std::move(test));
    return input;
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> files,
                           ExpandFilePatterns(env, t.eval_files, "training.eval_files"));
  ReplicaSpec one;
  one.batch_size = t.eval_batch_size;
  PSTRAIN_ASSIGN_OR_RETURN(
      ExampleStreamOptions o,
      StreamOptionsOf(env, t, model, one, std::move(files), "training.eval_files"));
  o.shuffle_buffer = 0;
  o.num_epochs = 1;
  // The first batch, checked against the model now rather than at the first
  // evaluation.
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ExampleStream> stream, ExampleStream::Create(env, o));
  Dataset first;
  absl::Status s = stream->Next(&first);
  if (absl::IsOutOfRange(s) || (s.ok() && first.size() == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("training.eval_files (", t.eval_files, ") hold no examples"));
  }
  PSTRAIN_RETURN_IF_ERROR(s);
  PSTRAIN_RETURN_IF_ERROR(CheckModelInput(model, first, t.eval_files));
  input->stream_ = std::move(o);
  return input;
}

absl::StatusOr<EvalMetrics> EvalInput::Evaluate(Model* model, const ParameterView& view) const {
  Evaluator evaluator(model, view, batch_size_);
  if (!stream_.has_value()) {
    PSTRAIN_RETURN_IF_ERROR(evaluator.Add(data_));
    return evaluator.Finish();
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ExampleStream> stream,
                           ExampleStream::Create(env_, *stream_));
  Dataset batch;
  while (true) {
    absl::Status s = stream->Next(&batch);
    if (absl::IsOutOfRange(s)) break;
    PSTRAIN_RETURN_IF_ERROR(s);
    PSTRAIN_RETURN_IF_ERROR(evaluator.Add(batch));
  }
  return evaluator.Finish();
}

std::string EvalInput::Describe() const {
  if (!stream_.has_value()) return absl::StrCat(data_.size(), " test examples in memory");
  return absl::StrCat("the examples of ", stream_->files.size(), " eval files, streamed");
}

std::function<void(int64_t, const InputRates&)> InputSummaries(Env* env, const std::string& job_dir,
                                                               int replica) {
  const std::string dir = JoinPath(job_dir, absl::StrCat("input/replica-", replica));
  absl::StatusOr<std::unique_ptr<EventWriter>> created =
      EventWriter::Create(env, dir, absl::Seconds(30));
  if (!created.ok()) {
    LOG(WARNING) << "no input summaries: " << created.status();
    return nullptr;
  }
  std::shared_ptr<EventWriter> events = *std::move(created);
  return [events](int64_t step, const InputRates& r) {
    const double epoch = static_cast<double>(r.progress.epoch) + r.progress.fraction;
    absl::Status s = events->WriteScalar("input/examples_per_sec", step, r.examples_per_sec);
    if (s.ok()) s = events->WriteScalar("input/MB_per_sec", step, r.mb_per_sec);
    if (s.ok()) s = events->WriteScalar("input/wait_ms_per_step", step, r.wait_ms_per_step);
    if (s.ok()) s = events->WriteScalar("input/epoch", step, static_cast<float>(epoch));
    if (s.ok()) {
      s = events->WriteScalar("input/bad_records", step,
                              static_cast<float>(r.progress.bad_records));
    }
    if (!s.ok()) {
      LOG_EVERY_N(WARNING, 100) << "cannot write input summaries: " << s;
    }
  };
}

std::unique_ptr<ProgressiveValidation> ProgressiveValidationOf(const TrainingSpec& t,
                                                               const Model& model) {
  if (!t.progressive_validation) return nullptr;
  return std::make_unique<ProgressiveValidation>(t.progressive_window, model.num_logits());
}

std::function<void(int64_t, const ProgressiveMetrics&)> ProgressiveSummaries(
    Env* env, const std::string& job_dir, int replica) {
  const std::string dir = JoinPath(job_dir, absl::StrCat("progressive/replica-", replica));
  absl::StatusOr<std::unique_ptr<EventWriter>> created =
      EventWriter::Create(env, dir, absl::Seconds(30));
  if (!created.ok()) {
    LOG(WARNING) << "no progressive validation summaries: " << created.status();
    return nullptr;
  }
  std::shared_ptr<EventWriter> events = *std::move(created);
  return [events](int64_t step, const ProgressiveMetrics& m) {
    absl::Status s = events->WriteScalar("progressive/loss", step, static_cast<float>(m.loss));
    if (s.ok())
      s = events->WriteScalar("progressive/accuracy", step, static_cast<float>(m.accuracy));
    if (s.ok() && m.auc.has_value()) {
      s = events->WriteScalar("progressive/auc", step, static_cast<float>(*m.auc));
    }
    if (!s.ok()) {
      LOG_EVERY_N(WARNING, 100) << "cannot write progressive summaries: " << s;
    }
  };
}

TrainerOptions ReplicaTrainerOptions(const ReplicaSpec& spec) {
  TrainerOptions options;
  options.train_steps = spec.train_steps;
  options.log_every_n_steps = spec.log_every_n_steps;
  options.seed = spec.seed + static_cast<uint64_t>(spec.replica) * 7919;
  return options;
}

void RecordPsClockOffsets(ParameterServers* servers, TraceRecorder* trace, int samples) {
  if (trace == nullptr) return;
  std::vector<std::vector<ClockSample>> per_ps(static_cast<size_t>(servers->size()));
  for (int i = 0; i < samples; ++i) {
    const int64_t sent = TraceRecorder::NowMicros();
    absl::StatusOr<std::vector<PsStatus>> statuses = servers->Statuses();
    const int64_t received = TraceRecorder::NowMicros();
    if (!statuses.ok() || statuses->size() != per_ps.size()) return;
    for (size_t p = 0; p < per_ps.size(); ++p) {
      const int64_t middle = sent + (received - sent) / 2;
      per_ps[p].push_back({(*statuses)[p].unix_micros - middle, received - sent});
    }
  }
  std::vector<int64_t> offsets;
  for (const auto& s : per_ps) offsets.push_back(BestSample(s).offset_us);
  trace->SetOtherData("ps_clock_offsets_us", offsets);
}

}  // namespace pstrain
