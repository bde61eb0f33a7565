#include "models/spec_builder.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "models/conv2d.h"
#include "models/dense.h"
#include "models/flatten.h"
#include "models/model_options.h"
#include "models/random.h"
#include "models/registry.h"
#include "models/sparse_input.h"

namespace pstrain {
namespace {

std::string ReadSource(const std::string& path) {
  std::ifstream in(std::string(PSTRAIN_SOURCE_DIR) + "/" + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::unique_ptr<Model>> Build(const std::string& yaml,
                                             const SpecBuildOptions& options = {}) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(yaml, "net.yaml");
  if (!spec.ok()) return spec.status();
  return BuildModelFromSpec(*spec, "net.yaml", options);
}

// A batch of `n` images in [0, 1] and labels for `model` (classes, or a
// regression head's values in [-2, 2]).
void RandomBatch(const Model& model, int n, std::vector<float>* images,
                 std::vector<float>* labels) {
  int64_t size = 1;
  for (int64_t d : model.input_shape()) size *= d;
  SplitMix64 rng(11);
  images->resize(n * size);
  for (float& x : *images) x = rng.Uniform();
  labels->resize(n);
  for (float& y : *labels) {
    y = model.head() == Head::kRegression ? rng.Uniform() * 4 - 2
                                          : static_cast<float>(rng.Next() % model.num_classes());
  }
}

// The decays of a model's state variables (batch norms' moving statistics).
std::vector<float> StateDecaysOf(const Model& model) {
  std::vector<float> decays;
  for (const VariableInfo& v : model.variables()) {
    if (!v.trainable) decays.push_back(v.spec.decay);
  }
  return decays;
}

// A spec's batch_norm without momentum has Keras' default decay, 0.99 (the
// job's batch_norm_decay only where the job sets one); cifar10_resnet keeps
// the CIFAR-10 estimator's 0.997, written into its spec.
TEST(SpecBuilderTest, BatchNormsWithoutMomentumTakeKerasDefaultUnlessTheJobSetsOne) {
  const std::string yaml = ReadSource("examples/models/fashion_cnn_bn.yaml");
  absl::StatusOr<std::unique_ptr<Model>> model = BuildModelFromSpecText(yaml, "fashion_cnn_bn");
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<float> decays = StateDecaysOf(**model);
  ASSERT_EQ(decays.size(), 4u);  // two batch norms' moving mean and variance
  for (float d : decays) EXPECT_EQ(d, 0.99f);

  // A job that sets batch_norm_decay: its decay for them; a layer's own
  // momentum wins over it.
  TrainingSpec t;
  t.model = "fashion_cnn_bn";
  std::string text = yaml;
  const size_t first = text.find("{relu: true}");
  ASSERT_NE(first, std::string::npos);
  text.replace(first, std::strlen("{relu: true}"), "{relu: true, momentum: 0.9}");
  t.model_spec = *ParseJobModelSpec(text, "fashion_cnn_bn.yaml");
  model = BuildJobModel(t);  // batch_norm_decay not set
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(StateDecaysOf(**model), (std::vector<float>{0.9f, 0.9f, 0.99f, 0.99f}));
  t.batch_norm_decay = 0.95;
  model = BuildJobModel(t);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(StateDecaysOf(**model), (std::vector<float>{0.9f, 0.9f, 0.95f, 0.95f}));

  // cifar10_resnet: 0.997 for every batch norm (fused blocks' too), or the
  // job's.
  TrainingSpec resnet;
  resnet.model = "cifar10_resnet";
  resnet.num_layers = 8;
  model = BuildJobModel(resnet);
  ASSERT_TRUE(model.ok()) << model.status();
  decays = StateDecaysOf(**model);
  ASSERT_EQ(decays.size(), 14u);  // 7 batch norms: the stem's, 2 per block
  for (float d : decays) EXPECT_EQ(d, 0.997f);
  resnet.batch_norm_decay = 0.9;
  model = BuildJobModel(resnet);
  ASSERT_TRUE(model.ok()) << model.status();
  for (float d : StateDecaysOf(**model)) EXPECT_EQ(d, 0.9f);
}

TEST(SpecBuilderTest, TheMnistCnnSpecIsTheCompiledMnistCnn) {
  const std::string yaml = ReadSource("models/specs/mnist_cnn.yaml");
  ASSERT_FALSE(yaml.empty());
  absl::StatusOr<std::unique_ptr<Model>> spec_model = Build(yaml);
  ASSERT_TRUE(spec_model.ok()) << spec_model.status();
  absl::StatusOr<std::unique_ptr<Model>> compiled = BuildModel("mnist_cnn", ModelOptions());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  Model& a = **spec_model;
  Model& b = **compiled;
  EXPECT_EQ(a.name(), b.name());
  ASSERT_EQ(a.variables().size(), b.variables().size());
  for (size_t i = 0; i < a.variables().size(); ++i) {
    const VariableInfo &va = a.variables()[i], &vb = b.variables()[i];
    EXPECT_EQ(va.name, vb.name);
    EXPECT_EQ(va.shape, vb.shape) << va.name;
    EXPECT_EQ(va.offset, vb.offset) << va.name;
    EXPECT_EQ(va.trainable, vb.trainable) << va.name;
    EXPECT_EQ(va.spec.initializer, vb.spec.initializer) << va.name;
  }
  ASSERT_EQ(a.num_params(), b.num_params());
  ASSERT_EQ(a.num_state(), b.num_state());
  // The same initial values for a seed, the same loss and gradients for a batch.
  std::vector<float> pa(a.num_params()), pb(b.num_params()), sa(a.num_state()), sb(b.num_state());
  a.InitializeVariables(7, pa.data(), sa.data());
  b.InitializeVariables(7, pb.data(), sb.data());
  ASSERT_EQ(pa, pb);
  std::vector<float> images;
  std::vector<float> labels;
  RandomBatch(a, 4, &images, &labels);
  std::vector<float> ga(a.num_params()), gb(b.num_params()), ba(1), bb(1);
  const LossResult la =
      a.TrainStep(pa.data(), sa.data(), images.data(), labels.data(), 4, 3, ga.data(), ba.data());
  const LossResult lb =
      b.TrainStep(pb.data(), sb.data(), images.data(), labels.data(), 4, 3, gb.data(), bb.data());
  EXPECT_EQ(la.loss_sum, lb.loss_sum);
  EXPECT_EQ(ga, gb);
}

TEST(SpecBuilderTest, EveryLayerTypeBuildsAndTrainsAStep) {
  absl::StatusOr<std::unique_ptr<Model>> model = Build(R"(name: all_layers
input: [12, 12, 3]
classes: 4
preprocessing: {crop_padding: 2, random_flip: true, per_image_standardization: true}
layers:
  - conv2d: {filters: 4, kernel: 3, padding: same, activation: tanh}
  - batch_norm: {relu: true}
  - average_pool: {pool: 2}
  - conv2d: {filters: 6, kernel: 3, strides: 2, use_bias: false, kernel_initializer: he_normal}
  - leaky_relu: {alpha: 0.1}
  - max_pool: {pool: 3, strides: 1, padding: same}
  - sigmoid
  - relu
  - tanh
  - global_average_pool
  - dense: {units: 8, activation: leaky_relu}
  - dropout: {rate: 0.25}
  - dense: {units: 4, activation: sigmoid}
)");
  ASSERT_TRUE(model.ok()) << model.status();
  Model& m = **model;
  EXPECT_EQ(m.input_preprocessing().crop_padding, 2);
  EXPECT_TRUE(m.input_preprocessing().random_flip);
  EXPECT_TRUE(m.input_preprocessing().per_image_standardization);
  std::vector<std::string> names;
  for (const VariableInfo& v : m.variables()) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "conv2d/kernel", "conv2d/bias", "batch_normalization/gamma",
                       "batch_normalization/beta", "batch_normalization/moving_mean",
                       "batch_normalization/moving_variance", "conv2d_1/kernel", "dense/kernel",
                       "dense/bias", "dense_1/kernel", "dense_1/bias"}));
  std::vector<float> params(m.num_params()), state(m.num_state()), grads(m.num_params()),
      stats(m.num_state());
  m.InitializeVariables(1, params.data(), state.data());
  std::vector<float> images;
  std::vector<float> labels;
  RandomBatch(m, 3, &images, &labels);
  const LossResult r = m.TrainStep(params.data(), state.data(), images.data(), labels.data(), 3, 1,
                                   grads.data(), stats.data());
  EXPECT_TRUE(std::isfinite(r.loss_sum));
  double norm = 0;
  for (float g : grads) norm += static_cast<double>(g) * g;
  EXPECT_GT(norm, 0.0);
}

