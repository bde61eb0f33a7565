// The chief while the job trains: as replica 0 or following the global
// step, with the periodic evaluations both run, and a rollback's retraining.
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "chief/coordinator_internal.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "input/job_input.h"
#include "input/replica_spec.h"
#include "worker/evaluation.h"
#include "worker/replica.h"

namespace pstrain {
namespace coordinator_internal {

absl::StatusOr<EvalMetrics> Chief::Evaluate(const ParameterView& view) {
  ScopedTraceEvent event(deps_.trace, "eval", "evaluate");
  PSTRAIN_ASSIGN_OR_RETURN(EvalMetrics m, EvaluateInput(model_.get(), view, *eval_));
  LOG(INFO) << FormatEvalLine(m) << " (" << absl::StrFormat("%.1f", Elapsed()) << " s of training)";
  absl::Status s;
  for (const HeadMetrics& h : m.heads) {
    // A multi-task model: each head's metrics under its name, beside the
    // model's loss.
    auto write = [&](const std::string& tag, double value) {
      if (s.ok()) s = eval_events_->WriteScalar(h.name + "/" + tag, m.global_step, value);
    };
    write("loss", h.loss);
    if (h.regression) {
      write("mae", h.mae);
      write("rmse", h.rmse);
    } else {
      write("accuracy", h.accuracy);
    }
    if (h.binary) write("auc", h.auc);
    if (s.ok() && !h.pr_curve.empty()) {
      s = eval_events_->WritePrCurve(h.name + "/pr_curve", m.global_step, h.pr_curve,
                                     kPrCurveThresholds);
    }
  }
  if (!m.heads.empty()) {
    // The model's loss alone (its first head's metrics are written above).
  } else if (m.regression) {
    s = eval_events_->WriteScalar("mae", m.global_step, m.mae);
    if (s.ok()) s = eval_events_->WriteScalar("rmse", m.global_step, m.rmse);
  } else {
    s = eval_events_->WriteScalar("accuracy", m.global_step, m.accuracy);
  }
  if (s.ok() && m.binary && m.heads.empty()) {
    s = eval_events_->WriteScalar("auc", m.global_step, m.auc);
  }
  if (s.ok() && !m.pr_curve.empty()) {
    s = eval_events_->WritePrCurve("pr_curve", m.global_step, m.pr_curve, kPrCurveThresholds);
  }
  if (s.ok()) s = eval_events_->WriteScalar("loss", m.global_step, m.loss);
  if (s.ok()) s = eval_events_->Flush();
  if (!s.ok()) LOG(WARNING) << "cannot write evaluation events: " << s;
  return m;
}

void Chief::MaybeEvaluate(const ParameterView& view) {
  if (t_.eval_steps > 0 && view.global_step >= next_eval_ && view.global_step < StepLimit(t_)) {
    // A periodic evaluation that fails (a ps read) is said and training goes on.
    if (absl::StatusOr<EvalMetrics> m = Evaluate(view); !m.ok()) {
      LOG(WARNING) << "evaluation at global step " << view.global_step << " failed: " << m.status();
    }
    next_eval_ = (view.global_step / t_.eval_steps + 1) * t_.eval_steps;
  }
}

absl::Status Chief::Train() {
  const ReplicaSpec spec = ReplicaSpecOf(job_, replica_);
  // Tabular input is the replica's (in memory or streamed); images are
  // the chief's own copy, which also gives the image summaries.
  const auto start = [this,
                      &spec](int64_t global_step) -> absl::StatusOr<std::unique_ptr<BatchSource>> {
    if (input_ != nullptr) return input_->Start(global_step);
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<BatchIterator> batches,
                             StartReplicaBatches(&*train_, *model_, spec, global_step));
    return std::unique_ptr<BatchSource>(std::move(batches));
  };
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ParameterClient> client,
                           deps_.training_client(layout_, replica_));
  TrainerOptions options = ReplicaTrainerOptions(spec);
  options.trace = deps_.trace;
  options.rewind = start;
  if (input_ != nullptr && input_->streamed()) {
    options.on_input = InputSummaries(deps_.env, t_.job_dir, replica_);
  }
  const std::unique_ptr<ProgressiveValidation> progressive = ProgressiveValidationOf(t_, *model_);
  if (progressive != nullptr) {
    options.progressive = progressive.get();
    options.on_progressive = ProgressiveSummaries(deps_.env, t_.job_dir, replica_);
  }
  options.on_pull = [this](const ParameterView& view) {
    MaybeEvaluate(view);
    return absl::OkStatus();
  };
  // Stopped (SIGTERM): a replica waiting for new files (follow) pulls no
  // more, and would not hear of the end from the ps.
  options.should_stop = [this] { return checkpointer_->stopped_early(); };
  int64_t from = start_step_;
  while (true) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<BatchSource> batches, start(from));
    if (spec.sync) options.batches_from_step = from;
    Trainer trainer(model_.get(), client.get(), batches.get(), options);
    PSTRAIN_ASSIGN_OR_RETURN(int64_t step, trainer.Run());
    LOG(INFO) << "chief " << trainer.StepTimeSummary();
    if (!trainer.input_ended()) {
      LOG(INFO) << "chief finished training at global step " << step;
      return absl::OkStatus();
    }
    // Its input ended (num_epochs): the job goes on until every
    // replica's has, and this replica trains again if a rollback undoes
    // some of its steps.
    const std::string reason = absl::StrCat("the chief's input ended at global step ", step);
    PSTRAIN_RETURN_IF_ERROR(
        servers_->Leave(replica_, reason, /*input_ended=*/true, absl::Seconds(10)));
    LOG(INFO) << reason << "; following the other replicas";
    PSTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> rolled_back, FollowTraining(step));
    if (!rolled_back.has_value()) return absl::OkStatus();
    from = *rolled_back;
  }
}

