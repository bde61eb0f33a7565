#include "chief/summaries.h"

#include <algorithm>

#include "absl/types/span.h"
#include "common/status_macros.h"
#include "ps/ps_runner.h"

namespace pstrain {
namespace {

int64_t NextMultiple(int64_t step, int64_t every) {
  return every > 0 ? (step / every + 1) * every : INT64_MAX;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrainingSummaries>> TrainingSummaries::Create(
    Env* env, const JobConfig& job, const Model* model, std::unique_ptr<PsClient> client,
    int64_t start_step) {
  PSTRAIN_ASSIGN_OR_RETURN(OptimizerConfig optimizer, OptimizerConfigFromSpec(job.training));
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<EventWriter> events,
      EventWriter::Create(env, job.training.job_dir, absl::Seconds(job.training.flush_secs)));
  return std::unique_ptr<TrainingSummaries>(new TrainingSummaries(
      job, model, std::move(client), std::move(events), optimizer.learning_rate, start_step));
}

TrainingSummaries::TrainingSummaries(const JobConfig& job, const Model* model,
                                     std::unique_ptr<PsClient> client,
                                     std::unique_ptr<EventWriter> events,
                                     LearningRateSchedule learning_rate, int64_t start_step)
    : spec_(job.training),
      model_(model),
      client_(std::move(client)),
      events_(std::move(events)),
      learning_rate_(std::move(learning_rate)),
      next_scalars_(NextMultiple(start_step, spec_.save_summary_steps)),
      next_histograms_(NextMultiple(start_step, spec_.histogram_steps)) {}

absl::Status TrainingSummaries::Observe(const std::vector<StatusResponse>& statuses) {
  int64_t step = INT64_MAX;
  for (const StatusResponse& s : statuses) step = std::min(step, s.global_step());
  // Chunk 0, on ps 0, carries the replicas' progress reports.
  const StatusResponse& first = statuses.front();
  const absl::Time now = absl::Now();
  if (!have_baseline_ || first.loss_batches() < last_batches_ || step < last_step_) {
    // The first look, or a ps that started afresh: counting begins here.
    have_baseline_ = true;
    last_step_ = step;
    last_time_ = now;
    last_loss_sum_ = first.loss_sum();
    last_batches_ = first.loss_batches();
    last_examples_ = first.examples();
    return absl::OkStatus();
  }
  if (step >= next_scalars_ && step > last_step_) {
    const double secs = std::max(absl::ToDoubleSeconds(now - last_time_), 1e-6);
    const int64_t batches = first.loss_batches() - last_batches_;
    if (batches > 0) {
      PSTRAIN_RETURN_IF_ERROR(events_->WriteScalar(
          "loss", step, static_cast<float>((first.loss_sum() - last_loss_sum_) / batches)));
    }
    PSTRAIN_RETURN_IF_ERROR(events_->WriteScalar("learning_rate", step, learning_rate_.At(step)));
    PSTRAIN_RETURN_IF_ERROR(events_->WriteScalar("global_step/sec", step,
                                                 static_cast<float>((step - last_step_) / secs)));
    PSTRAIN_RETURN_IF_ERROR(events_->WriteScalar(
        "examples/sec", step, static_cast<float>((first.examples() - last_examples_) / secs)));
    last_step_ = step;
    last_time_ = now;
    last_loss_sum_ = first.loss_sum();
    last_batches_ = first.loss_batches();
    last_examples_ = first.examples();
    next_scalars_ = NextMultiple(step, spec_.save_summary_steps);
  }
  if (step >= next_histograms_) {
    PSTRAIN_RETURN_IF_ERROR(WriteHistograms());
    next_histograms_ = NextMultiple(step, spec_.histogram_steps);
  }
  return absl::OkStatus();
}

absl::Status TrainingSummaries::WriteHistograms() {
  PSTRAIN_ASSIGN_OR_RETURN(ParameterView view, client_->PullLatest());
  for (const VariableInfo& v : model_->variables()) {
    const float* base = v.trainable ? view.params : view.state;
    PSTRAIN_RETURN_IF_ERROR(events_->WriteHistogram(
        v.name, view.global_step, absl::Span<const float>(base + v.offset, v.size)));
  }
  return events_->Flush();
}

}  // namespace pstrain