TEST(SpecBuilderTest, InitializersTakeTheirParameters) {
  absl::StatusOr<std::unique_ptr<Model>> model = Build(R"(input: [1, 1, 400]
classes: 2
layers:
  - flatten
  - dense: {units: 50, kernel_initializer: truncated_normal(0.2), bias_initializer: constant(0.5)}
  - dense: {units: 2, kernel_initializer: ones, bias_initializer: truncated_normal}
)");
  ASSERT_TRUE(model.ok()) << model.status();
  Model& m = **model;
  std::vector<float> params(m.num_params()), none;
  m.InitializeVariables(9, params.data(), none.data());
  const VariableInfo& kernel = m.variables()[0];
  double sum = 0, squares = 0, largest = 0;
  for (int64_t i = 0; i < kernel.size; ++i) {
    const double x = params[kernel.offset + i];
    sum += x;
    squares += x * x;
    largest = std::max(largest, std::abs(x));
  }
  // Truncated at 2 stddev: the spread is 0.88 stddev, nothing beyond 0.4.
  const double mean = sum / kernel.size;
  const double stddev = std::sqrt(squares / kernel.size - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(stddev, 0.2 * 0.88, 0.01);
  EXPECT_LE(largest, 0.4);
  const VariableInfo& bias = m.variables()[1];
  for (int64_t i = 0; i < bias.size; ++i) EXPECT_EQ(params[bias.offset + i], 0.5f);
  const VariableInfo& ones = m.variables()[2];
  for (int64_t i = 0; i < ones.size; ++i) EXPECT_EQ(params[ones.offset + i], 1.0f);
  const VariableInfo& small = m.variables()[3];
  for (int64_t i = 0; i < small.size; ++i) EXPECT_LE(std::abs(params[small.offset + i]), 0.1f);
}

TEST(SpecBuilderTest, ShapesThatDoNotFitNameTheLayerItsLineAndItsInput) {
  const std::string head = "input: [8, 8, 1]\nclasses: 3\nlayers:\n";
  struct Case {
    std::string layers;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {"  - dense: {units: 3}\n",
       {"net.yaml: layer dense (dense, line 4) cannot take its input [8, 8, 1]", "Flatten"}},
      {"  - conv2d: {filters: 2, kernel: 9}\n  - flatten\n  - dense: {units: 3}\n",
       {"layer conv2d (conv2d, line 4) cannot take its input [8, 8, 1]"}},
      {"  - max_pool: {pool: 16}\n", {"layer max_pooling2d (max_pool, line 4)", "does not fit"}},
      {"  - flatten\n  - dense: {units: 5}\n",
       {"the last layer (dense) gives [5] but the model has classes: 3", "dense: {units: 3}"}},
      {"  - global_average_pool\n  - flatten\n", {"gives [1] but the model has classes: 3"}},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::unique_ptr<Model>> model = Build(head + c.layers);
    ASSERT_FALSE(model.ok()) << c.layers;
    EXPECT_TRUE(absl::IsInvalidArgument(model.status()));
    for (const std::string& s : c.says) {
      EXPECT_NE(model.status().message().find(s), std::string::npos)
          << c.layers << " -> " << model.status().message();
    }
  }
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
namespace {

// Central differences of the summed loss against the analytic gradient, for
// `samples` parameters spread over the vector.
void ExpectModelGradientsMatchNumeric(Model& m, int samples) {
  std::vector<float> params(m.num_params()), state(m.num_state()), grads(m.num_params()),
      stats(m.num_state());
  m.InitializeVariables(5, params.data(), state.data());
  std::vector<float> images;
  std::vector<float> labels;
  RandomBatch(m, 3, &images, &labels);
  m.TrainStep(params.data(), state.data(), images.data(), labels.data(), 3, 1, grads.data(),
              stats.data());
  auto loss = [&]() {
    std::vector<float> g(m.num_params()), s(m.num_state());
    return m
        .TrainStep(params.data(), state.data(), images.data(), labels.data(), 3, 1, g.data(),
                   s.data())
        .loss_sum;
  };
  const int64_t step = std::max<int64_t>(1, m.num_params() / samples);
  for (int64_t i = 0; i < m.num_params(); i += step) {
    const float saved = params[i];
    const float eps = 1e-2f;
    params[i] = saved + eps;
    const double up = loss();
    params[i] = saved - eps;
    const double down = loss();
    params[i] = saved;
    // TrainStep's gradient is of the mean loss; the differences are of the sum.
    const double numeric = (up - down) / (2 * eps) / 3;
    EXPECT_NEAR(grads[i], numeric, 1e-2 * std::max(1.0, std::abs(numeric))) << "param " << i;
  }
}

TEST(SpecGraphTest, ResidualAndConcatGraphsMatchNumericGradients) {
  absl::StatusOr<std::unique_ptr<Model>> model = Build(R"(name: graph
input: [5, 5, 2]
classes: 3
layers:
  - conv2d: {filters: 3, kernel: 3, padding: same, activation: tanh, name: stem}
  - conv2d: {filters: 3, kernel: 3, padding: same, activation: sigmoid}
  - add: {inputs: [stem]}
  - conv2d: {filters: 2, kernel: 1, input: input, name: side}
  - tanh
  - concat: {inputs: [add, stem], name: joined}
  - identity
  - average_pool: {pool: 2, strides: 1, padding: same}
  - add: {inputs: [joined, joined]}
  - global_average_pool
  - dense: {units: 3}
)");
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<std::string> names;
  for (const VariableInfo& v : (*model)->variables()) names.push_back(v.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"stem/kernel", "stem/bias", "conv2d/kernel", "conv2d/bias",
                                      "side/kernel", "side/bias", "dense/kernel", "dense/bias"}));
  ExpectModelGradientsMatchNumeric(**model, 60);
}

// A regression head of each loss builds with its options and its gradients
// through the layers are the loss's.
TEST(SpecGraphTest, ARegressionHeadsGradientsMatchNumericGradientsForEachLoss) {
  for (const std::string loss : {"loss: mse\n", "loss: mae\n", "loss: huber\nhuber_delta: 0.5\n"}) {
    absl::StatusOr<std::unique_ptr<Model>> model =
        Build("input: [5]\nhead: regression\n" + loss +
              "layers:\n  - dense: {units: 4, activation: tanh}\n  - dense: {units: 1}\n");
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ((*model)->head(), Head::kRegression);
    EXPECT_EQ((*model)->num_classes(), 0);
    EXPECT_EQ((*model)->regression_loss().loss, loss.starts_with("loss: mse") ? RegressionLoss::kMse
                                                : loss.starts_with("loss: mae")
                                                    ? RegressionLoss::kMae
                                                    : RegressionLoss::kHuber);
    ExpectModelGradientsMatchNumeric(**model, 30);
  }
  absl::StatusOr<std::unique_ptr<Model>> wide =
      Build("input: [5]\nhead: regression\nlayers:\n  - dense: {units: 2}\n");
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("gives [2], but with head: regression the last layer "
                                         "gives one value: end with dense: {units: 1}"),
            std::string::npos)
      << wide.status();
}

