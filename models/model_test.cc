#include "models/model.h"

#include <cmath>
#include <functional>

#include "gtest/gtest.h"
#include "models/dense.h"
#include "models/random.h"
#include "models/registry.h"

namespace pstrain {
namespace {

// A regression head on one dense unit over [2] inputs.
absl::StatusOr<std::unique_ptr<Model>> LinearRegression(int num_classes,
                                                        RegressionLossOptions loss) {
  std::vector<std::unique_ptr<Layer>> layers;
  DenseOptions out;
  out.units = 1;
  layers.push_back(std::make_unique<Dense>("out", out));
  return Model::Create("linear", {2}, num_classes, std::move(layers), {}, Head::kRegression, loss);
}

TEST(RegressionHeadTest, HasOneOutputNoClassesAndAPositiveHuberDelta) {
  absl::StatusOr<std::unique_ptr<Model>> model = LinearRegression(0, {});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->num_logits(), 1);
  EXPECT_EQ((*model)->num_classes(), 0);
  EXPECT_EQ((*model)->regression_loss().loss, RegressionLoss::kMse);
  absl::StatusOr<std::unique_ptr<Model>> classes = LinearRegression(2, {});
  ASSERT_FALSE(classes.ok());
  EXPECT_NE(classes.status().message().find("a regression head has no classes, not 2"),
            std::string::npos)
      << classes.status();
  absl::StatusOr<std::unique_ptr<Model>> delta = LinearRegression(0, {RegressionLoss::kHuber, 0});
  ASSERT_FALSE(delta.ok());
  EXPECT_NE(delta.status().message().find("huber_delta 0 is not a positive number"),
            std::string::npos)
      << delta.status();
}

// Each loss, by plain SGD on y = 2 x0 - x1 + 0.5, finds the line: the mean
// absolute error falls under 0.05 from the initial weights' ~1.
TEST(RegressionHeadTest, EachLossTrainsALinearModelOntoItsTargets) {
  constexpr int64_t kBatch = 64;
  SplitMix64 rng(3);
  std::vector<float> x(kBatch * 2), y(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) {
    x[2 * i] = rng.Uniform() * 2 - 1;
    x[2 * i + 1] = rng.Uniform() * 2 - 1;
    y[i] = 2 * x[2 * i] - x[2 * i + 1] + 0.5f;
  }
  for (const RegressionLossOptions& loss :
       {RegressionLossOptions{RegressionLoss::kMse}, RegressionLossOptions{RegressionLoss::kMae},
        RegressionLossOptions{RegressionLoss::kHuber, 0.5f}}) {
    std::unique_ptr<Model> model = *LinearRegression(0, loss);
    std::vector<float> params(model->num_params()), grads(params.size());
    model->InitializeVariables(1, params.data(), nullptr);
    LossResult first, last;
    for (int step = 0; step < 2000; ++step) {
      last = model->TrainStep(params.data(), nullptr, x.data(), y.data(), kBatch, step,
                              grads.data(), nullptr);
      if (step == 0) first = last;
      for (size_t i = 0; i < params.size(); ++i) params[i] -= 0.05f * grads[i];
    }
    const LossResult eval = model->Evaluate(params.data(), nullptr, x.data(), y.data(), kBatch);
    EXPECT_GT(first.abs_error_sum / kBatch, 0.5) << static_cast<int>(loss.loss);
    EXPECT_LT(eval.abs_error_sum / kBatch, 0.05) << static_cast<int>(loss.loss);
    EXPECT_LT(eval.loss_sum, first.loss_sum) << static_cast<int>(loss.loss);
  }
}

TEST(RegistryTest, UnknownModelListsKnownOnes) {
  auto model = BuildModel("resnet9000", {});
  ASSERT_FALSE(model.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(model.status()));
  EXPECT_NE(model.status().message().find("mnist_cnn"), std::string::npos);
}

TEST(MnistCnnTest, VariablesAsTensorFlowNamesThem) {
  auto model = BuildModel("mnist_cnn", {});
  ASSERT_TRUE(model.ok()) << model.status();
  const auto& vars = (*model)->variables();
  ASSERT_EQ(vars.size(), 8u);
  EXPECT_EQ(vars[0].name, "conv2d/kernel");
  EXPECT_EQ(vars[0].shape, (Shape{5, 5, 1, 32}));
  EXPECT_EQ(vars[2].name, "conv2d_1/kernel");
  EXPECT_EQ(vars[2].shape, (Shape{5, 5, 32, 64}));
  EXPECT_EQ(vars[4].name, "dense/kernel");
  EXPECT_EQ(vars[4].shape, (Shape{7 * 7 * 64, 1024}));
  EXPECT_EQ(vars[7].name, "dense_1/bias");
  EXPECT_EQ((*model)->num_params(), 3274634);
  EXPECT_EQ((*model)->num_state(), 0);
  int64_t offset = 0;
  for (const auto& v : vars) {
    EXPECT_EQ(v.offset, offset) << v.name;
    offset += v.size;
  }
}

TEST(MnistCnnTest, SeededInitialization) {
  auto model = *BuildModel("mnist_cnn", {});
  std::vector<float> a(model->num_params()), b(model->num_params()), c(model->num_params());
  model->InitializeVariables(1, a.data(), nullptr);
  model->InitializeVariables(1, b.data(), nullptr);
  model->InitializeVariables(2, c.data(), nullptr);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Glorot-uniform kernel within its limit, zero biases.
  const float limit = std::sqrt(6.0f / (25 + 25 * 32));
  for (int i = 0; i < 800; ++i) ASSERT_LE(std::abs(a[i]), limit);
  for (int i = 800; i < 832; ++i) ASSERT_EQ(a[i], 0.0f);
}

// For the largest-gradient parameter of each trainable variable (where float
// noise matters least), compares grads against the central difference
// (loss(p + eps) - loss(p - eps)) / 2 eps within relative tolerance `rel`
// (of max(floor, |numeric|)). `*params` is what `loss` reads; restored.
// Returns how many parameters were checked.
int CheckLargestGradients(const Model& model, const std::vector<float>& grads,
                          const std::function<double()>& loss, float eps, double rel, double floor,
                          std::vector<float>* params) {
  int checked = 0;
  for (const auto& v : model.variables()) {
    if (!v.trainable) continue;
    int64_t best = v.offset;
    for (int64_t i = v.offset; i < v.offset + v.size; ++i) {
      if (std::abs(grads[i]) > std::abs(grads[best])) best = i;
    }
    const float saved = (*params)[best];
    (*params)[best] = saved + eps;
    const double plus = loss();
    (*params)[best] = saved - eps;
    const double minus = loss();
    (*params)[best] = saved;
    const double numeric = (plus - minus) / (2 * eps);
    EXPECT_NEAR(grads[best], numeric, rel * std::max(floor, std::abs(numeric))) << v.name;
    ++checked;
  }
  return checked;
}

// Whole-model check: the gradient TrainStep returns for a sample of
// parameters against central differences of the mean loss (dropout uses the
// same seed on every evaluation, so the function is fixed).
TEST(MnistCnnTest, TrainStepGradientMatchesNumeric) {
  auto model = *BuildModel("mnist_cnn", {});
  const int64_t batch = 2;
  std::vector<float> params(model->num_params()), grads(model->num_params());
  model->InitializeVariables(3, params.data(), nullptr);
  SplitMix64 rng(4);
  // Non-zero biases so ReLUs sit away from their kinks on average.
  for (float& p : params) p += 0.01f * (rng.Uniform() - 0.5f);
  std::vector<float> images(batch * 784);
  for (float& x : images) x = rng.Uniform();
  const float labels[] = {3, 7};
  model->TrainStep(params.data(), nullptr, images.data(), labels, batch, 99, grads.data(), nullptr);
  auto loss = [&]() {
    std::vector<float> scratch(model->num_params());
    return model
               ->TrainStep(params.data(), nullptr, images.data(), labels, batch, 99, scratch.data(),
                           nullptr)
               .loss_sum /
           batch;
  };
  EXPECT_EQ(CheckLargestGradients(*model, grads, loss, 1e-3f, 2e-2, 1.0, &params), 8);
}

TEST(MnistCnnTest, SgdLowersLossOnAFixedBatch) {
  auto model = *BuildModel("mnist_cnn", {});
  const int64_t batch = 4;
  std::vector<float> params(model->num_params()), grads(model->num_params());
  model->InitializeVariables(5, params.data(), nullptr);
  SplitMix64 rng(6);
  std::vector<float> images(batch * 784);
  for (float& x : images) x = rng.Uniform();
  std::vector<float> labels(batch);
  for (int64_t i = 0; i < batch; ++i) labels[i] = static_cast<int32_t>(i % 10);
  const double first =
      model->Evaluate(params.data(), nullptr, images.data(), labels.data(), batch).loss_sum;
  for (int step = 0; step < 40; ++step) {
    model->TrainStep(params.data(), nullptr, images.data(), labels.data(), batch, step,
                     grads.data(), nullptr);
    // Through raw pointers: the sanitizer builds compile tests at -O0, where
    // two calls of vector's operator[] per parameter (3.3M of them) a step
    // took most of the test's time.
    float* p = params.data();
    const float* g = grads.data();
    for (size_t i = 0, n = params.size(); i < n; ++i) p[i] -= 0.03f * g[i];
  }
  const LossResult last =
      model->Evaluate(params.data(), nullptr, images.data(), labels.data(), batch);
  EXPECT_LT(last.loss_sum, 0.5 * first);
}

TEST(Cifar10ResNetTest, ShapesAndParameterCounts) {
  ModelOptions options;
  options.num_layers = 20;
  auto model = BuildModel("cifar10_resnet", options);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->input_shape(), (Shape{32, 32, 3}));
  // He et al.'s ResNet-20: 0.27M parameters. Stem 432 + 32, stage 1
  // 3 x (2 x 2304 + 64), stage 2 13952 + 2 x 18560, stage 3 55552 +
  // 2 x 73984, dense 650.
  EXPECT_EQ((*model)->num_params(), 269722);
  // Moving mean and variance of all 19 batch norms.
  EXPECT_EQ((*model)->num_state(), 2 * (16 + 6 * 16 + 6 * 32 + 6 * 64));
  EXPECT_EQ((*model)->variables().front().name, "conv2d/kernel");
  bool found = false;
  for (const auto& v : (*model)->variables()) {
    found = found || v.name == "stage3/block2/bn2/moving_variance";
  }
  EXPECT_TRUE(found);
  options.num_layers = 44;
  model = BuildModel("cifar10_resnet", options);
  ASSERT_TRUE(model.ok()) << model.status();
  options.num_layers = 21;
  absl::Status s = BuildModel("cifar10_resnet", options).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("6n + 2"), std::string::npos) << s;
}

