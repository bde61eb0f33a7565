#include "ps/parameter_slice.h"

#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::unique_ptr<ParameterSlice> MakeSlice(float decay) {
  OptimizerConfig config;
  config.type = OptimizerType::kSgd;
  config.learning_rate = *LearningRateSchedule::Constant(0.5f);
  auto slice = ParameterSlice::Create(config, {{"w", 0, 3}}, 3, 2, decay);
  EXPECT_TRUE(slice.ok()) << slice.status();
  return std::move(*slice);
}

TEST(ParameterSliceTest, ApplyBeforeInitializeIsRefused) {
  auto slice = MakeSlice(0.9f);
  std::vector<float> g(3), s(2);
  auto step = slice->Apply(g.data(), s.data());
  EXPECT_TRUE(absl::IsFailedPrecondition(step.status())) << step.status();
}

TEST(ParameterSliceTest, AppliesOptimizerAndMovingAverageAndAdvancesStep) {
  auto slice = MakeSlice(0.9f);
  ASSERT_TRUE(slice->Initialize({1, 2, 3}, {0, 1}, 7).ok());
  std::vector<float> g = {2, 0, -2}, stats = {10, 3};
  auto step = slice->Apply(g.data(), stats.data());
  ASSERT_TRUE(step.ok());
  EXPECT_EQ(*step, 8);
  std::vector<float> p(3), s(2);
  EXPECT_EQ(slice->Read(p.data(), s.data()), 8);
  EXPECT_EQ(p, (std::vector<float>{0, 2, 4}));
  EXPECT_FLOAT_EQ(s[0], 1.0f);  // 0.9 * 0 + 0.1 * 10
  EXPECT_FLOAT_EQ(s[1], 1.2f);  // 0.9 * 1 + 0.1 * 3
}

TEST(ParameterSliceTest, RejectsWrongSizesAndBadDecay) {
  auto slice = MakeSlice(0.9f);
  EXPECT_TRUE(absl::IsInvalidArgument(slice->Initialize({1, 2}, {0, 1}, 0)));
  EXPECT_TRUE(absl::IsInvalidArgument(slice->Initialize({1, 2, 3}, {0}, 0)));
  EXPECT_TRUE(absl::IsInvalidArgument(slice->Initialize({1, 2, 3}, {0, 1}, -1)));
  OptimizerConfig config;
  EXPECT_FALSE(ParameterSlice::Create(config, {{"w", 0, 3}}, 3, 0, 1.5f).ok());
  EXPECT_FALSE(ParameterSlice::Create(config, {{"w", 0, 2}}, 3, 0, 0.9f).ok());
}

}  // namespace
}  // namespace pstrain
