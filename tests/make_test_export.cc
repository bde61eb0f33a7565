// make_test_export EXPORT_BASE [SEED [MODEL]]: writes a version of a model
// under EXPORT_BASE and prints its dir. A servable model in a fraction of a
// second, for tests that need one but not a trained one.
// Without MODEL: mnist_cnn with its initial values for SEED (default 1).
// With MODEL (a built-in name, NAME:NUM_LAYERS for cifar10_resnet's depth,
// or a model spec .yaml file): its initial values for SEED after three SGD
// steps on synthetic images, with the batch-norm moving statistics set to the
// last batch's, so that biases, gamma, beta and the statistics all hold
// values of their own (what the ONNX agreement tests need).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "common/env.h"
#include "export/export.h"
#include "models/registry.h"

namespace {

absl::StatusOr<std::unique_ptr<pstrain::Model>> Build(const std::string& model,
                                                      pstrain::ModelOptions* options) {
  if (absl::EndsWith(model, ".yaml")) {
    absl::StatusOr<std::string> text = pstrain::Env::Default()->ReadFile(model);
    if (!text.ok()) return text.status();
    return pstrain::BuildModelFromSpecText(*text, model);
  }
  std::string name = model;
  const size_t colon = model.find(':');
  if (colon != std::string::npos) {
    name = model.substr(0, colon);
    if (!absl::SimpleAtoi(model.substr(colon + 1), &options->num_layers)) {
      return absl::InvalidArgumentError("MODEL is NAME or NAME:NUM_LAYERS, got " + model);
    }
  }
  return pstrain::BuildModel(name, *options);
}

// Pixels in [0, 1] from a hash, standardized per image when the model's
// input is.
void SyntheticBatch(const pstrain::Model& model, int64_t batch, uint64_t seed,
                    std::vector<float>* images, std::vector<float>* labels) {
  const int64_t n = pstrain::NumElements(model.input_shape());
  images->resize(batch * n);
  labels->resize(batch);
  uint64_t state = seed * 0x9e3779b97f4a7c15ULL + 1;
  const auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (float& x : *images) x = static_cast<float>(next() % 256) / 255.0f;
  for (float& y : *labels) y = static_cast<float>(next() % model.num_classes());
  if (!model.input_preprocessing().per_image_standardization) return;
  for (int64_t i = 0; i < batch; ++i) {
    float* x = images->data() + i * n;
    double sum = 0, squares = 0;
    for (int64_t k = 0; k < n; ++k) {
      sum += x[k];
      squares += double{x[k]} * x[k];
    }
    const double mean = sum / n;
    const double stddev = std::sqrt(std::max(squares / n - mean * mean, 0.0));
    const double floor = 1.0 / (255.0 * std::sqrt(static_cast<double>(n)));
    for (int64_t k = 0; k < n; ++k)
      x[k] = static_cast<float>((x[k] - mean) / std::max(stddev, floor));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: make_test_export EXPORT_BASE [SEED [MODEL]]\n");
    return 2;
  }
  const uint64_t seed = argc >= 3 ? std::strtoull(argv[2], nullptr, 10) : 1;
  pstrain::ModelOptions options;
  absl::StatusOr<std::unique_ptr<pstrain::Model>> model =
      argc == 4 ? Build(argv[3], &options) : pstrain::BuildModel("mnist_cnn", options);
  if (!model.ok()) {
    std::fprintf(stderr, "make_test_export: %s\n", model.status().ToString().c_str());
    return 1;
  }
  pstrain::Model& m = **model;
  std::vector<float> params(m.num_params()), state(m.num_state());
  m.InitializeVariables(seed, params.data(), state.data());
  if (argc == 4) {
    constexpr int64_t kBatch = 16;
    constexpr float kLearningRate = 0.05f;
    std::vector<float> grads(params.size()), batch_stats(state.size()), images;
    std::vector<float> labels;
    for (int step = 0; step < 3; ++step) {
      SyntheticBatch(m, kBatch, seed + step, &images, &labels);
      m.TrainStep(params.data(), state.data(), images.data(), labels.data(), kBatch, seed + step,
                  grads.data(), batch_stats.data());
      for (size_t i = 0; i < params.size(); ++i) params[i] -= kLearningRate * grads[i];
      state = batch_stats;
    }
  }
  absl::StatusOr<std::string> dir =
      pstrain::WriteExport(pstrain::Env::Default(), argv[1], m, options,
                           /*global_step=*/0, /*hparams_yaml=*/"", params, state);
  if (!dir.ok()) {
    std::fprintf(stderr, "make_test_export: %s\n", dir.status().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", dir->c_str());
  return 0;
}
