#ifndef PSTRAIN_CHIEF_JOB_MONITOR_H_
#define PSTRAIN_CHIEF_JOB_MONITOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/termination.h"
#include "config/cluster_config.h"
#include "ps_protocol/ps_status.h"

namespace pstrain {

// What a poll of the parameter servers calls for.
enum class JobEvent {
  kNothing,        // training goes on
  kCheckpointDue,  // checkpoint_steps or checkpoint_secs has come round
  kReplicaLeft,    // a replica said it is leaving: save what is there
  kStopRequested,  // the chief got SIGTERM, or a ps is being stopped: save, then end the job
  kRollBack,       // a ps lost its parameters (restarted), or no progress for watchdog_secs:
                   // restore every ps from the last checkpoint
  kJobEnded,       // the job is done or shutting down (the final checkpoint is the chief's)
};

// One poll's verdict.
struct JobObservation {
  JobEvent event = JobEvent::kNothing;
  int64_t lowest_step = 0;   // among the ps tasks
  int64_t highest_step = 0;  // among the ps tasks' chunks
  // The step a save is for, and how long a sync ps may wait for its chunks
  // to get there. Async: the lowest step, no wait (chunks are copied as they
  // are). Sync, periodic: the next step boundary, which every chunk reaches
  // while training goes on and is copied at the moment it does, so the
  // checkpoint is one consistent step. Sync, a replica left or a stop: the
  // highest step now (its step completes without the replica).
  int64_t save_step = 0;
  absl::Duration wait;
  std::string why;         // for the log line: "checkpoint_steps", "a replica left", ...
  int64_t stalled_at = 0;  // kRollBack by the watchdog: the lowest step that did not move
};

// When the chief checkpoints: every checkpoint_steps steps and
// checkpoint_secs seconds, and, when it exports while training (exports are
// made from checkpoints), at least every export_steps steps and export_secs
// seconds too, so that every export due has the checkpoint it needs (the
// default checkpoint_steps of 1000 would otherwise make export_secs = 8 one
// export a checkpoint).
struct CheckpointCadence {
  int64_t steps = 0;  // 0: none by steps
  double secs = 0;    // 0: none by time
  // Why it is more often than checkpoint_steps and checkpoint_secs say (for
  // the chief's log), or empty.
  std::string exports_note;
};
CheckpointCadence CheckpointCadenceOf(const TrainingSpec& spec);

// The chief's watch over a running job: classifies each poll of every ps
// task's status (preemption, replicas leaving, the job ending, periodic
// checkpoints due). Pure logic: no I/O, the time is passed in, so every rule
// is unit-tested. Not thread-safe (one polling thread).
class JobMonitor {
 public:
  // `stop` (the chief's own stop request) must outlive the monitor.
  JobMonitor(const TrainingSpec& spec, int64_t start_step, const TerminationNotice* stop,
             absl::Time now);

  JobObservation Observe(const std::vector<PsStatus>& statuses, absl::Time now);

  // The periodic checkpoint of `observation` was saved: the next is due
  // its cadence's steps after its step, its seconds after `now`
  // (CheckpointCadenceOf).
  void PeriodicSaved(const JobObservation& observation, absl::Time now);

 private:
  int64_t NextByStep(int64_t step) const;
  // kRollBack's reason, or empty: a ps without parameters, or the watchdog.
  std::string RollBackReason(const std::vector<PsStatus>& statuses, absl::Time now);

  const TrainingSpec spec_;
  const CheckpointCadence cadence_;
  const bool sync_;
  const TerminationNotice* const stop_;
  int64_t next_step_;
  absl::Time next_time_;
  int64_t departures_ = -1;  // before the first poll: unknown
  // The watchdog: the ps's update counts, and when they last changed.
  int64_t progress_ = -1;
  absl::Time last_progress_;
};

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_JOB_MONITOR_H_
