#include "ps/learning_rate.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatEq;
using ::testing::HasSubstr;

TEST(LearningRateScheduleTest, DefaultIsAdamsDefault) {
  const LearningRateSchedule schedule;
  EXPECT_FLOAT_EQ(schedule.At(0), 0.001f);
  EXPECT_FLOAT_EQ(schedule.At(1000000), 0.001f);
  EXPECT_TRUE(schedule.boundaries().empty());
}

TEST(LearningRateScheduleTest, Constant) {
  absl::StatusOr<LearningRateSchedule> schedule = LearningRateSchedule::Constant(0.25f);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  EXPECT_EQ(schedule->At(-1), 0.25f);
  EXPECT_EQ(schedule->At(0), 0.25f);
  EXPECT_EQ(schedule->At(std::numeric_limits<int64_t>::max()), 0.25f);
  EXPECT_EQ(schedule->ToString(), "0.25");
  EXPECT_TRUE(LearningRateSchedule::Constant(0.0f).ok());
}

// tf.train.piecewise_constant(x, [100, 200], [1.0, 0.5, 0.1]) gives 1.0 for
// x <= 100, 0.5 for 100 < x <= 200 and 0.1 for x > 200.
TEST(LearningRateScheduleTest, PiecewiseFollowsTensorFlowAtBoundaries) {
  absl::StatusOr<LearningRateSchedule> schedule =
      LearningRateSchedule::Piecewise({100, 200}, {1.0f, 0.5f, 0.1f});
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  EXPECT_EQ(schedule->At(-7), 1.0f);
  EXPECT_EQ(schedule->At(0), 1.0f);
  EXPECT_EQ(schedule->At(99), 1.0f);
  EXPECT_EQ(schedule->At(100), 1.0f);  // the boundary step keeps the earlier value
  EXPECT_EQ(schedule->At(101), 0.5f);
  EXPECT_EQ(schedule->At(200), 0.5f);
  EXPECT_EQ(schedule->At(201), 0.1f);
  EXPECT_EQ(schedule->At(std::numeric_limits<int64_t>::max()), 0.1f);
  EXPECT_EQ(schedule->ToString(), "1 until step 100, 0.5 until step 200, then 0.1");
}

TEST(LearningRateScheduleTest, PiecewiseRejectsWrongValueCount) {
  absl::StatusOr<LearningRateSchedule> too_few = LearningRateSchedule::Piecewise({10, 20}, {1, 2});
  EXPECT_EQ(too_few.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_few.status().message(), HasSubstr("2 boundaries and 2 values"));
  EXPECT_FALSE(LearningRateSchedule::Piecewise({10}, {1, 2, 3}).ok());
  EXPECT_FALSE(LearningRateSchedule::Piecewise({}, {}).ok());
}

TEST(LearningRateScheduleTest, PiecewiseRejectsNonIncreasingBoundaries) {
  absl::StatusOr<LearningRateSchedule> equal = LearningRateSchedule::Piecewise({10, 10}, {1, 2, 3});
  EXPECT_EQ(equal.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(equal.status().message(), HasSubstr("strictly increasing"));
  EXPECT_FALSE(LearningRateSchedule::Piecewise({20, 10}, {1, 2, 3}).ok());
}

TEST(LearningRateScheduleTest, RejectsNegativeAndNonFiniteRates) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float bad : {-0.1f, inf, -inf, nan}) {
    SCOPED_TRACE(bad);
    absl::StatusOr<LearningRateSchedule> constant = LearningRateSchedule::Constant(bad);
    EXPECT_EQ(constant.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_FALSE(LearningRateSchedule::Piecewise({10}, {0.1f, bad}).ok());
  }
}

TEST(ParseLearningRateScheduleTest, EmptySpecIsConstant) {
  for (const char* spec : {"", "  "}) {
    absl::StatusOr<LearningRateSchedule> schedule = ParseLearningRateSchedule(0.1f, spec);
    ASSERT_TRUE(schedule.ok()) << schedule.status();
    EXPECT_TRUE(schedule->boundaries().empty());
    EXPECT_EQ(schedule->At(12345), 0.1f);
  }
}

TEST(ParseLearningRateScheduleTest, FactorsMultiplyBaseRate) {
  absl::StatusOr<LearningRateSchedule> schedule =
      ParseLearningRateSchedule(0.5f, "1000:0.1, 2000 : 0.01");
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  EXPECT_THAT(schedule->boundaries(), ElementsAre(1000, 2000));
  EXPECT_THAT(schedule->values(), ElementsAre(FloatEq(0.5f), FloatEq(0.05f), FloatEq(0.005f)));
  EXPECT_FLOAT_EQ(schedule->At(1000), 0.5f);
  EXPECT_FLOAT_EQ(schedule->At(1001), 0.05f);
  EXPECT_FLOAT_EQ(schedule->At(2000), 0.05f);
  EXPECT_FLOAT_EQ(schedule->At(2001), 0.005f);
}

TEST(ParseLearningRateScheduleTest, ErrorsNameTheBadToken) {
  struct Case {
    const char* spec;
    const char* token;
  };
  for (const Case& c :
       {Case{"1000", "\"1000\""}, Case{"abc:0.1", "\"abc:0.1\""}, Case{"1000:x", "\"1000:x\""},
        Case{"1000:0.1,", "\"\""}, Case{"1000:0.1:2", "\"1000:0.1:2\""},
        Case{"1000:-1", "\"1000:-1\""}, Case{"1000:inf", "\"1000:inf\""},
        Case{"2000:0.1,1000:0.01", "\"1000:0.01\""}, Case{"1000:0.1,1000:0.01", "\"1000:0.01\""}}) {
    SCOPED_TRACE(c.spec);
    absl::StatusOr<LearningRateSchedule> schedule = ParseLearningRateSchedule(0.1f, c.spec);
    EXPECT_EQ(schedule.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(schedule.status().message(), HasSubstr(c.token));
  }
}

TEST(ParseLearningRateScheduleTest, RejectsBadBaseRate) {
  EXPECT_FALSE(ParseLearningRateSchedule(-0.1f, "").ok());
  EXPECT_FALSE(ParseLearningRateSchedule(std::nanf(""), "100:0.1").ok());
}

}  // namespace
}  // namespace pstrain
