#include "chief/failover.h"

#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

using Probe = std::vector<absl::StatusOr<PsStatus>>;

PsStatus Up(int task) {
  PsStatus s;
  s.ps_task = task;
  s.served_by = task;
  s.initialized = true;
  s.epoch = 1;
  return s;
}

// Every task answers with its parameters, but those in `down` (no answer)
// and those in `empty` (restarted: no parameters).
Probe ProbeOf(int n, std::vector<int> down = {}, std::vector<int> empty = {}) {
  Probe probe;
  for (int t = 0; t < n; ++t) {
    if (std::find(down.begin(), down.end(), t) != down.end()) {
      probe.push_back(absl::UnavailableError("connection refused"));
    } else {
      PsStatus s = Up(t);
      s.initialized = std::find(empty.begin(), empty.end(), t) == empty.end();
      probe.push_back(s);
    }
  }
  return probe;
}

constexpr absl::Duration kAfter = absl::Seconds(2);

TEST(FailoverPlannerTest, SilentPrimaryFailsOverToTheNextCopyOnlyAfterFailoverSecs) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  FailoverPlanner planner(3, 3, kAfter, t0);
  EXPECT_TRUE(planner.Observe(ProbeOf(3), t0).promotions.empty());
  // Ps 1 goes silent: nothing until failover_after has passed.
  EXPECT_TRUE(planner.Observe(ProbeOf(3, {1}), t0 + absl::Seconds(1)).promotions.empty());
  EXPECT_TRUE(planner.Observe(ProbeOf(3, {1}), t0 + absl::Milliseconds(1900)).promotions.empty());
  const FailoverPlanner::Decision d = planner.Observe(ProbeOf(3, {1}), t0 + absl::Seconds(2));
  ASSERT_EQ(d.promotions.size(), 1u);
  EXPECT_TRUE(d.lost.empty());
  // Ps 1's copies are on 2 then 0: 2 serves, 0 stays a backup.
  EXPECT_EQ(d.promotions[0].owner, 1);
  EXPECT_EQ(d.promotions[0].task, 2);
  EXPECT_EQ(d.promotions[0].epoch, 2);
  EXPECT_EQ(d.promotions[0].backups, std::vector<int>{0});
  planner.Promoted(d.promotions[0]);
  EXPECT_EQ(planner.serving(1), 2);
  EXPECT_EQ(planner.epoch(1), 2);
  EXPECT_FALSE(planner.fresh(1));
  // Done once: ps 2 answers, so nothing more is due.
  EXPECT_TRUE(planner.Observe(ProbeOf(3, {1}), t0 + absl::Seconds(3)).promotions.empty());
  // Ps 1 was only stopped and answers again, with what it held: it is
  // fenced at the failover's epoch, and stays out of step.
  FailoverPlanner::Decision back = planner.Observe(ProbeOf(3), t0 + absl::Seconds(4));
  EXPECT_TRUE(back.promotions.empty());
  ASSERT_EQ(back.fences.size(), 1u);
  EXPECT_EQ(back.fences[0], std::make_pair(1, int64_t{2}));
  EXPECT_FALSE(planner.fresh(1));
  // Fenced, it says it holds nothing in step: nothing more to do.
  back = planner.Observe(ProbeOf(3, {}, {1}), t0 + absl::Seconds(5));
  EXPECT_TRUE(back.fences.empty());
  EXPECT_TRUE(back.promotions.empty());
}

TEST(FailoverPlannerTest, RestartedTaskIsNoCopyAndTheSecondLossRollsBack) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  FailoverPlanner planner(2, 2, kAfter, t0);
  planner.Observe(ProbeOf(2), t0);
  // Ps 0 restarts at once, without its parameters: it is failed over all
  // the same (its answers without parameters do not count).
  planner.Observe(ProbeOf(2, {}, {0}), t0 + absl::Seconds(1));
  FailoverPlanner::Decision d = planner.Observe(ProbeOf(2, {}, {0}), t0 + absl::Seconds(2));
  ASSERT_EQ(d.promotions.size(), 1u);
  EXPECT_EQ(d.promotions[0].owner, 0);
  EXPECT_EQ(d.promotions[0].task, 1);
  EXPECT_TRUE(d.promotions[0].backups.empty());  // ps 0 holds nothing now
  planner.Promoted(d.promotions[0]);
  // Ps 1 then dies too: no fresh copy of either task's chunks is left.
  d = planner.Observe(ProbeOf(2, {1}, {0}), t0 + absl::Seconds(3));
  EXPECT_TRUE(d.promotions.empty());
  d = planner.Observe(ProbeOf(2, {1}, {0}), t0 + absl::Seconds(5));
  EXPECT_TRUE(d.promotions.empty());
  EXPECT_NE(d.lost.find("every copy of the chunks and rows of ps 0's (served by ps 1"),
            std::string::npos)
      << d.lost;
  // After the rollback every copy is in step again, and each serves its own.
  planner.Restored(t0 + absl::Seconds(9));
  EXPECT_EQ(planner.serving(0), 0);
  EXPECT_EQ(planner.epoch(0), 1);
  EXPECT_TRUE(planner.fresh(0));
  EXPECT_TRUE(planner.Observe(ProbeOf(2), t0 + absl::Seconds(9)).lost.empty());
}

