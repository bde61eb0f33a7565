// The example specs in examples/models/ parse, build and learn: a few SGD
// steps on one small batch of synthetic images bring its loss down.
#include <cmath>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "models/random.h"
#include "models/spec_builder.h"

namespace pstrain {
namespace {

struct Example {
  std::string file;
  int64_t variables;  // how many the spec declares
  float learning_rate;
  double max_ratio = 0.7;  // of the last step's loss to the first's
};

void PrintTo(const Example& e, std::ostream* os) { *os << e.file; }

class SpecExamplesTest : public ::testing::TestWithParam<Example> {};

TEST_P(SpecExamplesTest, BuildsAndLearnsABatch) {
  const Example& e = GetParam();
  std::ifstream in(std::string(PSTRAIN_SOURCE_DIR) + "/examples/models/" + e.file);
  std::stringstream text;
  text << in.rdbuf();
  ASSERT_FALSE(text.str().empty()) << e.file;
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(text.str(), e.file);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<Model>> built = BuildModelFromSpec(*spec, e.file);
  ASSERT_TRUE(built.ok()) << built.status();
  Model& m = **built;
  EXPECT_EQ(static_cast<int64_t>(m.variables().size()), e.variables);
  std::vector<float> params(m.num_params()), state(m.num_state()), grads(m.num_params()),
      stats(m.num_state());
  m.InitializeVariables(1, params.data(), state.data());
  constexpr int kBatch = 4;
  int64_t size = 1;
  for (int64_t d : m.input_shape()) size *= d;
  std::vector<float> images(kBatch * size);
  SplitMix64 rng(2);
  for (float& x : images) x = rng.Uniform();
  std::vector<float> labels = {1, 7, 3, 9};
  double first = 0, last = 0;
  for (int step = 0; step < 12; ++step) {
    const double loss = m.TrainStep(params.data(), state.data(), images.data(), labels.data(),
                                    kBatch, step, grads.data(), stats.data())
                            .loss_sum /
                        kBatch;
    ASSERT_TRUE(std::isfinite(loss)) << e.file << " step " << step;
    if (step == 0) first = loss;
    last = loss;
    for (int64_t i = 0; i < m.num_params(); ++i) params[i] -= e.learning_rate * grads[i];
  }
  EXPECT_LT(last, e.max_ratio * first) << e.file << ": loss " << first << " -> " << last;
}

INSTANTIATE_TEST_SUITE_P(Examples, SpecExamplesTest,
                         ::testing::Values(Example{"fashion_cnn_bn.yaml", 14, 0.05f},
                                           Example{"vgg_cifar_small.yaml", 14, 0.05f},
                                           Example{"resnet20.yaml", 99, 0.05f},
                                           Example{"two_tower_concat.yaml", 10, 0.3f, 0.85}),
                         [](const ::testing::TestParamInfo<Example>& info) {
                           std::string name = info.param.file.substr(0, info.param.file.find('.'));
                           return name;
                         });

}  // namespace
}  // namespace pstrain
