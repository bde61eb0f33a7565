#ifndef PSTRAIN_CHIEF_COORDINATOR_INTERNAL_H_
#define PSTRAIN_CHIEF_COORDINATOR_INTERNAL_H_

// Internal to coordinator*.cc: the chief's run, a class whose steps are
// defined in the file of their phase (startup, training, the job's end), so
// that each phase reads alone; coordinator.cc runs them in order.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "chief/checkpointer.h"
#include "chief/coordinator.h"
#include "chief/failover.h"
#include "chief/projector_writer.h"
#include "chief/summaries.h"
#include "data/formats/csv_id_text.h"
#include "data/stream/file_list.h"
#include "export/export.h"
#include "input/eval_input.h"
#include "input/job_input.h"
#include "io/event_writer.h"
#include "worker/evaluation.h"
#include "worker/replica.h"

namespace pstrain {
namespace coordinator_internal {

// A handle's patience: retried for `budget`, the job's deadline per call.
CallPatience Patient(absl::Duration budget);

// One run of the chief, as a sequence of named steps (Run).
class Chief {
 public:
  Chief(const JobConfig& job, int replica, const ChiefDependencies& deps)
      : job_(job),
        t_(job.training),
        replica_(replica),
        deps_(deps),
        export_history_(job.training.full_export_every) {}
  // The failover watch goes first, and the checkpointer no longer tells it
  // of rollbacks from then on.
  ~Chief() {
    if (checkpointer_ != nullptr) checkpointer_->SetRollBackListener(nullptr);
    failover_watch_.reset();
  }

  absl::Status Run();

  // Without its chief the job cannot finish: after a failure, end it rather
  // than leave the ps (and the workers waiting on them) running. Best
  // effort and quick: the failure is logged first, a ps that does not
  // answer within a second is left to its own startup timeout, and a ps the
  // chief never reached is not waited for at all.
  void EndJobAfterFailure(const absl::Status& failure);

 private:
  // Seconds since the job started (coordinator.cc).
  double Elapsed() const;

  // The startup (coordinator_startup.cc).

  // The model, its layout, the ps, the job dir and the data: everything that
  // can fail on bad input fails here, before the job starts.
  absl::Status Prepare();

  // False if a stop request came first (the job had not started: nothing to end).
  absl::StatusOr<bool> WaitForParameterServers();

  // Restore or initialize, summaries and input images, the checkpoint thread.
  absl::Status StartJob();

  // The training data: a few examples become image summaries; a chief that
  // does not train keeps it only for that (and goes on without it).
  // Tabular examples are no images: a chief that does not train reads none.
  absl::Status LoadTrainingData();

  // While the job trains (coordinator_training.cc).

  absl::StatusOr<EvalMetrics> Evaluate(const ParameterView& view);

  void MaybeEvaluate(const ParameterView& view);

  // Trains as replica 0, evaluating as the pulled global step passes eval_steps.
  absl::Status Train();

  // Follows the global step and evaluates as it passes, until the job is
  // done: a chief that is no replica, or one whose input ended at global
  // step `input_end`. Then a rollback below `input_end` (a ps restored
  // from a checkpoint) returns the step it went back to, for the chief's
  // replica to train from again.
  absl::StatusOr<std::optional<int64_t>> FollowTraining(int64_t input_end = -1);

  // The job's end (coordinator_end.cc).

  // Stopped (SIGTERM, a ps preempted) after the checkpoint: a restart of the
  // cluster resumes from it.
  absl::Status StoppedEarly();

  // Every chunk of every ps reaches train_steps (in async mode the other
  // replicas' last pushes may still be landing), or every replica's input
  // ended; the statuses then.
  absl::StatusOr<std::vector<PsStatus>> WaitForFinalStep();

  // Tells every ps the job is over, giving up on one that does not answer
  // within a few seconds.
  absl::Status ShutdownQuickly(const std::string& reason);

  // The model for serving, before the job is marked complete:
  // <job_dir>/export/<version>/; the newest exports_to_keep are kept.
  absl::Status ExportModel(const ParameterView& view, const std::string& final_checkpoint);

  // A new export version from the checkpoint `path` names (a prefix, or the
  // job dir: its newest), and the versions beyond exports_to_keep deleted.
  absl::Status ExportCheckpointAt(const std::string& path);

  // TensorBoard's projector files (io/projector.h) in the job dir from the
  // checkpoint `path` names; a failure is logged, never the job's.
  void WriteProjectorAt(const std::string& path);

  // The final evaluation and checkpoint, the completion marker, the end of
  // the job on every ps.
  absl::Status EndJob();

  const JobConfig& job_;
  const TrainingSpec& t_;
  const int replica_;
  const ChiefDependencies& deps_;
  std::unique_ptr<Model> model_;
  ShardLayout layout_;
  std::unique_ptr<ParameterServers> servers_;
  std::unique_ptr<EvalInput> eval_;
  std::optional<Dataset> train_;
  std::unique_ptr<ReplicaInput> input_;  // a training chief's tabular input
  // A click model's exports: deltas between full versions (before the
  // checkpointer, whose thread exports, so that it outlives it).
  ExportHistory export_history_;
  // The projector's files from each checkpoint, on a thread of their own
  // (before the checkpointer, whose thread queues them, so that they
  // outlive it; the writer's thread runs WriteProjectorAt). One write at a
  // time: the writer's, and the final one.
  absl::Mutex projector_mu_;
  // CSV input: names the projector's rows by their raw values (null: unnamed).
  std::unique_ptr<CsvRowNamer> row_namer_ ABSL_PT_GUARDED_BY(projector_mu_);
  std::unique_ptr<ProjectorWriter> projector_writer_;
  std::unique_ptr<Checkpointer> checkpointer_;
  // A replicated job (ps_replication > 1): the failovers (after the
  // checkpointer, whose rollback it may ask for, so that it goes first).
  std::unique_ptr<FailoverWatch> failover_watch_;
  std::unique_ptr<FileListFollower> follower_;  // follow: new files listed while training
  std::shared_ptr<TrainingSummaries> summaries_;
  std::unique_ptr<EventWriter> eval_events_;
  int64_t start_step_ = 0;
  int64_t next_eval_ = 0;
  std::chrono::steady_clock::time_point job_start_ = std::chrono::steady_clock::now();
  bool job_ended_ = false;  // the chief ended the job itself (or it never started)
  bool may_have_reached_ps_ = true;
};

}  // namespace coordinator_internal
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_COORDINATOR_INTERNAL_H_