absl::StatusOr<std::optional<int64_t>> Chief::FollowTraining(int64_t input_end) {
  const absl::Duration patience = std::max(absl::Seconds(300), 3 * absl::Seconds(t_.sync_timeout));
  int64_t last_step = -1;
  absl::Time last_progress = absl::Now();
  absl::Time last_said = absl::Now();  // the Leave that told the ps its input ended
  while (!checkpointer_->stopped_early()) {
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<PsStatus> statuses, servers_->Statuses());
    const int64_t step = statuses[0].global_step;
    if (deps_.trace != nullptr) deps_.trace->SetStep(step);
    bool done = step >= StepLimit(t_) || AllInputsEnded(statuses, NumTrainingReplicas(job_));
    bool initialized = true;
    for (const PsStatus& s : statuses) {
      done = done || s.job_done;
      initialized = initialized && s.initialized;
    }
    if (done) break;
    int64_t highest = 0;
    for (const PsStatus& s : statuses) highest = std::max(highest, s.max_global_step);
    if (input_end >= 0 && initialized && InputEndLost(statuses) && highest >= input_end &&
        absl::Now() - last_said > absl::Seconds(5)) {
      // A restarted ps forgot that this replica's input ended.
      PSTRAIN_RETURN_IF_ERROR(servers_->Leave(replica_, "the chief's input ended (said again)",
                                              /*input_ended=*/true, absl::Seconds(10)));
      last_said = absl::Now();
    }
    if (input_end >= 0 && initialized && highest < input_end) {
      LOG(WARNING) << "the job was rolled back to global step " << LowestStep(statuses)
                   << ", below where the chief's input ended (" << input_end
                   << "); the chief trains from there again";
      return LowestStep(statuses);
    }
    if (step != last_step) {
      last_step = step;
      last_progress = absl::Now();
    } else if (!t_.follow && absl::Now() - last_progress > patience) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no training progress for ", absl::FormatDuration(patience), " (global step ", step,
          t_.train_steps > 0 ? absl::StrCat(" of ", t_.train_steps) : std::string(),
          "): are the workers running?"));
    }
    if (t_.eval_steps > 0 && step >= next_eval_) {
      PSTRAIN_ASSIGN_OR_RETURN(ParameterView view, servers_->Read());
      MaybeEvaluate(view);
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  return std::nullopt;
}

}  // namespace coordinator_internal
}  // namespace pstrain