TEST(SpecGraphTest, AChainWrittenWithInputIsTheSameComputation) {
  const std::string chain =
      "input: [6, 6, 1]\nclasses: 2\nlayers:\n  - conv2d: {filters: 2, kernel: 3}\n"
      "  - flatten\n  - dense: {units: 2}\n";
  const std::string named =
      "input: [6, 6, 1]\nclasses: 2\nlayers:\n  - conv2d: {filters: 2, kernel: 3, input: input}\n"
      "  - identity: {name: j}\n  - flatten: {input: j}\n  - dense: {units: 2}\n";
  absl::StatusOr<std::unique_ptr<Model>> a = Build(chain), b = Build(named);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  std::vector<float> pa((*a)->num_params()), ga(pa.size()), gb(pa.size()), none;
  ASSERT_EQ((*a)->num_params(), (*b)->num_params());
  (*a)->InitializeVariables(3, pa.data(), none.data());
  std::vector<float> images;
  std::vector<float> labels;
  RandomBatch(**a, 2, &images, &labels);
  const double la = (*a)->TrainStep(pa.data(), none.data(), images.data(), labels.data(), 2, 1,
                                    ga.data(), none.data())
                        .loss_sum;
  const double lb = (*b)->TrainStep(pa.data(), none.data(), images.data(), labels.data(), 2, 1,
                                    gb.data(), none.data())
                        .loss_sum;
  EXPECT_DOUBLE_EQ(la, lb);
  EXPECT_EQ(ga, gb);
}

