#include "chief/job_monitor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {

CheckpointCadence CheckpointCadenceOf(const TrainingSpec& spec) {
  CheckpointCadence c{spec.checkpoint_steps, spec.checkpoint_secs, ""};
  if (spec.exports_to_keep <= 0) return c;
  std::vector<std::string> notes;
  if (spec.export_steps > 0 && (c.steps == 0 || c.steps > spec.export_steps)) {
    notes.push_back(absl::StrCat("every ", spec.export_steps,
                                 " steps (export_steps; checkpoint_steps is ",
                                 spec.checkpoint_steps, ")"));
    c.steps = spec.export_steps;
  }
  if (spec.export_secs > 0 && (c.secs == 0 || c.secs > spec.export_secs)) {
    notes.push_back(absl::StrCat("every ", spec.export_secs, " s (export_secs; checkpoint_secs is ",
                                 spec.checkpoint_secs, ")"));
    c.secs = spec.export_secs;
  }
  if (!notes.empty()) {
    c.exports_note = absl::StrCat(
        "exports while training are made from checkpoints: the chief "
        "checkpoints ",
        absl::StrJoin(notes, " and "), " to make each one when due");
  }
  return c;
}

JobMonitor::JobMonitor(const TrainingSpec& spec, int64_t start_step, const TerminationNotice* stop,
                       absl::Time now)
    : spec_(spec),
      cadence_(CheckpointCadenceOf(spec)),
      sync_(spec.update == UpdateMode::kSync),
      stop_(stop),
      next_step_(NextByStep(start_step)),
      next_time_(cadence_.secs > 0 ? now + absl::Seconds(cadence_.secs) : absl::InfiniteFuture()),
      last_progress_(now) {}

std::string JobMonitor::RollBackReason(const std::vector<PsStatus>& statuses, absl::Time now) {
  int64_t progress = 0;
  for (const PsStatus& s : statuses) {
    // A replicated job: a ps without its parameters is the failover
    // watch's to handle (a backup takes over, or the job rolls back).
    if (!s.initialized && spec_.ps_replication <= 1) {
      return absl::StrCat("ps ", s.ps_task,
                          " holds no parameters (it was restarted after the job started)");
    }
    progress += s.applied_updates + s.max_global_step;
  }
  if (progress != progress_) {
    progress_ = progress;
    last_progress_ = now;
    return "";
  }
  // (An online job, follow, waits for new files without progress: no alarm.)
  if (spec_.watchdog_secs > 0 && !spec_.follow &&
      now - last_progress_ >= absl::Seconds(spec_.watchdog_secs)) {
    last_progress_ = now;  // the next alarm, if nothing moves, is as far away
    return absl::StrCat("watchdog: no training progress for ",
                        absl::FormatDuration(absl::Seconds(spec_.watchdog_secs)),
                        " (training.watchdog_secs)");
  }
  return "";
}

int64_t JobMonitor::NextByStep(int64_t step) const {
  return cadence_.steps > 0 ? (step / cadence_.steps + 1) * cadence_.steps : INT64_MAX;
}

JobObservation JobMonitor::Observe(const std::vector<PsStatus>& statuses, absl::Time now) {
  JobObservation o;
  o.lowest_step = INT64_MAX;
  int64_t departures = 0;
  bool done = false, preempting = false;
  for (const PsStatus& s : statuses) {
    o.lowest_step = std::min(o.lowest_step, s.global_step);
    o.highest_step = std::max(o.highest_step, s.max_global_step);
    done = done || s.job_done || s.shutting_down;
    preempting = preempting || s.preempting;
    departures += s.departures;
  }
  const bool left = departures_ >= 0 && departures > departures_;
  departures_ = departures;
  if (done) {
    o.event = JobEvent::kJobEnded;
    return o;
  }
  const int signal = stop_->Received();
  if (signal != 0 || preempting) {
    o.event = JobEvent::kStopRequested;
    o.why = signal != 0 ? absl::StrCat("the chief got signal ", signal)
                        : "a parameter server is being stopped";
    // At the highest step if every chunk gets there in time (replicas that
    // leave complete their step); else at the lowest, as the chunks are.
    o.save_step = sync_ ? o.highest_step : o.lowest_step;
    // A stop must leave time to exit within the grace period.
    o.wait =
        std::min(absl::Seconds(spec_.sync_timeout), absl::Seconds(spec_.shutdown_grace_secs) / 3);
    return o;
  }
  if (std::string why = RollBackReason(statuses, now); !why.empty()) {
    o.event = JobEvent::kRollBack;
    o.why = std::move(why);
    o.stalled_at = o.lowest_step;
    return o;
  }
  // Bounded so that a stop request arriving meanwhile still has time to save.
  const absl::Duration sync_wait = std::min(absl::Seconds(spec_.sync_timeout) + absl::Seconds(5),
                                            absl::Seconds(spec_.shutdown_grace_secs) / 3);
  o.save_step = sync_ ? o.highest_step + 1 : o.lowest_step;
  o.wait = sync_ ? sync_wait : absl::ZeroDuration();
  if (o.save_step >= next_step_) {
    o.why = cadence_.steps == spec_.checkpoint_steps ? "checkpoint_steps" : "export_steps";
  }
  if (now >= next_time_) {
    o.why = cadence_.secs == spec_.checkpoint_secs ? "checkpoint_secs" : "export_secs";
  }
  if (!o.why.empty()) {
    o.event = JobEvent::kCheckpointDue;
  } else if (left) {
    o.event = JobEvent::kReplicaLeft;
    o.why = "a replica left";
    o.save_step = sync_ ? o.highest_step : o.lowest_step;
    o.wait = std::min(o.wait, absl::Seconds(2));
  }
  return o;
}

void JobMonitor::PeriodicSaved(const JobObservation& observation, absl::Time now) {
  next_step_ = NextByStep(observation.save_step);
  if (cadence_.secs > 0) next_time_ = now + absl::Seconds(cadence_.secs);
}

}  // namespace pstrain