TEST(FailoverPlannerTest, CopyOnATaskSilentForHalfTheTimeIsNeverPromoted) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  FailoverPlanner planner(2, 2, kAfter, t0);
  planner.Observe(ProbeOf(2), t0);
  // Ps 1 misses answers for 1.5 s (its primaries may drop it from their
  // streams): its copies are out of step, even once it answers again.
  planner.Observe(ProbeOf(2, {1}), t0 + absl::Milliseconds(1500));
  planner.Observe(ProbeOf(2), t0 + absl::Seconds(2));
  EXPECT_FALSE(planner.fresh(1));
  EXPECT_TRUE(planner.fresh(0));
  planner.Observe(ProbeOf(2, {0}), t0 + absl::Seconds(3));
  const FailoverPlanner::Decision d = planner.Observe(ProbeOf(2, {0}), t0 + absl::Seconds(4));
  EXPECT_TRUE(d.promotions.empty());
  EXPECT_FALSE(d.lost.empty());
}

TEST(FailoverPlannerTest, ABackupItsPrimaryDroppedIsOutOfStepBeforeTheDropIsConfirmed) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  FailoverPlanner planner(2, 2, kAfter, t0);
  EXPECT_EQ(planner.confirm_drops(), (std::vector<int64_t>{0, 0}));
  // Ps 0's stream dropped its backup on ps 1 (a link fault: ps 1 still
  // answers the chief); ps 0's answers wait until the drop is confirmed.
  Probe probe = ProbeOf(2);
  PsStatus zero = *probe[0];
  zero.backup_drops = 1;
  zero.dropped_backups = {1};
  probe[0] = zero;
  planner.Observe(probe, t0 + absl::Milliseconds(200));
  EXPECT_FALSE(planner.fresh(1));
  EXPECT_TRUE(planner.fresh(0));
  // The next probe confirms it: ps 1 was marked first.
  EXPECT_EQ(planner.confirm_drops(), (std::vector<int64_t>{1, 0}));
  // So ps 0 dying now is no failover to the copy it dropped: a rollback.
  planner.Observe(ProbeOf(2, {0}), t0 + absl::Seconds(1));
  const FailoverPlanner::Decision d = planner.Observe(ProbeOf(2, {0}), t0 + absl::Seconds(3));
  EXPECT_TRUE(d.promotions.empty());
  EXPECT_FALSE(d.lost.empty());
}

TEST(FailoverPlannerTest, LearnsFailoversFromWhatTheTasksServe) {
  // A restarted chief: ps 2 says it serves ps 1's chunks at epoch 3.
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  FailoverPlanner planner(3, 2, kAfter, t0);
  Probe probe = ProbeOf(3, {}, {1});
  PsStatus two = *probe[2];
  two.serves = {1};
  two.serves_epochs = {3};
  probe[2] = two;
  planner.Observe(probe, t0);
  EXPECT_EQ(planner.serving(1), 2);
  EXPECT_EQ(planner.epoch(1), 3);
  // Ps 1, restarted and empty, is no failure of its chunks (ps 2 serves
  // them): nothing is due however long it stays so.
  const FailoverPlanner::Decision d = planner.Observe(probe, t0 + absl::Seconds(10));
  EXPECT_TRUE(d.promotions.empty());
  EXPECT_TRUE(d.lost.empty());
  EXPECT_NE(planner.Describe().find("ps 1's chunks on ps 2 (epoch 3)"), std::string::npos)
      << planner.Describe();
}