TEST(SpecGraphTest, BadGraphsAreRefusedNamingTheLayerAndLine) {
  const std::string head = "input: [4, 4, 2]\nclasses: 2\nlayers:\n";
  struct Case {
    std::string layers;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"  - conv2d: {filters: 2, kernel: 1, name: a}\n  - add: {inputs: [b]}\n  - flatten\n"
       "  - dense: {units: 2}\n",
       "layer add (line 5) takes b (did you mean a?), which is no layer's name"},
      {"  - conv2d: {filters: 2, kernel: 1, name: a}\n  - add: {inputs: [stme]}\n", "takes stme"},
      {"  - conv2d: {filters: 2, kernel: 1, name: stem}\n  - add: {inputs: [stme]}\n",
       "(did you mean stem?)"},
      {"  - flatten: {input: d}\n  - dense: {units: 2, name: d}\n",
       "layer flatten (line 4) takes d, which comes after it"},
      {"  - conv2d: {filters: 2, kernel: 1, name: a}\n  - conv2d: {filters: 3, kernel: 1}\n"
       "  - flatten: {input: a}\n  - dense: {units: 2}\n",
       "the output of layer conv2d (line 5) is not taken by any later layer"},
      {"  - add\n", "add needs inputs"},
      {"  - flatten: {inputs: [input]}\n", "only add, concat and dot_interaction take inputs"},
      {"  - identity: {name: input}\n", "input names the model's input"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ModelSpec> spec = ParseModelSpec(head + c.layers, "net.yaml");
    ASSERT_FALSE(spec.ok()) << c.layers;
    EXPECT_NE(spec.status().message().find(c.says), std::string::npos)
        << c.layers << " -> " << spec.status().message();
  }
  // Shapes that do not go together are the builder's to find.
  struct Shapes {
    std::string layers;
    std::string says;
  };
  for (const Shapes& c : std::vector<Shapes>{
           {"  - conv2d: {filters: 2, kernel: 1, name: a}\n  - conv2d: {filters: 3, kernel: 1}\n"
            "  - add: {inputs: [a]}\n  - flatten\n  - dense: {units: 2}\n",
            "layer add (add, line 6) cannot take its inputs [4, 4, 3], [4, 4, 2]: add: add "
            "takes inputs of one shape"},
           {"  - conv2d: {filters: 2, kernel: 3, name: a}\n  - concat: {inputs: [input]}\n"
            "  - flatten\n  - dense: {units: 2}\n",
            "layer concatenate (concat, line 5) cannot take its inputs [2, 2, 2], [4, 4, 2]"},
       }) {
    absl::StatusOr<std::unique_ptr<Model>> model = Build(head + c.layers);
    ASSERT_FALSE(model.ok()) << c.layers;
    EXPECT_NE(model.status().message().find(c.says), std::string::npos)
        << c.layers << " -> " << model.status().message();
  }
}

// Two residual blocks written out: an identity one (r) and a widening,
// strided one with its shortcut first (w), with initializers and epsilons of
// their own.
constexpr char kResidualSpec[] = R"(input: [6, 6, 4]
classes: 3
layers:
  - conv2d: {filters: 4, kernel: 3, padding: same, name: stem}
  - conv2d: {name: r/a, filters: 4, kernel: 3, padding: same, use_bias: false, kernel_initializer: he_normal}
  - batch_norm: {name: r/b, epsilon: 0.01, relu: true}
  - conv2d: {name: r/c, filters: 4, kernel: 3, padding: fixed, use_bias: false, kernel_initializer: truncated_normal(0.1)}
  - batch_norm: {name: r/d}
  - add: {name: sum, inputs: [stem]}
  - relu: {name: r/out}
  - average_pool: {name: w/pool, pool: 2}
  - pad_channels: {name: w/pad, filters: 8}
  - conv2d: {name: w/conv1, input: r/out, filters: 8, kernel: 3, strides: 2, padding: fixed, use_bias: false}
  - batch_norm: {name: w/bn1, relu: true}
  - conv2d: {name: w/conv2, filters: 8, kernel: 3, padding: same, use_bias: false}
  - batch_norm: {name: w/bn2, epsilon: 0.0001}
  - add: {name: w/add, inputs: [w/pad]}
  - relu: {name: w/out}
  - global_average_pool
  - dense: {units: 3}
)";

