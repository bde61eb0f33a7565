#include "ps/staleness_bound.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(StalenessBoundTest, AReplicaMayRunAtMostStalenessAheadOfTheSlowest) {
  StalenessBound bound(/*total_replicas=*/2, /*staleness=*/2, absl::Seconds(30));
  EXPECT_EQ(bound.Tick(0, kT0), 1);
  EXPECT_EQ(bound.Tick(1, kT0), 1);
  EXPECT_TRUE(bound.MayProceed(bound.Tick(0, kT0)));   // 2 vs 1
  EXPECT_TRUE(bound.MayProceed(bound.Tick(0, kT0)));   // 3 vs 1: 2 ahead
  EXPECT_FALSE(bound.MayProceed(bound.Tick(0, kT0)));  // 4 vs 1: 3 ahead, waits
  EXPECT_EQ(bound.min_clock(), 1);
  EXPECT_TRUE(bound.MayProceed(bound.Tick(1, kT0)));  // the slow one always goes on
  EXPECT_TRUE(bound.MayProceed(4));                   // 4 vs 2
}

TEST(StalenessBoundTest, ZeroStalenessIsLockstep) {
  StalenessBound bound(3, 0, absl::Seconds(30));
  for (int r = 0; r < 3; ++r) bound.Tick(r, kT0);
  const int64_t c = bound.Tick(0, kT0);
  EXPECT_FALSE(bound.MayProceed(c));
  bound.Tick(1, kT0);
  EXPECT_FALSE(bound.MayProceed(c));
  bound.Tick(2, kT0);
  EXPECT_TRUE(bound.MayProceed(c));
}

TEST(StalenessBoundTest, SilentAndLeavingReplicasAreNotWaitedFor) {
  StalenessBound bound(3, 1, absl::Seconds(10));
  bound.Tick(0, kT0);
  bound.Tick(1, kT0);
  bound.Tick(2, kT0 + absl::Seconds(8));
  int64_t c = 0;
  for (int i = 0; i < 3; ++i) c = bound.Tick(0, kT0 + absl::Seconds(9));
  EXPECT_FALSE(bound.MayProceed(c));  // 4 vs 1
  EXPECT_TRUE(bound.DropSilent(kT0 + absl::Seconds(9)).empty());
  EXPECT_EQ(bound.DropSilent(kT0 + absl::Seconds(11)), std::vector<int>{1});
  EXPECT_FALSE(bound.MayProceed(c));  // replica 2 is still at 1
  bound.Leave(2);
  EXPECT_TRUE(bound.MayProceed(c));  // only replica 0 is live
  EXPECT_EQ(bound.min_clock(), 4);
}

TEST(StalenessBoundTest, ALateOrReturningReplicaStartsAtTheSlowestClock) {
  StalenessBound bound(2, 1, absl::Seconds(10));
  for (int i = 0; i < 5; ++i) bound.Tick(0, kT0);
  // Replica 1 joins late: it counts from replica 0's clock, not from 0, so
  // replica 0 is not held back by 5 steps.
  EXPECT_EQ(bound.Tick(1, kT0), 5);
  EXPECT_TRUE(bound.MayProceed(bound.Tick(0, kT0)));  // 6 vs 5
  bound.Reset();
  EXPECT_EQ(bound.min_clock(), 0);
  EXPECT_EQ(bound.Tick(1, kT0), 1);
}

TEST(StalenessBoundTest, AWaitingReplicaIsNotSilentAndNobodyLiveMeansGoOn) {
  StalenessBound bound(2, 0, absl::Seconds(10));
  bound.Tick(0, kT0);
  bound.Tick(1, kT0);
  const int64_t c = bound.Tick(0, kT0);
  EXPECT_FALSE(bound.MayProceed(c));
  bound.Seen(0, kT0 + absl::Seconds(15));  // held in its push all along
  EXPECT_EQ(bound.DropSilent(kT0 + absl::Seconds(20)), std::vector<int>{1});
  EXPECT_TRUE(bound.MayProceed(c));
  bound.Leave(0);
  EXPECT_TRUE(bound.MayProceed(100));
}

}  // namespace
}  // namespace pstrain
