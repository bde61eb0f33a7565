// The built-in models built from their specs train exactly as the compiled
// models did: the same losses, step by step, for a seed; and those losses
// are pinned, so a change to the specs, the builder or the layers that moves
// them is seen.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/cifar10_resnet.h"
#include "models/mnist_cnn.h"
#include "models/random.h"
#include "models/registry.h"

namespace pstrain {
namespace {

// The mean loss of each of `steps` plain SGD steps (learning rate 0.05) on
// one fixed synthetic batch, from the variables seed 1 gives.
std::vector<double> FirstLosses(Model* model, int steps) {
  constexpr int64_t kBatch = 8;
  const int64_t example = NumElements(model->input_shape());
  std::vector<float> images(kBatch * example);
  std::vector<float> labels(kBatch);
  SplitMix64 rng(7);
  for (float& x : images) x = rng.Uniform();
  for (float& y : labels) y = static_cast<float>(rng.Next() % model->num_classes());
  std::vector<float> params(model->num_params()), state(model->num_state());
  model->InitializeVariables(1, params.data(), state.data());
  std::vector<float> grads(params.size()), stats(state.size());
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    const LossResult r = model->TrainStep(params.data(), state.data(), images.data(), labels.data(),
                                          kBatch, step, grads.data(), stats.data());
    losses.push_back(r.loss_sum / kBatch);
    for (size_t i = 0; i < params.size(); ++i) params[i] -= 0.05f * grads[i];
  }
  return losses;
}

void ExpectPinned(const std::vector<double>& losses, const std::vector<double>& pinned) {
  ASSERT_EQ(losses.size(), pinned.size());
  for (size_t i = 0; i < losses.size(); ++i) {
    // Kernels differ in summation order between CPUs (AVX-512 or AVX2).
    EXPECT_NEAR(losses[i], pinned[i], 1e-3 * std::abs(pinned[i])) << "step " << i;
  }
}

TEST(BuiltinLossesTest, MnistCnnFromItsSpecTrainsAsTheCompiledModel) {
  std::unique_ptr<Model> spec = *BuildModel("mnist_cnn", ModelOptions());
  std::unique_ptr<Model> compiled = *BuildMnistCnn(ModelOptions());
  const std::vector<double> losses = FirstLosses(spec.get(), 3);
  EXPECT_EQ(losses, FirstLosses(compiled.get(), 3));
  ExpectPinned(losses, {2.29037077, 1.95837147, 1.67416808});
}

TEST(BuiltinLossesTest, ResNet20FromItsSpecTrainsAsTheCompiledModel) {
  ModelOptions options;
  options.num_layers = 20;
  std::unique_ptr<Model> spec = *BuildModel("cifar10_resnet", options);
  ResNetOptions resnet;
  resnet.num_layers = 20;
  std::unique_ptr<Model> compiled = *BuildCifar10ResNet(resnet);
  const std::vector<double> losses = FirstLosses(spec.get(), 3);
  EXPECT_EQ(losses, FirstLosses(compiled.get(), 3));
  ExpectPinned(losses, {3.65178161, 1.44845605, 0.548852934});
}

}  // namespace
}  // namespace pstrain
