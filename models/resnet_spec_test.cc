// The CIFAR-10 ResNet as a model spec (Cifar10ResNetSpecYaml,
// models/specs/cifar10_resnet.yaml) is the compiled BuildCifar10ResNet model:
// the same variables, initial values, loss and gradients, with its residual
// blocks fused into the same ResidualBlock layers.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "models/cifar10_resnet.h"
#include "models/random.h"
#include "models/residual_block.h"
#include "models/spec_builder.h"

namespace pstrain {
namespace {

absl::StatusOr<std::unique_ptr<Model>> BuildFromText(const std::string& yaml,
                                                     const SpecBuildOptions& options = {}) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(yaml, "cifar10_resnet.yaml");
  if (!spec.ok()) return spec.status();
  return BuildModelFromSpec(*spec, "cifar10_resnet.yaml", options);
}

// A batch of `n` CIFAR-sized images and labels.
void RandomBatch(int n, std::vector<float>* images, std::vector<float>* labels) {
  SplitMix64 rng(5);
  images->resize(n * 32 * 32 * 3);
  for (float& x : *images) x = 2.0f * rng.Uniform() - 1.0f;
  labels->resize(n);
  for (float& y : *labels) y = static_cast<float>(rng.Next() % 10);
}

struct Step {
  std::vector<float> params, state, grads, stats;
  double loss = 0;
};

// Initial variables for seed 7, then one training step on a fixed batch.
Step TrainOneStep(Model& m) {
  Step s;
  s.params.resize(m.num_params());
  s.state.resize(m.num_state());
  s.grads.resize(m.num_params());
  s.stats.resize(m.num_state());
  m.InitializeVariables(7, s.params.data(), s.state.data());
  std::vector<float> images;
  std::vector<float> labels;
  constexpr int kBatch = 4;
  RandomBatch(kBatch, &images, &labels);
  s.loss = m.TrainStep(s.params.data(), s.state.data(), images.data(), labels.data(), kBatch, 3,
                       s.grads.data(), s.stats.data())
               .loss_sum;
  return s;
}

// The spec model is the compiled one, bit for bit.
void ExpectSameModel(Model& spec_model, Model& compiled) {
  EXPECT_EQ(spec_model.name(), compiled.name());
  EXPECT_EQ(spec_model.input_shape(), compiled.input_shape());
  EXPECT_EQ(spec_model.num_classes(), compiled.num_classes());
  const InputPreprocessing &pa = spec_model.input_preprocessing(),
                           &pb = compiled.input_preprocessing();
  EXPECT_EQ(pa.crop_padding, pb.crop_padding);
  EXPECT_EQ(pa.random_flip, pb.random_flip);
  EXPECT_EQ(pa.per_image_standardization, pb.per_image_standardization);
  ASSERT_EQ(spec_model.variables().size(), compiled.variables().size());
  for (size_t i = 0; i < compiled.variables().size(); ++i) {
    const VariableInfo &va = spec_model.variables()[i], &vb = compiled.variables()[i];
    EXPECT_EQ(va.name, vb.name) << i;
    EXPECT_EQ(va.shape, vb.shape) << vb.name;
    EXPECT_EQ(va.offset, vb.offset) << vb.name;
    EXPECT_EQ(va.trainable, vb.trainable) << vb.name;
    EXPECT_EQ(va.spec.initializer, vb.spec.initializer) << vb.name;
    EXPECT_EQ(va.spec.fan_in, vb.spec.fan_in) << vb.name;
    EXPECT_EQ(va.spec.fan_out, vb.spec.fan_out) << vb.name;
  }
  ASSERT_EQ(spec_model.num_params(), compiled.num_params());
  ASSERT_EQ(spec_model.num_state(), compiled.num_state());
  // The same layers: the blocks fused (profiling names every layer).
  spec_model.EnableProfiling(true);
  compiled.EnableProfiling(true);
  const Step a = TrainOneStep(spec_model);
  const Step b = TrainOneStep(compiled);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.grads, b.grads);
  EXPECT_EQ(a.stats, b.stats);
  std::vector<std::string> la, lb;
  for (const LayerTiming& t : spec_model.timings()) la.push_back(t.layer);
  for (const LayerTiming& t : compiled.timings()) lb.push_back(t.layer);
  EXPECT_EQ(la, lb);
}

class ResNetSpecTest : public ::testing::TestWithParam<int> {};

