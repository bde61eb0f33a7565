#include "common/backoff.h"

#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;

std::vector<absl::Duration> Waits(Backoff* backoff, int n) {
  std::vector<absl::Duration> waits;
  for (int i = 0; i < n; ++i) waits.push_back(backoff->Next());
  return waits;
}

TEST(BackoffTest, DoublesFromTheInitialWait) {
  Backoff backoff(absl::Milliseconds(50), absl::Seconds(2));
  EXPECT_EQ(backoff.current(), absl::Milliseconds(50));
  EXPECT_THAT(Waits(&backoff, 4), ElementsAre(absl::Milliseconds(50), absl::Milliseconds(100),
                                              absl::Milliseconds(200), absl::Milliseconds(400)));
  EXPECT_EQ(backoff.current(), absl::Milliseconds(800));
}

TEST(BackoffTest, StopsAtTheMaximum) {
  Backoff backoff(absl::Milliseconds(50), absl::Seconds(2));
  EXPECT_THAT(
      Waits(&backoff, 9),
      ElementsAre(absl::Milliseconds(50), absl::Milliseconds(100), absl::Milliseconds(200),
                  absl::Milliseconds(400), absl::Milliseconds(800), absl::Milliseconds(1600),
                  absl::Seconds(2), absl::Seconds(2), absl::Seconds(2)));
}

TEST(BackoffTest, AMaximumBelowTheInitialWaitCapsFromTheSecondWait) {
  Backoff backoff(absl::Milliseconds(100), absl::Milliseconds(30));
  EXPECT_THAT(Waits(&backoff, 3),
              ElementsAre(absl::Milliseconds(100), absl::Milliseconds(30), absl::Milliseconds(30)));
}

TEST(BackoffTest, ResetStartsOver) {
  Backoff backoff(absl::Milliseconds(100), absl::Seconds(2));
  Waits(&backoff, 10);
  EXPECT_EQ(backoff.current(), absl::Seconds(2));
  backoff.Reset();
  EXPECT_THAT(Waits(&backoff, 3), ElementsAre(absl::Milliseconds(100), absl::Milliseconds(200),
                                              absl::Milliseconds(400)));
}

TEST(BackoffTest, CopiesAreIndependent) {
  const Backoff fresh(absl::Milliseconds(50), absl::Seconds(2));
  Backoff used = fresh;
  used.Next();
  EXPECT_EQ(fresh.current(), absl::Milliseconds(50));
  EXPECT_EQ(used.current(), absl::Milliseconds(100));
}

TEST(BackoffTest, FitsBeforeIsStrict) {
  const absl::Time now = absl::FromUnixSeconds(1000);
  Backoff backoff(absl::Milliseconds(50), absl::Seconds(2));
  EXPECT_TRUE(backoff.FitsBefore(now, now + absl::Milliseconds(51)));
  EXPECT_FALSE(backoff.FitsBefore(now, now + absl::Milliseconds(50)));
  EXPECT_FALSE(backoff.FitsBefore(now, now));
  EXPECT_TRUE(backoff.FitsBefore(now, absl::InfiniteFuture()));
  backoff.Next();  // now 100 ms
  EXPECT_FALSE(backoff.FitsBefore(now, now + absl::Milliseconds(51)));
  EXPECT_TRUE(backoff.FitsBefore(now, now + absl::Milliseconds(101)));
}

}  // namespace
}  // namespace pstrain
