#ifndef PSTRAIN_CHIEF_CHECKPOINTER_H_
#define PSTRAIN_CHIEF_CHECKPOINTER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "chief/job_monitor.h"
#include "common/env.h"
#include "common/termination.h"
#include "common/trace.h"
#include "config/cluster_config.h"
#include "io/checkpoint.h"
#include "models/model.h"
#include "ps_protocol/parameter_servers.h"
#include "ps_protocol/ps_status.h"

namespace pstrain {

// The index entries of `model`'s variables.
void AddModelVariables(const Model& model, CheckpointIndex* index);

// How the model spec `now` differs from the spec `saved` in a checkpoint
// (both as ModelSpecToYaml writes them): the first line that differs,
// quoted, was and is; "" when they are the same (as specs: the same values
// in other text, such as a float's digits, are no change) or either is unknown.
std::string SpecChange(const std::string& saved, const std::string& now);

// OK if the checkpoint holds exactly `model`'s variables with the same
// shapes; otherwise InvalidArgument naming the first variable that differs.
absl::Status CheckCheckpointMatchesModel(const CheckpointIndex& index, const Model& model,
                                         const std::string& index_path);

// The chief's checkpoints (docs/reliability.md, "Checkpoints and preemption"): restore at start,
// save every checkpoint_steps / checkpoint_secs on a thread of its own (training goes on
// meanwhile), save when a replica leaves, and on a stop request (SIGTERM, or a ps being preempted)
// save and end the job; when each is due is JobMonitor's call. Every save: each ps writes its shard
// file, then the chief writes the index, replaces the `checkpoint` file and deletes the checkpoints
// beyond keep_checkpoint_max.
class Checkpointer {
 public:
  // `servers` is this checkpointer's own (its thread calls them); `env`,
  // `model` and `stop` (the chief's stop request) must outlive it.
  Checkpointer(Env* env, const JobConfig& job, const Model* model,
               std::unique_ptr<ParameterServers> servers, const TerminationNotice* stop);
  ~Checkpointer();  // Stops the thread.

  // Restores the newest checkpoint in the job dir that is whole, skipping
  // damaged ones with a log line naming them; with none, initializes the ps
  // from the model's seeded initializers. Returns the global step training
  // continues from. A checkpoint of another model or shape is refused.
  absl::StatusOr<int64_t> RestoreOrInitialize();

  // Rolls the running job back (a ps lost its parameters, or the watchdog):
  // every ps restores the newest whole checkpoint, or is initialized at step
  // 0 without one. Replicas' pushes for later steps are then refused as
  // rolled back, and they pull the restored values. `from_step` (the highest
  // step the job had reached) is for the log line. Returns the step.
  absl::StatusOr<int64_t> RollBack(const std::string& why, int64_t from_step);

  // Asks the checkpoint thread to roll the job back (RollBack) at its next
  // poll, for `why`; `restored` is called once that succeeded. A replicated
  // job's failover watch calls it when some chunks lost every copy.
  void RequestRollBack(std::string why, std::function<void()> restored);

  // Told of every rollback (the watchdog's, a lost ps's, a failover watch's):
  // `listener(false)` before the ps are restored, `listener(true)` after
  // (restored or not). A replicated job's failover watch: every ps serves its
  // own chunks again. Thread-safe; once cleared (null) it is not called.
  void SetRollBackListener(std::function<void(bool done)> listener) {
    absl::MutexLock lock(&listener_mu_);
    rollback_listener_ = std::move(listener);
  }

  // Called with every ps's Status at each poll of the checkpoint thread
  // (training summaries); set before Start.
  void SetStatusObserver(std::function<void(const std::vector<PsStatus>&)> observer) {
    observer_ = std::move(observer);
  }

  // Called on the checkpoint thread after every periodic save (or one for a
  // replica that left) with its step and prefix (exports while training);
  // set before Start.
  void SetSavedObserver(std::function<void(int64_t, const std::string&)> observer) {
    saved_observer_ = std::move(observer);
  }

  // Records every save (ps copies and files, the index) in `trace`; set
  // before Start.
  void set_trace(TraceRecorder* trace) { trace_ = trace; }

  // Starts the periodic saves after `start_step`.
  void Start(int64_t start_step);
  // Stops the thread (a save in progress finishes first).
  void Stop();

  // Saves a checkpoint of what the ps hold now (the final one): the step is
  // the lowest among the ps; `wait` as for SaveAll. Skipped if that step is
  // already saved. Returns the checkpoint's prefix.
  absl::StatusOr<std::string> SaveNow(absl::Duration wait);

  // The job was ended by a stop request (after its checkpoint).
  bool stopped_early() const { return stopped_early_; }
  // The first error of the background thread, if any.
  absl::Status background_status() const;

 private:
  // Saves at `step` (sync: chunks below it are waited for up to `wait`).
  // With `exact`, a sync save whose chunks were not all copied at `step` is
  // not committed (Aborted). Skipped if `step` is already saved.
  absl::StatusOr<std::string> SaveAt(int64_t step, absl::Duration wait, const std::string& why,
                                     bool exact);
  absl::Status Commit(int64_t step, const std::vector<ShardSaved>& saved);
  // Every ps from the newest whole checkpoint, else initialized at step 0.
  absl::StatusOr<int64_t> RestoreNewest();
  // The thread: polls the ps, lets a JobMonitor say what is due, saves.
  void Loop(int64_t start_step);
  // A stop request: saves (at the highest step if every chunk gets there,
  // else the lowest), then ends the job on every ps.
  void SaveAndEndJob(const JobObservation& observation);

  Env* const env_;
  const JobConfig job_;
  const Model* const model_;
  std::unique_ptr<ParameterServers> servers_;
  const TerminationNotice* const stop_;
  absl::Mutex save_mu_;  // One save at a time.
  int64_t last_saved_ ABSL_GUARDED_BY(save_mu_) = -1;

  mutable absl::Mutex mu_;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  std::string rollback_why_ ABSL_GUARDED_BY(mu_);  // RequestRollBack's, until done
  std::function<void()> rollback_done_ ABSL_GUARDED_BY(mu_);
  absl::Status background_status_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stopped_early_{false};
  std::function<void(const std::vector<PsStatus>&)> observer_;
  absl::Mutex listener_mu_;
  std::function<void(bool)> rollback_listener_ ABSL_GUARDED_BY(listener_mu_);
  std::function<void(int64_t, const std::string&)> saved_observer_;
  std::thread thread_;
  TraceRecorder* trace_ = nullptr;
};

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CHECKPOINTER_H_
