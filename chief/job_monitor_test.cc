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

}  // namespace
}  // namespace pstrain