TEST(FailoverPlannerTest, ARestartedTaskRejoinsAndTheSecondLossFailsOverAgain) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  FailoverPlanner planner(2, 2, kAfter, t0);
  planner.Observe(ProbeOf(2), t0);
  // Ps 0 dies; ps 1 serves its chunks; ps 0 comes back empty.
  planner.Observe(ProbeOf(2, {0}), t0 + absl::Seconds(1));
  FailoverPlanner::Decision d = planner.Observe(ProbeOf(2, {0}), t0 + absl::Seconds(2));
  ASSERT_EQ(d.promotions.size(), 1u);
  EXPECT_TRUE(d.rejoins.empty());  // a probe with a failover does nothing else
  planner.Promoted(d.promotions[0]);
  // Ps 0 answers, empty: it rejoins from ps 1, for its own chunks and for
  // ps 1's.
  Probe probe = ProbeOf(2, {}, {0});
  PsStatus one = *probe[1];
  one.serves = {0};
  one.serves_epochs = {2};
  probe[1] = one;
  d = planner.Observe(probe, t0 + absl::Seconds(3));
  EXPECT_TRUE(d.promotions.empty());
  EXPECT_TRUE(d.fences.empty());
  ASSERT_EQ(d.rejoins.size(), 1u);
  EXPECT_EQ(d.rejoins[0].task, 0);
  EXPECT_EQ(d.rejoins[0].from, (std::vector<std::pair<int, int>>{{0, 1}, {1, 1}}));
  EXPECT_FALSE(planner.fresh(0));
  EXPECT_TRUE(planner.Rejoined(d.rejoins[0], t0 + absl::Seconds(4)));
  EXPECT_TRUE(planner.fresh(0));
  EXPECT_TRUE(planner.AllFresh());
  // Rejoined, it follows its own chunks at epoch 2: no fence, no rejoin.
  probe = ProbeOf(2);
  PsStatus zero = *probe[0];
  zero.epoch = 2;
  probe[0] = zero;
  probe[1] = one;
  d = planner.Observe(probe, t0 + absl::Seconds(4));
  EXPECT_TRUE(d.fences.empty());
  EXPECT_TRUE(d.rejoins.empty());
  // Ps 1 dies now: both tasks' chunks fail over to ps 0, no rollback.
  planner.Observe(ProbeOf(2, {1}), t0 + absl::Seconds(5));
  d = planner.Observe(ProbeOf(2, {1}), t0 + absl::Seconds(7));
  EXPECT_TRUE(d.lost.empty()) << d.lost;
  ASSERT_EQ(d.promotions.size(), 2u);
  EXPECT_EQ(d.promotions[0].owner, 0);
  EXPECT_EQ(d.promotions[0].task, 0);
  EXPECT_EQ(d.promotions[0].epoch, 3);
  EXPECT_EQ(d.promotions[1].owner, 1);
  EXPECT_EQ(d.promotions[1].task, 0);
  EXPECT_EQ(d.promotions[1].epoch, 2);
}

TEST(FailoverPlannerTest, NoRejoinFromAServerThatDoesNotAnswer) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  FailoverPlanner planner(3, 2, kAfter, t0);
  planner.Observe(ProbeOf(3), t0);
  // Ps 2 missed answers (stale); ps 1, the server of the chunks it holds
  // copies of, is silent: no rejoin until it answers.
  planner.Observe(ProbeOf(3, {2}), t0 + absl::Milliseconds(1500));
  FailoverPlanner::Decision d = planner.Observe(ProbeOf(3, {1}), t0 + absl::Milliseconds(1700));
  EXPECT_TRUE(d.rejoins.empty());
  d = planner.Observe(ProbeOf(3), t0 + absl::Milliseconds(1900));
  ASSERT_EQ(d.rejoins.size(), 1u);
  EXPECT_EQ(d.rejoins[0].task, 2);
  // Ps 2 serves its own chunks: it takes copies of ps 1's only.
  EXPECT_EQ(d.rejoins[0].from, (std::vector<std::pair<int, int>>{{1, 1}}));
  // Ps 1 drops it again while the copies travel: the rejoin does not count.
  Probe probe = ProbeOf(3);
  PsStatus one = *probe[1];
  one.backup_drops = 1;
  one.dropped_backups = {2};
  probe[1] = one;
  planner.Observe(probe, t0 + absl::Milliseconds(2100));
  EXPECT_FALSE(planner.Rejoined(d.rejoins[0], t0 + absl::Milliseconds(2200)));
  EXPECT_FALSE(planner.fresh(2));
  d = planner.Observe(probe, t0 + absl::Milliseconds(2300));
  ASSERT_EQ(d.rejoins.size(), 1u);
  EXPECT_TRUE(planner.Rejoined(d.rejoins[0], t0 + absl::Milliseconds(2400)));
  EXPECT_TRUE(planner.fresh(2));
}