// The model's layers by name (what profiling reports).
std::vector<std::string> LayerNames(Model& m) {
  m.EnableProfiling(true);
  std::vector<std::string> names;
  for (const LayerTiming& t : m.timings()) names.push_back(t.layer);
  return names;
}

struct StepResult {
  std::vector<float> params, grads, stats;
  double loss = 0;
};

StepResult OneStep(Model& m) {
  StepResult r;
  r.params.resize(m.num_params());
  std::vector<float> state(m.num_state());
  r.grads.resize(m.num_params());
  r.stats.resize(m.num_state());
  m.InitializeVariables(4, r.params.data(), state.data());
  std::vector<float> images;
  std::vector<float> labels;
  RandomBatch(m, 3, &images, &labels);
  r.loss = m.TrainStep(r.params.data(), state.data(), images.data(), labels.data(), 3, 2,
                       r.grads.data(), r.stats.data())
               .loss_sum;
  return r;
}

TEST(ResidualFusionTest, BlocksBecomeResidualBlocksComputingWhatTheLayersDo) {
  absl::StatusOr<std::unique_ptr<Model>> fused = Build(kResidualSpec);
  ASSERT_TRUE(fused.ok()) << fused.status();
  SpecBuildOptions no_fusion;
  no_fusion.fuse_residual_blocks = false;
  absl::StatusOr<std::unique_ptr<Model>> plain = Build(kResidualSpec, no_fusion);
  ASSERT_TRUE(plain.ok()) << plain.status();
  Model &f = **fused, &p = **plain;
  EXPECT_EQ(LayerNames(f),
            (std::vector<std::string>{"stem", "r", "w", "global_average_pooling2d", "dense"}));
  EXPECT_EQ(LayerNames(p).size(), 17u);
  // The same variables in the same places, with the spec's initializers.
  ASSERT_EQ(f.variables().size(), p.variables().size());
  for (size_t i = 0; i < f.variables().size(); ++i) {
    const VariableInfo &a = f.variables()[i], &b = p.variables()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.shape, b.shape) << b.name;
    EXPECT_EQ(a.offset, b.offset) << b.name;
    EXPECT_EQ(a.trainable, b.trainable) << b.name;
    EXPECT_EQ(a.spec.initializer, b.spec.initializer) << b.name;
  }
  EXPECT_EQ(f.variables()[2].name, "r/a/kernel");
  EXPECT_EQ(f.variables()[2].spec.initializer.kind, Initializer::kHeNormal);
  EXPECT_EQ(f.variables()[7].name, "r/c/kernel");
  EXPECT_EQ(f.variables()[7].spec.initializer.kind, Initializer::kTruncatedNormal);
  // The same loss, gradients and batch statistics (to rounding: the fused
  // shortcut sums in another order). The epsilons are the spec's: 0.01 on
  // a batch of 3 would show.
  const StepResult a = OneStep(f), b = OneStep(p);
  EXPECT_EQ(a.params, b.params);
  EXPECT_NEAR(a.loss, b.loss, 1e-5 * std::abs(b.loss));
  double largest = 0;
  for (float g : b.grads) largest = std::max(largest, static_cast<double>(std::abs(g)));
  ASSERT_GT(largest, 0);
  for (size_t i = 0; i < a.grads.size(); ++i) {
    ASSERT_NEAR(a.grads[i], b.grads[i], 1e-5 * largest) << i;
  }
  for (size_t i = 0; i < a.stats.size(); ++i) {
    ASSERT_NEAR(a.stats[i], b.stats[i], 1e-5 * (1 + std::abs(b.stats[i]))) << i;
  }
}