TEST(Cifar10ResNetTest, TrainStepGradientMatchesNumeric) {
  // The smallest depth (8: one block per stage) on two images.
  ModelOptions options;
  options.num_layers = 8;
  auto model = *BuildModel("cifar10_resnet", options);
  const int64_t batch = 2;
  std::vector<float> params(model->num_params()), grads(model->num_params());
  std::vector<float> state(model->num_state()), stats(model->num_state());
  model->InitializeVariables(3, params.data(), state.data());
  SplitMix64 rng(4);
  for (float& p : params) p += 0.05f * (rng.Uniform() - 0.5f);
  std::vector<float> images(batch * 32 * 32 * 3);
  for (float& x : images) x = rng.Uniform() * 2 - 1;
  const float labels[] = {3, 7};
  model->TrainStep(params.data(), state.data(), images.data(), labels, batch, 1, grads.data(),
                   stats.data());
  auto loss = [&]() {
    std::vector<float> scratch(model->num_params()), s(model->num_state());
    return model
               ->TrainStep(params.data(), state.data(), images.data(), labels, batch, 1,
                           scratch.data(), s.data())
               .loss_sum /
           batch;
  };
  EXPECT_EQ(CheckLargestGradients(*model, grads, loss, 2e-3f, 3e-2, 0.1, &params),
            1 + 2 + 3 * 6 + 2);
  // Training reports batch statistics for every moving average.
  int nonzero = 0;
  for (float s : stats) nonzero += s != 0.0f;
  EXPECT_GT(nonzero, static_cast<int>(stats.size()) / 2);
}

}  // namespace
}  // namespace pstrain