TEST(FailoverPlannerTest, ADropMarksOnlyTheTaskItNames) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  FailoverPlanner planner(3, 3, kAfter, t0);
  Probe probe = ProbeOf(3);
  PsStatus zero = *probe[0];
  zero.backup_drops = 1;
  zero.dropped_backups = {1};
  probe[0] = zero;
  FailoverPlanner::Decision d = planner.Observe(probe, t0);
  EXPECT_FALSE(planner.fresh(1));
  d = planner.Observe(probe, t0 + absl::Milliseconds(200));
  ASSERT_EQ(d.rejoins.size(), 1u);
  EXPECT_TRUE(planner.Rejoined(d.rejoins[0], t0 + absl::Milliseconds(300)));
  // Ps 0 drops ps 2 later: ps 1, rejoined since its drop, stays in step.
  zero.backup_drops = 2;
  zero.dropped_backups = {1, 2};
  probe[0] = zero;
  planner.Observe(probe, t0 + absl::Milliseconds(400));
  EXPECT_TRUE(planner.fresh(1));
  EXPECT_FALSE(planner.fresh(2));
  // And a second drop of ps 1 marks it again.
  zero.backup_drops = 3;
  zero.dropped_backups = {1, 1, 2};
  probe[0] = zero;
  planner.Observe(probe, t0 + absl::Milliseconds(600));
  EXPECT_FALSE(planner.fresh(1));
}

TEST(FailoverPlannerTest, ARejoinDoesNotCountOnceAServerMoved) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  FailoverPlanner planner(3, 3, kAfter, t0);
  planner.Observe(ProbeOf(3), t0);
  // Ps 2 misses answers: stale; it rejoins from ps 0 and ps 1.
  planner.Observe(ProbeOf(3, {2}), t0 + absl::Milliseconds(1200));
  FailoverPlanner::Decision d = planner.Observe(ProbeOf(3), t0 + absl::Milliseconds(1400));
  ASSERT_EQ(d.rejoins.size(), 1u);
  const FailoverPlanner::Decision::Rejoin rejoin = d.rejoins[0];
  EXPECT_EQ(rejoin.from, (std::vector<std::pair<int, int>>{{0, 0}, {1, 1}}));
  // Meanwhile ps 0 dies and its chunks move to ps 1 at epoch 2: the copy ps
  // 2 took from ps 0 is not of what is served now.
  planner.Observe(ProbeOf(3, {0}), t0 + absl::Seconds(2));
  d = planner.Observe(ProbeOf(3, {0}), t0 + absl::Milliseconds(3500));
  ASSERT_EQ(d.promotions.size(), 1u);
  planner.Promoted(d.promotions[0]);
  EXPECT_FALSE(planner.Rejoined(rejoin, t0 + absl::Seconds(4)));
  EXPECT_FALSE(planner.fresh(2));
}

TEST(FailoverPlannerTest, ARestartedPrimaryCountsItsDropsAfresh) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  FailoverPlanner planner(2, 2, kAfter, t0);
  Probe probe = ProbeOf(2);
  PsStatus zero = *probe[0];
  zero.backup_drops = 2;
  zero.dropped_backups = {1, 1};
  probe[0] = zero;
  FailoverPlanner::Decision d = planner.Observe(probe, t0);
  d = planner.Observe(probe, t0 + absl::Milliseconds(200));
  ASSERT_EQ(d.rejoins.size(), 1u);
  ASSERT_TRUE(planner.Rejoined(d.rejoins[0], t0 + absl::Milliseconds(300)));
  EXPECT_EQ(planner.confirm_drops()[0], 2);
  // Ps 0 restarts (counts from 0) and drops ps 1 once: ps 1 is out of step
  // again, and the confirmation follows the new count.
  zero.backup_drops = 0;
  zero.dropped_backups = {};
  probe[0] = zero;
  planner.Observe(probe, t0 + absl::Milliseconds(400));
  EXPECT_TRUE(planner.fresh(1));
  zero.backup_drops = 1;
  zero.dropped_backups = {1};
  probe[0] = zero;
  planner.Observe(probe, t0 + absl::Milliseconds(600));
  EXPECT_FALSE(planner.fresh(1));
  EXPECT_EQ(planner.confirm_drops()[0], 1);
}

}  // namespace
}  // namespace pstrain
