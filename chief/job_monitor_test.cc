#include "chief/job_monitor.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

PsStatus At(int64_t step, int64_t max_step = -1) {
  PsStatus s;
  s.initialized = true;
  s.global_step = step;
  s.max_global_step = max_step < 0 ? step : max_step;
  return s;
}

TEST(JobMonitorTest, PeriodicCheckpointsByStepsAndSeconds) {
  TrainingSpec t;
  t.checkpoint_steps = 10;
  t.checkpoint_secs = 60;
  ManualTerminationNotice stop;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  JobMonitor monitor(t, /*start_step=*/0, &stop, t0);
  EXPECT_EQ(monitor.Observe({At(5)}, t0).event, JobEvent::kNothing);
  JobObservation o = monitor.Observe({At(10)}, t0 + absl::Seconds(1));
  EXPECT_EQ(o.event, JobEvent::kCheckpointDue);
  EXPECT_EQ(o.why, "checkpoint_steps");
  EXPECT_EQ(o.save_step, 10);  // async: the lowest step, no wait
  EXPECT_EQ(o.wait, absl::ZeroDuration());
  monitor.PeriodicSaved(o, t0 + absl::Seconds(1));
  EXPECT_EQ(monitor.Observe({At(12)}, t0 + absl::Seconds(2)).event, JobEvent::kNothing);
  o = monitor.Observe({At(13)}, t0 + absl::Seconds(62));
  EXPECT_EQ(o.event, JobEvent::kCheckpointDue);
  EXPECT_EQ(o.why, "checkpoint_secs");
}

// Exports while training are made from checkpoints: the chief checkpoints
// at least as often as they are due (issue 53: export_secs = 8 with the
// default checkpoint_steps made one export in 52 s).
TEST(JobMonitorTest, ExportsWhileTrainingGetTheCheckpointsTheyNeed) {
  TrainingSpec t;
  t.checkpoint_steps = 1000;
  t.checkpoint_secs = 0;
  t.export_secs = 8;
  CheckpointCadence c = CheckpointCadenceOf(t);
  EXPECT_EQ(c.steps, 1000);
  EXPECT_EQ(c.secs, 8);
  EXPECT_NE(c.exports_note.find("every 8 s (export_secs; checkpoint_secs is 0)"), std::string::npos)
      << c.exports_note;
  ManualTerminationNotice stop;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  JobMonitor monitor(t, /*start_step=*/0, &stop, t0);
  EXPECT_EQ(monitor.Observe({At(50)}, t0 + absl::Seconds(7)).event, JobEvent::kNothing);
  JobObservation o = monitor.Observe({At(60)}, t0 + absl::Seconds(8));
  EXPECT_EQ(o.event, JobEvent::kCheckpointDue);
  EXPECT_EQ(o.why, "export_secs");

  // By steps, and never less often than the checkpoint keys say.
  t.export_secs = 0;
  t.export_steps = 100;
  c = CheckpointCadenceOf(t);
  EXPECT_EQ(c.steps, 100);
  EXPECT_EQ(c.secs, 0);
  EXPECT_NE(c.exports_note.find("every 100 steps (export_steps"), std::string::npos);
  JobMonitor by_steps(t, 0, &stop, t0);
  o = by_steps.Observe({At(100)}, t0);
  EXPECT_EQ(o.event, JobEvent::kCheckpointDue);
  EXPECT_EQ(o.why, "export_steps");
  t.checkpoint_steps = 50;
  c = CheckpointCadenceOf(t);
  EXPECT_EQ(c.steps, 50);
  EXPECT_TRUE(c.exports_note.empty());
  // No exports (exports_to_keep 0): the checkpoint keys alone.
  t.checkpoint_steps = 1000;
  t.exports_to_keep = 0;
  EXPECT_EQ(CheckpointCadenceOf(t).steps, 1000);
}

TEST(JobMonitorTest, SyncSavesAtTheNextStepBoundaryWithAWait) {
  TrainingSpec t;
  t.update = UpdateMode::kSync;
  t.checkpoint_steps = 10;
  t.sync_timeout = 30;
  t.shutdown_grace_secs = 30;
  ManualTerminationNotice stop;
  JobMonitor monitor(t, 0, &stop, absl::Now());
  JobObservation o = monitor.Observe({At(8, 9), At(9)}, absl::Now());
  EXPECT_EQ(o.event, JobEvent::kCheckpointDue);
  EXPECT_EQ(o.save_step, 10);
  EXPECT_EQ(o.wait, absl::Seconds(10));  // bounded by a third of the grace period
}

