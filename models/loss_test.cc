// The heads' losses: values by hand, and each gradient against central
// differences of the loss itself.
#include "models/loss.h"

#include <cmath>
#include <functional>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

// d(batch-mean loss)/dz by central differences, in double around each z.
std::vector<double> LossNumericGradient(const std::vector<float>& z,
                                        const std::vector<float>& targets,
                                        const RegressionLossOptions& options) {
  const int64_t batch = static_cast<int64_t>(z.size());
  auto mean_loss = [&](const std::vector<float>& at) {
    Tensor t({batch, 1});
    for (int64_t i = 0; i < batch; ++i) t[i] = at[i];
    return RegressionLossOf(t, targets.data(), options, nullptr).loss_sum / batch;
  };
  std::vector<double> g(z.size());
  const float h = 1e-2f;
  for (size_t i = 0; i < z.size(); ++i) {
    std::vector<float> up = z, down = z;
    up[i] += h;
    down[i] -= h;
    g[i] = (mean_loss(up) - mean_loss(down)) / (2.0 * h);
  }
  return g;
}

Tensor PredictionColumn(const std::vector<float>& v) {
  Tensor t({static_cast<int64_t>(v.size()), 1});
  for (size_t i = 0; i < v.size(); ++i) t[static_cast<int64_t>(i)] = v[i];
  return t;
}

TEST(RegressionLossTest, MseMaeAndHuberByHand) {
  const Tensor z = PredictionColumn({1.0f, -2.0f, 0.5f});
  const float y[] = {3.0f, -2.5f, 0.5f};  // d = -2, 0.5, 0
  const LossResult mse = RegressionLossOf(z, y, {RegressionLoss::kMse}, nullptr);
  EXPECT_DOUBLE_EQ(mse.loss_sum, 4.0 + 0.25);
  EXPECT_DOUBLE_EQ(mse.abs_error_sum, 2.5);
  EXPECT_DOUBLE_EQ(mse.squared_error_sum, 4.25);
  EXPECT_EQ(mse.correct, 0);
  EXPECT_DOUBLE_EQ(RegressionLossOf(z, y, {RegressionLoss::kMae}, nullptr).loss_sum, 2.5);
  // delta 1: |d| = 2 is beyond it (1 * (2 - 0.5)), 0.5 within (0.125).
  const LossResult huber = RegressionLossOf(z, y, {RegressionLoss::kHuber, 1.0f}, nullptr);
  EXPECT_DOUBLE_EQ(huber.loss_sum, 1.5 + 0.125);
  // A delta above every error is half the squared error.
  EXPECT_DOUBLE_EQ(RegressionLossOf(z, y, {RegressionLoss::kHuber, 5.0f}, nullptr).loss_sum,
                   4.25 / 2);
}

TEST(RegressionLossTest, GradientsMatchCentralDifferences) {
  // Errors away from the kinks (0 for mae, +-delta for huber) by more than
  // the step, on both sides of them.
  const std::vector<float> z = {0.3f, -1.7f, 2.9f, 0.05f, -0.4f, 6.0f};
  const std::vector<float> y = {1.0f, -1.0f, 0.0f, 0.5f, -0.45f, -1.0f};
  for (const RegressionLossOptions& options :
       {RegressionLossOptions{RegressionLoss::kMse}, RegressionLossOptions{RegressionLoss::kMae},
        RegressionLossOptions{RegressionLoss::kHuber, 1.0f},
        RegressionLossOptions{RegressionLoss::kHuber, 0.25f}}) {
    Tensor d;
    RegressionLossOf(PredictionColumn(z), y.data(), options, &d);
    ASSERT_EQ(d.shape(), (Shape{6, 1}));
    const std::vector<double> numeric = LossNumericGradient(z, y, options);
    for (size_t i = 0; i < z.size(); ++i) {
      EXPECT_NEAR(d[static_cast<int64_t>(i)], numeric[i], 1e-4)
          << "loss " << static_cast<int>(options.loss) << ", delta " << options.huber_delta
          << ", example " << i;
    }
  }
}

TEST(RegressionLossTest, MaeGradientIsZeroWhereThePredictionIsExact) {
  Tensor d;
  const float y[] = {2.0f};
  RegressionLossOf(PredictionColumn({2.0f}), y, {RegressionLoss::kMae}, &d);
  EXPECT_EQ(d[0], 0.0f);
}

}  // namespace
}  // namespace pstrain