TEST(ResidualFusionTest, AnythingButThePatternIsLeftToThePlainLayers) {
  struct Case {
    std::string what;
    std::vector<std::pair<std::string, std::string>> edits;
    std::vector<std::string> fused;  // the blocks still fused
  };
  const std::vector<Case> cases = {
      {"a bias",
       {{"r/c, filters: 4, kernel: 3, padding: fixed, use_bias: false",
         "r/c, filters: 4, kernel: 3, padding: fixed"}},
       {"w"}},
      {"no relu after the first batch norm",
       {{"epsilon: 0.01, relu: true", "epsilon: 0.01"}},
       {"w"}},
      {"a relu after the second batch norm", {{"name: r/d}", "name: r/d, relu: true}"}}, {"w"}},
      {"a 5x5 kernel",
       {{"name: r/a, filters: 4, kernel: 3", "name: r/a, filters: 4, kernel: 5"}},
       {"w"}},
      {"an activation",
       {{"kernel: 3, padding: same, use_bias: false}",
         "kernel: 3, padding: same, use_bias: false, activation: tanh}"}},
       {"r"}},
      {"no common name prefix", {{"name: r/a", "name: ra"}}, {"w"}},
      {"a shortcut from elsewhere", {{"inputs: [stem]", "inputs: [input]"}}, {"w"}},
      {"a third input to add", {{"inputs: [stem]", "inputs: [stem, stem]"}}, {"w"}},
      {"a layer in between",
       {{"  - batch_norm: {name: r/d}", "  - identity: {name: r/i}\n  - batch_norm: {name: r/d}"}},
       {"w"}},
      {"an inner output taken twice",
       {{"  - global_average_pool",
         "  - concat: {name: j, inputs: [w/bn1]}\n  - global_average_pool"}},
       {"r"}},
      {"a pool that is not the stride",
       {{"w/pool, pool: 2", "w/pool, pool: 3, strides: 2, padding: same"}},
       {"r"}},
      {"same padding for the shortcut pool and the strided conv",
       {{"w/pool, pool: 2", "w/pool, pool: 2, padding: same"},
        {"strides: 2, padding: fixed", "strides: 2, padding: same"}},
       {"r", "w"}},
      {"a relu of its own name",
       {{"name: r/out", "name: out"}, {"input: r/out", "input: out"}},
       {"r", "w"}},
  };
  for (const Case& c : cases) {
    std::string yaml = kResidualSpec;
    for (const auto& [from, to] : c.edits) {
      ASSERT_NE(yaml.find(from), std::string::npos) << c.what << ": " << from;
      yaml = absl::StrReplaceAll(yaml, {{from, to}});
    }
    absl::StatusOr<std::unique_ptr<Model>> model = Build(yaml);
    ASSERT_TRUE(model.ok()) << c.what << ": " << model.status();
    std::vector<std::string> fused;
    for (const std::string& name : LayerNames(**model)) {
      if (name == "r" || name == "w") fused.push_back(name);
    }
    EXPECT_EQ(fused, c.fused) << c.what;
    // Fused or not, the variables are the plain layers'.
    SpecBuildOptions no_fusion;
    no_fusion.fuse_residual_blocks = false;
    absl::StatusOr<std::unique_ptr<Model>> plain = Build(yaml, no_fusion);
    ASSERT_TRUE(plain.ok()) << c.what << ": " << plain.status();
    ASSERT_EQ((*model)->variables().size(), (*plain)->variables().size()) << c.what;
    for (size_t i = 0; i < (*plain)->variables().size(); ++i) {
      EXPECT_EQ((*model)->variables()[i].name, (*plain)->variables()[i].name) << c.what;
    }
    const StepResult a = OneStep(**model), b = OneStep(**plain);
    EXPECT_NEAR(a.loss, b.loss, 1e-5 * std::abs(b.loss)) << c.what;
  }
}

TEST(PadChannelsSpecTest, PadsAloneAndRefusesAnOddIncrease) {
  absl::StatusOr<std::unique_ptr<Model>> model = Build(R"(input: [4, 4, 2]
classes: 3
layers:
  - pad_channels: {filters: 6}
  - conv2d: {filters: 3, kernel: 1}
  - global_average_pool
  - dense: {units: 3}
)");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->variables()[0].shape, (Shape{1, 1, 6, 3}));
  EXPECT_TRUE(std::isfinite(OneStep(**model).loss));
  absl::StatusOr<std::unique_ptr<Model>> odd = Build(
      "input: [4, 4, 2]\nclasses: 3\nlayers:\n  - pad_channels: {filters: 5}\n  - flatten\n"
      "  - dense: {units: 3}\n");
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find(
                "layer pad_channels (pad_channels, line 4) cannot take its input [4, 4, 2]"),
            std::string::npos)
      << odd.status();
  EXPECT_NE(odd.status().message().find("plus an even number"), std::string::npos) << odd.status();
}

TEST(SpecBuilderTest, FixedPaddingIsTheConvolutionsFixedPadding) {
  // Stride 2 on 6x6: "same" pads 0 before and 1 after, "fixed" 1 and 1.
  const std::string yaml =
      "input: [6, 6, 2]\nclasses: 2\nlayers:\n"
      "  - conv2d: {filters: 3, kernel: 3, strides: 2, padding: fixed}\n  - flatten\n"
      "  - dense: {units: 2}\n";
  absl::StatusOr<std::unique_ptr<Model>> spec_model = Build(yaml);
  ASSERT_TRUE(spec_model.ok()) << spec_model.status();
  const auto compiled = [](Padding padding) {
    Conv2DOptions conv;
    conv.filters = 3;
    conv.kernel_size = 3;
    conv.stride = 2;
    conv.padding = padding;
    DenseOptions dense;
    dense.units = 2;
    std::vector<std::unique_ptr<Layer>> layers;
    layers.push_back(std::make_unique<Conv2D>("conv2d", conv));
    layers.push_back(std::make_unique<Flatten>("flatten"));
    layers.push_back(std::make_unique<Dense>("dense", dense));
    return Model::Create("model", {6, 6, 2}, 2, std::move(layers));
  };
  absl::StatusOr<std::unique_ptr<Model>> fixed = compiled(Padding::kFixed);
  absl::StatusOr<std::unique_ptr<Model>> same = compiled(Padding::kSame);
  ASSERT_TRUE(fixed.ok() && same.ok());
  const StepResult a = OneStep(**spec_model), b = OneStep(**fixed), c = OneStep(**same);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.grads, b.grads);
  EXPECT_NE(a.loss, c.loss);
}

// A spec file under examples/models/, built.
absl::StatusOr<std::unique_ptr<Model>> BuildExample(const std::string& file) {
  const std::string yaml = ReadSource("examples/models/" + file);
  if (yaml.empty()) return absl::NotFoundError("examples/models/" + file + " is empty or missing");
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(yaml, file);
  if (!spec.ok()) return spec.status();
  return BuildModelFromSpec(*spec, file);
}