TEST(JobMonitorTest, ReplicaLeftStopAndEnd) {
  TrainingSpec t;
  t.checkpoint_steps = 0;
  ManualTerminationNotice stop;
  JobMonitor monitor(t, 0, &stop, absl::Now());
  PsStatus s = At(4);
  EXPECT_EQ(monitor.Observe({s}, absl::Now()).event, JobEvent::kNothing);  // first poll: baseline
  s.departures = 1;
  JobObservation o = monitor.Observe({s}, absl::Now());
  EXPECT_EQ(o.event, JobEvent::kReplicaLeft);
  EXPECT_EQ(o.why, "a replica left");
  EXPECT_EQ(monitor.Observe({s}, absl::Now()).event, JobEvent::kNothing);  // counted once

  s.preempting = true;
  o = monitor.Observe({s}, absl::Now());
  EXPECT_EQ(o.event, JobEvent::kStopRequested);
  EXPECT_EQ(o.why, "a parameter server is being stopped");
  s.preempting = false;
  stop.Request(15);
  o = monitor.Observe({s}, absl::Now());
  EXPECT_EQ(o.event, JobEvent::kStopRequested);
  EXPECT_EQ(o.why, "the chief got signal 15");

  s.job_done = true;  // the end wins over everything else
  EXPECT_EQ(monitor.Observe({s}, absl::Now()).event, JobEvent::kJobEnded);
}

TEST(JobMonitorTest, APsWithoutParametersCallsForARollBack) {
  TrainingSpec t;
  t.checkpoint_steps = 10;
  ManualTerminationNotice stop;
  JobMonitor monitor(t, 0, &stop, absl::Now());
  PsStatus restarted;  // a restarted ps: up, but not initialized
  restarted.ps_task = 1;
  JobObservation o = monitor.Observe({At(25), restarted}, absl::Now());
  EXPECT_EQ(o.event, JobEvent::kRollBack);
  EXPECT_EQ(o.why, "ps 1 holds no parameters (it was restarted after the job started)");
  // A stop request wins: the chief saves what it can and ends the job.
  stop.Request(15);
  EXPECT_EQ(monitor.Observe({At(25), restarted}, absl::Now()).event, JobEvent::kStopRequested);
}

TEST(JobMonitorTest, APsWithoutParametersInAReplicatedJobIsTheFailoverWatchs) {
  TrainingSpec t;
  t.checkpoint_steps = 10;
  t.ps_replication = 2;
  ManualTerminationNotice stop;
  JobMonitor monitor(t, 0, &stop, absl::Now());
  PsStatus restarted;
  restarted.ps_task = 1;
  // Its chunks fail over to their copy (FailoverWatch), or the watch asks
  // for the rollback: no rollback here.
  EXPECT_NE(monitor.Observe({At(25), restarted}, absl::Now()).event, JobEvent::kRollBack);
}

TEST(JobMonitorTest, WatchdogFiresAfterWatchdogSecsWithoutProgress) {
  TrainingSpec t;
  t.checkpoint_steps = 0;
  t.watchdog_secs = 60;
  ManualTerminationNotice stop;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  JobMonitor monitor(t, 0, &stop, t0);
  PsStatus s = At(7);
  s.applied_updates = 7;
  EXPECT_EQ(monitor.Observe({s}, t0).event, JobEvent::kNothing);
  EXPECT_EQ(monitor.Observe({s}, t0 + absl::Seconds(59)).event, JobEvent::kNothing);
  JobObservation o = monitor.Observe({s}, t0 + absl::Seconds(60));
  EXPECT_EQ(o.event, JobEvent::kRollBack);
  EXPECT_EQ(o.why, "watchdog: no training progress for 1m (training.watchdog_secs)");
  EXPECT_EQ(o.stalled_at, 7);
  // Once per period of silence, not at every poll.
  EXPECT_EQ(monitor.Observe({s}, t0 + absl::Seconds(61)).event, JobEvent::kNothing);
  EXPECT_EQ(monitor.Observe({s}, t0 + absl::Seconds(120)).event, JobEvent::kRollBack);
  // Progress resets it.
  s.applied_updates = 8;
  s.global_step = s.max_global_step = 8;
  EXPECT_EQ(monitor.Observe({s}, t0 + absl::Seconds(170)).event, JobEvent::kNothing);
  EXPECT_EQ(monitor.Observe({s}, t0 + absl::Seconds(229)).event, JobEvent::kNothing);
  EXPECT_EQ(monitor.Observe({s}, t0 + absl::Seconds(230)).event, JobEvent::kRollBack);
  // Off with 0; and a job that ended is not watched.
  t.watchdog_secs = 0;
  JobMonitor off(t, 0, &stop, t0);
  EXPECT_EQ(off.Observe({s}, t0).event, JobEvent::kNothing);
  EXPECT_EQ(off.Observe({s}, t0 + absl::Hours(5)).event, JobEvent::kNothing);
  t.watchdog_secs = 60;
  JobMonitor ended(t, 0, &stop, t0);
  s.job_done = true;
  EXPECT_EQ(ended.Observe({s}, t0 + absl::Hours(5)).event, JobEvent::kJobEnded);
}

}  // namespace
}  // namespace pstrain