TEST_P(ResNetSpecTest, TheGeneratedSpecIsTheCompiledResNet) {
  const int num_layers = GetParam();
  const std::string yaml = Cifar10ResNetSpecYaml(num_layers, 1e-5);
  ASSERT_FALSE(yaml.empty());
  absl::StatusOr<std::unique_ptr<Model>> spec_model = BuildFromText(yaml);
  ASSERT_TRUE(spec_model.ok()) << spec_model.status() << "\n" << yaml;
  ResNetOptions options;
  options.num_layers = num_layers;
  options.batch_norm_epsilon = 1e-5f;
  absl::StatusOr<std::unique_ptr<Model>> compiled = BuildCifar10ResNet(options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ExpectSameModel(**spec_model, **compiled);
}

INSTANTIATE_TEST_SUITE_P(Depths, ResNetSpecTest, ::testing::Values(8, 20));

TEST(ResNetSpecTest, OtherEpsilonsToo) {
  absl::StatusOr<std::unique_ptr<Model>> spec_model = BuildFromText(Cifar10ResNetSpecYaml(8, 1e-3));
  ASSERT_TRUE(spec_model.ok()) << spec_model.status();
  ResNetOptions options;
  options.num_layers = 8;
  options.batch_norm_epsilon = 1e-3f;
  absl::StatusOr<std::unique_ptr<Model>> compiled = BuildCifar10ResNet(options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ExpectSameModel(**spec_model, **compiled);
}

TEST(ResNetSpecTest, BadDepthsGiveNoSpec) {
  EXPECT_EQ(Cifar10ResNetSpecYaml(21, 1e-5), "");
  EXPECT_EQ(Cifar10ResNetSpecYaml(2, 1e-5), "");
  EXPECT_EQ(Cifar10ResNetSpecYaml(20, 0), "");
}

// Fused or not, the spec computes the same function: the plain layers are
// the reference the fused block is checked against.
TEST(ResNetSpecTest, UnfusedLayersComputeTheSameLossAndGradients) {
  const std::string yaml = Cifar10ResNetSpecYaml(8, 1e-5);
  absl::StatusOr<std::unique_ptr<Model>> fused = BuildFromText(yaml);
  ASSERT_TRUE(fused.ok()) << fused.status();
  SpecBuildOptions plain_options;
  plain_options.fuse_residual_blocks = false;
  absl::StatusOr<std::unique_ptr<Model>> plain = BuildFromText(yaml, plain_options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  Model &f = **fused, &p = **plain;
  f.EnableProfiling(true);
  p.EnableProfiling(true);
  ASSERT_EQ(f.variables().size(), p.variables().size());
  for (size_t i = 0; i < f.variables().size(); ++i) {
    EXPECT_EQ(f.variables()[i].name, p.variables()[i].name);
    EXPECT_EQ(f.variables()[i].offset, p.variables()[i].offset);
  }
  const Step a = TrainOneStep(f);
  const Step b = TrainOneStep(p);
  // 2 + 3 blocks + 2 layers fused; 2 + 6 + 8 + 8 + 2 plain.
  EXPECT_EQ(f.timings().size(), 7u);
  EXPECT_EQ(p.timings().size(), 26u);
  EXPECT_EQ(a.params, b.params);
  EXPECT_NEAR(a.loss, b.loss, 1e-6 * std::abs(b.loss) + 1e-6);
  ASSERT_EQ(a.grads.size(), b.grads.size());
  double max_grad = 0;
  for (float g : b.grads) max_grad = std::max(max_grad, static_cast<double>(std::abs(g)));
  for (size_t i = 0; i < a.grads.size(); ++i) {
    ASSERT_NEAR(a.grads[i], b.grads[i], 1e-5 * max_grad) << i;
  }
  for (size_t i = 0; i < a.stats.size(); ++i) {
    ASSERT_NEAR(a.stats[i], b.stats[i], 1e-5 * (1 + std::abs(b.stats[i]))) << i;
  }
}

// The file is the generated ResNet-20 text, comments aside.
std::string WithoutComments(const std::string& text) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const absl::string_view stripped = absl::StripAsciiWhitespace(line);
    if (stripped.empty() || stripped.front() == '#') continue;
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

TEST(ResNetSpecTest, TheSpecFileIsTheGeneratedResNet20) {
  std::ifstream in(std::string(PSTRAIN_SOURCE_DIR) + "/models/specs/cifar10_resnet.yaml");
  std::stringstream text;
  text << in.rdbuf();
  ASSERT_FALSE(text.str().empty());
  EXPECT_EQ(WithoutComments(text.str()), WithoutComments(Cifar10ResNetSpecYaml(20, 1e-5)));
  absl::StatusOr<std::unique_ptr<Model>> spec_model = BuildFromText(text.str());
  ASSERT_TRUE(spec_model.ok()) << spec_model.status();
  ResNetOptions options;
  options.num_layers = 20;
  absl::StatusOr<std::unique_ptr<Model>> compiled = BuildCifar10ResNet(options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ExpectSameModel(**spec_model, **compiled);
}

// What the spec builder sets on a fused block reaches its variables as it
// would the layers written out.
TEST(ResidualBlockOptionsTest, NamesInitializersFrozenAndDecayReachTheVariables) {
  ResidualBlockOptions o;
  o.filters = 4;
  o.conv1_name = "a";
  o.bn1_name = "b";
  o.conv2_name = "c/d";
  o.bn2_name = "e";
  o.conv2_initializer = Initializer::kHeNormal;
  o.conv2_frozen = true;
  o.bn2_decay = 0.5f;
  ResidualBlock block("blk", o);
  ASSERT_TRUE(block.Build({4, 4, 4}).ok());
  std::vector<std::string> names;
  for (const VariableSpec& v : block.Variables()) {
    names.push_back(v.name);
    EXPECT_EQ(v.frozen, v.name == "c/d/kernel") << v.name;
    EXPECT_EQ(v.decay, v.name.starts_with("e/moving") ? 0.5f : -1.0f) << v.name;
    if (v.name == "c/d/kernel") {
      EXPECT_EQ(v.initializer.kind, Initializer::kHeNormal);
    } else if (v.name == "a/kernel") {
      EXPECT_EQ(v.initializer.kind, Initializer::kGlorotUniform);
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"a/kernel", "b/gamma", "b/beta", "b/moving_mean",
                                             "b/moving_variance", "c/d/kernel", "e/gamma", "e/beta",
                                             "e/moving_mean", "e/moving_variance"}));
}

}  // namespace
}  // namespace pstrain