std::vector<std::string> VariableNames(const Model& m) {
  std::vector<std::string> names;
  for (const VariableInfo& v : m.variables())
    names.push_back(v.name + " " + ShapeToString(v.shape));
  return names;
}

std::vector<std::string> CriteoFeatures() {
  std::vector<std::string> names;
  for (int i = 1; i <= 26; ++i) names.push_back(absl::StrCat("C", i));
  return names;
}

// A batch of `n` examples: dense features in [0, 1), labels 0 or 1, and for
// each of the model's sparse features one to three token values.
struct TabularBatch {
  std::vector<float> dense;
  std::vector<float> labels;
  SparseBatch sparse;
};
TabularBatch RandomTabularBatch(const Model& m, int n) {
  TabularBatch b;
  SplitMix64 rng(5);
  b.dense.resize(n * m.input_shape()[0]);
  for (float& x : b.dense) x = rng.Uniform();
  for (int i = 0; i < n; ++i) b.labels.push_back(static_cast<float>(rng.Next() % 2));
  for (const std::string& name : m.sparse_features()) {
    SparseFeatureColumn column;
    column.name = name;
    column.kind = SparseValueKind::kTokens;
    for (int i = 0; i < n; ++i) {
      const int count = 1 + static_cast<int>(rng.Next() % 3);
      for (int v = 0; v < count; ++v) column.values.push_back(rng.Next() % 50);
      column.offsets.push_back(static_cast<int64_t>(column.values.size()));
    }
    b.sparse.features.push_back(std::move(column));
  }
  return b;
}

// One training step of `m` on a random batch with small random rows; the
// loss, or NaN when the batch is refused.
double SparseTrainStep(Model& m) {
  constexpr int kBatch = 4;
  TabularBatch batch = RandomTabularBatch(m, kBatch);
  SparseStep step;
  absl::Status prepared = m.PrepareSparse(batch.sparse, kBatch, &step);
  EXPECT_TRUE(prepared.ok()) << prepared;
  if (!prepared.ok()) return std::nan("");
  SplitMix64 rng(9);
  for (size_t t = 0; t < step.tables.size(); ++t) {
    TableStep& table = step.tables[t];
    table.rows.resize(table.ids.size() * m.sparse_tables()[t].dim);
    for (float& x : table.rows) x = 0.1f * (rng.Uniform() - 0.5f);
  }
  std::vector<float> params(m.num_params()), state(m.num_state()), grads(m.num_params()),
      stats(m.num_state());
  m.InitializeVariables(1, params.data(), state.data());
  return m
      .TrainStep(params.data(), state.data(), batch.dense.data(), batch.labels.data(), kBatch, 1,
                 grads.data(), stats.data(), nullptr, &step)
      .loss_sum;
}

TEST(SparseSpecTest, WideAndDeepBuildsWithItsTablesAndVariables) {
  absl::StatusOr<std::unique_ptr<Model>> built = BuildExample("wide_and_deep.yaml");
  ASSERT_TRUE(built.ok()) << built.status();
  Model& m = **built;
  EXPECT_EQ(m.name(), "wide_and_deep");
  EXPECT_EQ(m.input_shape(), (Shape{13}));
  EXPECT_EQ(m.head(), Head::kBinary);
  EXPECT_EQ(m.num_classes(), 2);
  EXPECT_EQ(m.num_logits(), 1);
  // The dense variables: the deep MLP over 13 + 26 x 8 = 221 values, and the
  // wide part's bias.
  EXPECT_EQ(VariableNames(m),
            (std::vector<std::string>{"dense/kernel [221, 64]", "dense/bias [64]",
                                      "dense_1/kernel [64, 32]", "dense_1/bias [32]",
                                      "deep_logit/kernel [32, 1]", "deep_logit/bias [1]",
                                      "wide/bias [1]"}));
  EXPECT_EQ(m.sparse_features(), CriteoFeatures());
  // 26 embedding tables, then the wide part's 26 weight tables and its
  // cross's, all dynamic.
  ASSERT_EQ(m.sparse_tables().size(), 53u);
  for (int i = 0; i < 26; ++i) {
    const SparseTableInfo& emb = m.sparse_tables()[i];
    const std::string c = CriteoFeatures()[i];
    EXPECT_EQ(emb.name, "emb_" + c + "/embeddings");
    EXPECT_EQ(m.sparse_features()[emb.feature], c);
    EXPECT_EQ(emb.dim, 8);
    EXPECT_EQ(emb.buckets, 0);
    EXPECT_EQ(emb.initializer, (TableInitializer{TableInitializer::kUniform, 0.05f}));
    const SparseTableInfo& wide = m.sparse_tables()[26 + i];
    EXPECT_EQ(wide.name, "wide/" + c);
    EXPECT_EQ(m.sparse_features()[wide.feature], c);
    EXPECT_EQ(wide.dim, 1);
    EXPECT_EQ(wide.buckets, 0);
  }
  const SparseTableInfo& cross = m.sparse_tables()[52];
  EXPECT_EQ(cross.name, "wide/C1_X_C2");
  EXPECT_EQ(cross.cross, (std::vector<int>{0, 1}));
  EXPECT_EQ(cross.dim, 1);
  EXPECT_EQ(cross.buckets, 0);
  EXPECT_TRUE(std::isfinite(SparseTrainStep(m)));
}

TEST(SparseSpecTest, DlrmBuildsWithItsTablesAndVariables) {
  absl::StatusOr<std::unique_ptr<Model>> built = BuildExample("dlrm.yaml");
  ASSERT_TRUE(built.ok()) << built.status();
  Model& m = **built;
  EXPECT_EQ(m.head(), Head::kBinary);
  EXPECT_EQ(m.num_logits(), 1);
  // The top MLP takes 16 + 27 x 26 / 2 = 367 values.
  EXPECT_EQ(VariableNames(m),
            (std::vector<std::string>{"dense/kernel [13, 64]", "dense/bias [64]",
                                      "bottom/kernel [64, 16]", "bottom/bias [16]",
                                      "dense_1/kernel [367, 64]", "dense_1/bias [64]",
                                      "dense_2/kernel [64, 1]", "dense_2/bias [1]"}));
  EXPECT_EQ(m.sparse_features(), CriteoFeatures());
  ASSERT_EQ(m.sparse_tables().size(), 26u);
  for (const SparseTableInfo& t : m.sparse_tables()) {
    EXPECT_EQ(t.dim, 16) << t.name;
    EXPECT_EQ(t.buckets, 0) << t.name;
  }
  EXPECT_EQ(m.sparse_tables()[25].name, "emb_C26/embeddings");
  EXPECT_TRUE(std::isfinite(SparseTrainStep(m)));
}

TEST(SparseSpecTest, OptionsReachTheLayers) {
  absl::StatusOr<std::unique_ptr<Model>> built = Build(R"(input: [0]
classes: 3
layers:
  - embedding: {feature: user, dim: 3, buckets: 1000, combiner: sqrtn, embeddings_initializer: truncated_normal(0.2)}
  - embedding: {feature: item, dim: 3, dynamic: true, embeddings_initializer: zeros}
  - linear: {features: [item, user], buckets: 10, use_bias: false, name: wide}
  - concat: {input: embedding, inputs: [embedding_1, wide]}
  - dense: {units: 3}
)");
  ASSERT_TRUE(built.ok()) << built.status();
  Model& m = **built;
  EXPECT_EQ(m.head(), Head::kSoftmax);
  EXPECT_EQ(m.sparse_features(), (std::vector<std::string>{"user", "item"}));
  ASSERT_EQ(m.sparse_tables().size(), 4u);
  const std::vector<SparseTableInfo>& t = m.sparse_tables();
  EXPECT_EQ(t[0].name, "embedding/embeddings");
  EXPECT_EQ(t[0].buckets, 1000);
  EXPECT_EQ(t[0].initializer, (TableInitializer{TableInitializer::kTruncatedNormal, 0.2f}));
  EXPECT_EQ(t[1].buckets, 0);
  EXPECT_EQ(t[1].initializer.kind, TableInitializer::kZeros);
  EXPECT_EQ(t[2].name, "wide/item");
  EXPECT_EQ(t[2].buckets, 10);
  EXPECT_EQ(t[3].name, "wide/user");
  EXPECT_EQ(m.sparse_features()[t[3].feature], "user");
  // use_bias: false leaves only the dense layer's variables.
  EXPECT_EQ(VariableNames(m), (std::vector<std::string>{"dense/kernel [7, 3]", "dense/bias [3]"}));
  EXPECT_TRUE(std::isfinite(SparseTrainStep(m)));
}

TEST(SparseSpecTest, ShapesThatDoNotFitNameTheLayer) {
  struct Case {
    std::string yaml;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {"input: [4]\nhead: binary\nlayers:\n  - dense: {units: 8, name: bottom}\n"
       "  - embedding: {feature: f, dim: 4, dynamic: true, name: e}\n"
       "  - dot_interaction: {input: bottom, inputs: [e]}\n  - dense: {units: 1}\n",
       {"net.yaml: layer dot_interaction (dot_interaction, line 6) cannot take its inputs [8], "
        "[4]"}},
      {"input: [4, 4, 1]\nclasses: 2\nlayers:\n"
       "  - embedding: {feature: f, dim: 4, dynamic: true, name: e}\n"
       "  - dot_interaction: {input: input, inputs: [e]}\n  - dense: {units: 2}\n",
       {"layer dot_interaction (dot_interaction, line 5) cannot take its inputs [4, 4, 1], [4]"}},
      {"input: [4]\nhead: binary\nlayers:\n  - dense: {units: 2}\n",
       {"net.yaml: the last layer (dense, line 4) gives [2], but with head: binary the last "
        "layer gives one logit: end with dense: {units: 1}"}},
      {"input: [4]\nhead: binary\nlayers:\n  - linear: {features: [a], dynamic: true}\n"
       "  - concat: {input: input, inputs: [linear]}\n",
       {"the last layer (concatenate, line 5) gives [5], but with head: binary"}},
      {"input: [4]\nclasses: 3\nlayers:\n  - linear: {features: [a], buckets: 5}\n",
       {"the last layer (linear) gives [1] but the model has classes: 3"}},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::unique_ptr<Model>> model = Build(c.yaml);
    ASSERT_FALSE(model.ok()) << c.yaml;
    EXPECT_TRUE(absl::IsInvalidArgument(model.status()));
    for (const std::string& s : c.says) {
      EXPECT_NE(model.status().message().find(s), std::string::npos)
          << c.yaml << " -> " << model.status().message();
    }
  }
}

}  // namespace
}  // namespace pstrain
