#include "config/model_spec.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

constexpr char kCnn[] = R"(name: cnn
input: [28, 28, 1]
classes: 10
layers:
  - conv2d: {filters: 32, kernel: 5, padding: same, activation: relu}
  - max_pool: {pool: 2}
  - conv2d: {filters: 64, kernel: 5, padding: same, activation: relu}
  - max_pool
  - batch_norm: {epsilon: 0.00001, relu: true}
  - flatten
  - dense: {units: 128, activation: leaky_relu, alpha: 0.1, kernel_initializer: he_normal}
  - dropout: {rate: 0.4}
  - dense: {units: 10, name: logits, kernel_initializer: truncated_normal(0.1), bias_initializer: constant(0.25)}
)";

std::string Error(std::string_view yaml) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(yaml, "net.yaml");
  EXPECT_FALSE(spec.ok()) << yaml;
  EXPECT_TRUE(spec.ok() || absl::IsInvalidArgument(spec.status())) << spec.status();
  return spec.ok() ? "" : std::string(spec.status().message());
}

TEST(ModelSpecTest, ReadsLayersWithTheirOptionsDefaultsAndKerasNames) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(kCnn, "net.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "cnn");
  EXPECT_EQ(spec->input, (std::vector<int64_t>{28, 28, 1}));
  EXPECT_EQ(spec->classes, 10);
  ASSERT_EQ(spec->layers.size(), 9u);
  std::vector<std::string> names;
  for (const LayerSpec& l : spec->layers) names.push_back(l.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv2d", "max_pooling2d", "conv2d_1",
                                             "max_pooling2d_1", "batch_normalization", "flatten",
                                             "dense", "dropout", "logits"}));
  const LayerSpec& conv = spec->layers[0];
  EXPECT_EQ(conv.filters, 32);
  EXPECT_EQ(conv.kernel, 5);
  EXPECT_EQ(conv.strides, 1);
  EXPECT_EQ(conv.padding, "same");
  EXPECT_EQ(conv.activation, "relu");
  EXPECT_TRUE(conv.use_bias);
  EXPECT_EQ(conv.kernel_initializer.kind, "glorot_uniform");
  EXPECT_EQ(conv.bias_initializer.kind, "zeros");
  EXPECT_EQ(spec->layers[1].strides, 2);  // a pool's strides default to its size
  EXPECT_EQ(spec->layers[1].padding, "valid");
  EXPECT_EQ(spec->layers[3].pool, 2);
  EXPECT_FLOAT_EQ(spec->layers[4].epsilon, 1e-5f);
  EXPECT_TRUE(spec->layers[4].relu);
  EXPECT_FLOAT_EQ(spec->layers[6].alpha, 0.1f);
  EXPECT_EQ(spec->layers[6].kernel_initializer.kind, "he_normal");
  EXPECT_FLOAT_EQ(spec->layers[7].rate, 0.4f);
  EXPECT_EQ(spec->layers[0].line, 5);
}

TEST(ModelSpecTest, WrittenOutItReadsBackTheSame) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(kCnn, "net.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  spec->crop_padding = 4;
  spec->random_flip = true;
  const std::string yaml = ModelSpecToYaml(*spec);
  absl::StatusOr<ModelSpec> again = ParseModelSpec(yaml, "written");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
  for (LayerSpec& l : again->layers) l.line = 0;
  for (LayerSpec& l : spec->layers) l.line = 0;
  EXPECT_EQ(*again, *spec) << yaml;
  EXPECT_EQ(ModelSpecToYaml(*again), yaml);
}

TEST(ModelSpecTest, NamesThatYamlWouldReadAsOtherValuesRoundTrip) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(
      "name: \"a.b-c\"\ninput: [4, 4, 1]\nclasses: 2\nlayers:\n"
      "  - identity: {name: \"null\"}\n  - identity: {name: \"1e3\", input: \"null\"}\n"
      "  - concat: {inputs: [\"null\"]}\n  - flatten\n  - dense: {units: 2, name: \"true\"}\n",
      "n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<ModelSpec> again = ParseModelSpec(ModelSpecToYaml(*spec), "again");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << ModelSpecToYaml(*spec);
  for (LayerSpec& l : again->layers) l.line = 0;
  for (LayerSpec& l : spec->layers) l.line = 0;
  EXPECT_EQ(*again, *spec) << ModelSpecToYaml(*spec);
}

TEST(ModelSpecTest, ExplicitNamesAreSkippedByTheAutomaticOnes) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(
      "input: [4, 4, 1]\nclasses: 2\nlayers:\n  - flatten\n  - dense: {units: 3, name: dense}\n"
      "  - dense: {units: 3}\n  - dense: {units: 2, name: dense_2}\n  - dense: {units: 2}\n",
      "n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->layers[2].name, "dense_1");
  EXPECT_EQ(spec->layers[4].name, "dense_3");
}

TEST(ModelSpecTest, BadSpecsAreRefusedNamingWhatAndWhere) {
  const std::string head = "input: [28, 28, 1]\nclasses: 10\nlayers:\n";
  struct Case {
    std::string yaml;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {head + "  - conv2: {filters: 3, kernel: 3}\n",
       {"net.yaml: layers[0]: unknown layer type conv2 (did you mean conv2d?)", "line 4"}},
      {head + "  - dense: {units: 10, unit: 3}\n",
       {"layers[0] unknown key dense.unit (did you mean units?)",
        "dense takes name, input, units"}},
      {head + "  - dense: {units: 0}\n", {"layers[0] dense.units = \"0\": units must be in [1, "}},
      {head + "  - dense: {units: -4}\n", {"units must be in [1,"}},
      {head + "  - dense: {units: many}\n", {"units is a whole number"}},
      {head + "  - dense\n", {"layers[0] dense needs units"}},
      {head + "  - conv2d: {filters: 8}\n", {"conv2d needs kernel"}},
      {head + "  - conv2d: {filters: 8, kernel: 3, padding: full}\n",
       {"padding is one of same, valid"}},
      {head + "  - dropout: {rate: 1}\n", {"rate must be in [0, 1)"}},
      {head + "  - dense: {units: 2, kernel_initializer: normal}\n",
       {"kernel_initializer is glorot_uniform, he_normal, zeros, ones, truncated_normal"}},
      {head + "  - dense: {units: 2, kernel_initializer: constant}\n",
       {"constant takes its value: constant(0.1)"}},
      {head + "  - dense: {units: 2, kernel_initializer: truncated_normal(-1)}\n",
       {"stddev must be positive"}},
      {head + "  - dense: {units: 2, bias_initializer: constant(x)}\n",
       {"has x where a number goes"}},
      {head + "  - batch_norm: {epsilon: 0}\n", {"epsilon must be in (0, 1]"}},
      {head + "  - batch_norm: {relu: yes please}\n", {"relu is true or false"}},
      {head + "  - flatten: {name: a b}\n", {"a name is letters, digits"}},
      {head + "  - flatten: {name: x}\n  - dense: {units: 10, name: x}\n",
       {"two layers are named x (lines 4 and 5)"}},
      {head + "  - dense: {units: 10, units: 11}\n",
       {"layers[0] dense.units is given twice (first at line 4), line 4"}},
      // YAML's keys are unique: a second input (or layers) is not appended.
      {"input: [4, 4, 1]\nclasses: 2\ninput: [4, 4, 1]\nlayers: [flatten]\n",
       {"input is given twice (first at line 1), line 3"}},
      {"input: [4]\nclasses: 2\nlayers: [flatten]\nlayers: [flatten]\n",
       {"layers is given twice (first at line 3), line 4"}},
      {head + "  - embedding: {sequence: {max_length: 3, max_length: 4}}\n",
       {"sequence.max_length is given twice"}},
      {head + "  - {dense: {units: 1}, flatten: null}\n", {"layers[0] is a layer"}},
      {head, {"layers is a non-empty list"}},
      {"input: [28, 28]\nclasses: 10\nlayers: [flatten]\n", {"input is [height, width, channels]"}},
      {"input: [28, 0, 1]\nclasses: 10\nlayers: [flatten]\n", {"every size is a whole number"}},
      {"input: [28, 28, 1]\nclasses: 1\nlayers: [flatten]\n", {"classes = \"1\""}},
      {"input: [28, 28, 1]\nlayers: [flatten]\n", {"classes is missing"}},
      {"inptu: [28, 28, 1]\n", {"unknown key inptu (did you mean input?)"}},
      {"name: \"caf\xEE\"\ninput: [28, 28, 1]\nclasses: 10\nlayers: [flatten]\n",
       {"name = \"caf\\xee\": a name is letters"}},
      {"input: [28, 28, 1]\nclasses: 10\npreprocessing: {flip: true}\nlayers: [flatten]\n",
       {"unknown key preprocessing.flip"}},
      {"input: [28, 28, 1\nclasses: 10\n", {"YAML syntax error at line", "column"}},
      {"- just\n- a list\n", {"the top level must be a map"}},
  };
  for (const Case& c : cases) {
    const std::string message = Error(c.yaml);
    for (const std::string& s : c.says) {
      EXPECT_NE(message.find(s), std::string::npos) << c.yaml << "\n -> " << message;
    }
  }
}

TEST(ModelSpecTest, TenThousandLayersParseAndOneMoreIsRefusedNamingTheLimit) {
  std::string yaml = "input: [4, 4, 1]\nclasses: 2\nlayers:\n";
  for (int i = 0; i < kMaxSpecLayers; ++i) yaml += "  - relu\n";
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(yaml, "big");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->layers.back().name, absl::StrCat("re_lu_", kMaxSpecLayers - 1));
  yaml += "  - relu\n";
  EXPECT_NE(Error(yaml).find("over the limit of 10000"), std::string::npos);
}

TEST(ModelSpecTest, TheReferenceNamesEveryTypeAndKey) {
  const std::string reference = LayerReference();
  for (const std::string& type : ModelSpecLayerTypes()) {
    EXPECT_NE(reference.find(type + ": "), std::string::npos) << type;
  }
  EXPECT_NE(reference.find("  filters: a whole number >= 1 (required)"), std::string::npos)
      << reference;
  EXPECT_NE(reference.find("  padding: same"), std::string::npos) << reference;
}

TEST(ModelSpecTest, FixedPaddingAndPadChannelsReadAndWriteBack) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(R"(input: [8, 8, 2]
classes: 2
layers:
  - conv2d: {filters: 4, kernel: 3, strides: 2, padding: fixed, use_bias: false}
  - average_pool: {pool: 2, input: input}
  - pad_channels: {filters: 4}
  - add: {inputs: [conv2d]}
  - flatten
  - dense: {units: 2}
)",
                                                  "net.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->layers[0].padding, "fixed");
  EXPECT_EQ(spec->layers[2].type, "pad_channels");
  EXPECT_EQ(spec->layers[2].name, "pad_channels");
  EXPECT_EQ(spec->layers[2].filters, 4);
  const std::string yaml = ModelSpecToYaml(*spec);
  EXPECT_NE(yaml.find("pad_channels: {name: \"pad_channels\", filters: 4}"), std::string::npos)
      << yaml;
  absl::StatusOr<ModelSpec> again = ParseModelSpec(yaml, "written");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
  for (LayerSpec& l : again->layers) l.line = 0;
  for (LayerSpec& l : spec->layers) l.line = 0;
  EXPECT_EQ(*again, *spec) << yaml;

  const std::string head = "input: [8, 8, 2]\nclasses: 2\nlayers:\n";
  // Fixed padding is the convolutions' only.
  EXPECT_NE(Error(head + "  - max_pool: {pool: 2, padding: fixed}\n").find("is one of same, valid"),
            std::string::npos);
  EXPECT_NE(Error(head + "  - pad_channels\n").find("pad_channels needs filters"),
            std::string::npos);
  EXPECT_NE(Error(head + "  - pad_channels: {filters: 0}\n").find("filters must be in [1, "),
            std::string::npos);
  const std::string reference = LayerReference();
  EXPECT_NE(reference.find("or fixed ((kernel - 1) / 2 before"), std::string::npos) << reference;
  EXPECT_NE(reference.find("pad_channels: zero channels"), std::string::npos) << reference;
}

TEST(ModelSpecTest, FrozenLayersAndBatchNormMomentumReadAndWriteBack) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(R"(input: [4, 4, 1]
classes: 2
layers:
  - conv2d: {filters: 2, kernel: 3, trainable: false}
  - batch_norm: {momentum: 0.9}
  - batch_norm: {momentum: job, trainable: false}
  - flatten
  - dense: {units: 2}
)",
                                                  "net.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->layers[0].trainable);
  EXPECT_FLOAT_EQ(spec->layers[1].momentum, 0.9f);
  EXPECT_TRUE(spec->layers[1].trainable);
  EXPECT_LT(spec->layers[2].momentum, 0);
  EXPECT_FALSE(spec->layers[2].trainable);
  EXPECT_TRUE(spec->layers[4].trainable);
  const std::string yaml = ModelSpecToYaml(*spec);
  absl::StatusOr<ModelSpec> again = ParseModelSpec(yaml, "written");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
  for (LayerSpec& l : again->layers) l.line = 0;
  for (LayerSpec& l : spec->layers) l.line = 0;
  EXPECT_EQ(*again, *spec) << yaml;

  const std::string head = "input: [8, 8, 2]\nclasses: 2\nlayers:\n";
  EXPECT_NE(Error(head + "  - batch_norm: {momentum: 1}\n").find("is a number in [0, 1) or job"),
            std::string::npos);
  EXPECT_NE(Error(head + "  - max_pool: {trainable: false}\n").find("unknown key"),
            std::string::npos);
  EXPECT_NE(Error(head + "  - dense: {units: 2, trainable: no}\n").find("is true or false"),
            std::string::npos);
}

// A spec is written with the shortest text that reads back as its floats:
// 0.9, not float32's 0.899999976.
TEST(ModelSpecTest, FloatsAreWrittenAsTheShortestTextThatReadsBackTheSame) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(R"(input: [4, 4, 1]
classes: 2
layers:
  - batch_norm: {momentum: 0.9, epsilon: 0.001}
  - flatten
  - dense: {units: 2, activation: leaky_relu, alpha: 0.3, bias_initializer: constant(0.1)}
)",
                                                  "net.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string yaml = ModelSpecToYaml(*spec);
  EXPECT_NE(yaml.find("epsilon: 0.001, relu: false, momentum: 0.9,"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("bias_initializer: constant(0.1), alpha: 0.3,"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("0.899999976"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("0.300000012"), std::string::npos) << yaml;

  // Awkward floats (the smallest normal and subnormal, the largest, 2^24 + 2,
  // neighbours of 1 and of 0.1, long mantissas) read back bit for bit, as
  // the initializer constant(<value>) that takes any finite float.
  const std::vector<std::pair<float, std::string>> cases = {
      {0.1f, "0.1"},
      {std::nextafter(0.1f, 1.0f), "0.10000001"},
      {1e-5f, "1e-05"},
      {std::numeric_limits<float>::min(), "1.1754944e-38"},
      {std::numeric_limits<float>::denorm_min(), "1e-45"},
      {std::numeric_limits<float>::max(), "3.4028235e+38"},
      {16777218.0f, "16777218"},
      {std::nextafter(1.0f, 0.0f), "0.99999994"},
      {-2.5e-7f, "-2.5e-07"},
      {123456.79f, "123456.79"},
      {1.0f / 3.0f, "0.33333334"},
      {0.0f, "0"},
  };
  for (const auto& [value, text] : cases) {
    spec->layers[2].bias_initializer.arg = value;
    const std::string written = ModelSpecToYaml(*spec);
    EXPECT_NE(written.find(absl::StrCat("bias_initializer: constant(", text, ")")),
              std::string::npos)
        << written;
    absl::StatusOr<ModelSpec> again = ParseModelSpec(written, "written");
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << written;
    const float back = again->layers[2].bias_initializer.arg;
    EXPECT_EQ(std::memcmp(&back, &value, sizeof(float)), 0) << text << " read back as " << back;
  }
}

TEST(ModelSpecTest, WeightsNameAnOnnxFileAndWriteBack) {
  const std::string text =
      "input: [4, 4, 1]\nclasses: 2\nweights: gs://bucket/nets/small.onnx\n"
      "layers: [flatten, {dense: {units: 2}}]\n";
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(text, "net.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->weights, "gs://bucket/nets/small.onnx");
  absl::StatusOr<ModelSpec> again = ParseModelSpec(ModelSpecToYaml(*spec), "written");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->weights, spec->weights);
  // Without it, nothing is written.
  spec->weights.clear();
  EXPECT_EQ(ModelSpecToYaml(*spec).find("weights"), std::string::npos);
  EXPECT_NE(Error("input: [4, 4, 1]\nclasses: 2\nweights: net.bin\nlayers: [flatten]\n")
                .find("weights = \"net.bin\": the starting values come from an ONNX file"),
            std::string::npos);
}

constexpr char kTabular[] = R"(name: ctr
input: [13]
head: binary
layers:
  - embedding: {feature: C1, dim: 8, buckets: 1000}
  - embedding: {feature: C2, dim: 4, dynamic: true, combiner: sum, embeddings_initializer: truncated_normal(0.01), name: e2}
  - embedding: {feature: user/id, dim: 4, buckets: 5000000000, combiner: sqrtn, embeddings_initializer: zeros}
  - dense: {units: 4, input: input, name: bottom}
  - dot_interaction: {input: bottom, inputs: [e2, embedding_1]}
  - concat: {inputs: [embedding]}
  - dense: {units: 1, name: deep}
  - linear: {features: [C1, C2], dynamic: true, use_bias: false}
  - linear: {features: [C3], crosses: [[C1, C2], [C3, C4, "true"]], buckets: 100, name: wide}
  - add: {input: deep, inputs: [linear, wide]}
)";

TEST(ModelSpecTest, ReadsSparseLayersTabularInputAndABinaryHead) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(kTabular, "net.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->input, (std::vector<int64_t>{13}));
  EXPECT_EQ(spec->head, "binary");
  EXPECT_EQ(spec->classes, 2);  // implied by the head
  std::vector<std::string> names;
  for (const LayerSpec& l : spec->layers) names.push_back(l.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"embedding", "e2", "embedding_1", "bottom", "dot_interaction",
                                      "concatenate", "deep", "linear", "wide", "add"}));
  const LayerSpec& bucketed = spec->layers[0];
  EXPECT_EQ(bucketed.feature, "C1");
  EXPECT_EQ(bucketed.dim, 8);
  EXPECT_EQ(bucketed.buckets, 1000);
  EXPECT_FALSE(bucketed.dynamic);
  EXPECT_EQ(bucketed.combiner, "mean");  // the defaults
  EXPECT_EQ(bucketed.embeddings_initializer, (InitializerSetting{"uniform", 0.05f}));
  EXPECT_TRUE(bucketed.input.empty());  // the model's input, not written in
  const LayerSpec& dynamic = spec->layers[1];
  EXPECT_TRUE(dynamic.dynamic);
  EXPECT_EQ(dynamic.buckets, 0);
  EXPECT_EQ(dynamic.combiner, "sum");
  EXPECT_EQ(dynamic.embeddings_initializer, (InitializerSetting{"truncated_normal", 0.01f}));
  EXPECT_EQ(spec->layers[2].feature, "user/id");
  EXPECT_EQ(spec->layers[2].buckets, 5000000000);  // more than an int holds
  EXPECT_EQ(spec->layers[2].combiner, "sqrtn");
  EXPECT_EQ(spec->layers[2].embeddings_initializer.kind, "zeros");
  EXPECT_EQ(spec->layers[4].type, "dot_interaction");
  EXPECT_EQ(spec->layers[4].input, "bottom");
  EXPECT_EQ(spec->layers[4].inputs, (std::vector<std::string>{"e2", "embedding_1"}));
  const LayerSpec& linear = spec->layers[7];
  EXPECT_EQ(linear.features, (std::vector<std::string>{"C1", "C2"}));
  EXPECT_TRUE(linear.dynamic);
  EXPECT_FALSE(linear.use_bias);
  EXPECT_EQ(spec->layers[8].buckets, 100);
  EXPECT_TRUE(spec->layers[8].use_bias);
  EXPECT_TRUE(linear.crosses.empty());
  EXPECT_EQ(spec->layers[8].crosses,
            (std::vector<std::vector<std::string>>{{"C1", "C2"}, {"C3", "C4", "true"}}));
  EXPECT_EQ(spec->layers[0].line, 5);

  // A tabular model may have no dense features; bare uniform is scale 0.05.
  absl::StatusOr<ModelSpec> sparse_only = ParseModelSpec(
      "input: [0]\nclasses: 3\nlayers:\n"
      "  - embedding: {feature: f, dim: 3, dynamic: true, embeddings_initializer: uniform}\n",
      "net.yaml");
  ASSERT_TRUE(sparse_only.ok()) << sparse_only.status();
  EXPECT_EQ(sparse_only->input, (std::vector<int64_t>{0}));
  EXPECT_EQ(sparse_only->head, "softmax");
  EXPECT_EQ(sparse_only->layers[0].embeddings_initializer, (InitializerSetting{"uniform", 0.05f}));
  // classes: 2 may be said with head: binary.
  EXPECT_TRUE(
      ParseModelSpec("input: [2]\nhead: binary\nclasses: 2\nlayers: [{dense: {units: 1}}]\n",
                     "net.yaml")
          .ok());
}

TEST(ModelSpecTest, ARegressionHeadHasNoClassesAndItsLossWritesOutAndReadsBack) {
  absl::StatusOr<ModelSpec> plain =
      ParseModelSpec("input: [8]\nhead: regression\nlayers: [{dense: {units: 1}}]\n", "net.yaml");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->head, "regression");
  EXPECT_EQ(plain->classes, 0);
  EXPECT_EQ(plain->loss, "mse");
  EXPECT_EQ(ModelSpecToYaml(*plain).find("classes"), std::string::npos) << ModelSpecToYaml(*plain);
  absl::StatusOr<ModelSpec> huber = ParseModelSpec(
      "input: [8]\nhead: regression\nloss: huber\nhuber_delta: 0.3\nlayers: "
      "[{dense: {units: 1}}]\n",
      "net.yaml");
  ASSERT_TRUE(huber.ok()) << huber.status();
  EXPECT_EQ(huber->loss, "huber");
  EXPECT_EQ(huber->huber_delta, 0.3f);
  for (const ModelSpec* spec : {&*plain, &*huber}) {
    const std::string yaml = ModelSpecToYaml(*spec);
    absl::StatusOr<ModelSpec> again = ParseModelSpec(yaml, "written");
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
    EXPECT_TRUE(SameModelSpec(*again, *spec)) << yaml;
    EXPECT_EQ(ModelSpecToYaml(*again), yaml);
  }
  EXPECT_NE(ModelSpecToYaml(*plain).find("input: [8]\nhead: regression\nloss: mse\nlayers:"),
            std::string::npos)
      << ModelSpecToYaml(*plain);
  EXPECT_NE(ModelSpecToYaml(*huber).find("head: regression\nloss: huber\nhuber_delta: 0.3\n"),
            std::string::npos)
      << ModelSpecToYaml(*huber);
}

TEST(ModelSpecTest, SparseLayersAndTheHeadWriteOutAndReadBack) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(kTabular, "net.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string yaml = ModelSpecToYaml(*spec);
  absl::StatusOr<ModelSpec> again = ParseModelSpec(yaml, "written");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
  for (LayerSpec& l : again->layers) l.line = 0;
  for (LayerSpec& l : spec->layers) l.line = 0;
  EXPECT_EQ(*again, *spec) << yaml;
  EXPECT_EQ(ModelSpecToYaml(*again), yaml);
  EXPECT_NE(yaml.find("input: [13]\nclasses: 2\nhead: binary\n"), std::string::npos) << yaml;
  // Of buckets and dynamic, the one in use.
  EXPECT_NE(yaml.find("  - embedding: {name: \"embedding\", feature: \"C1\", dim: 8, buckets: "
                      "1000, combiner: mean, embeddings_initializer: uniform(0.05)}\n"),
            std::string::npos)
      << yaml;
  EXPECT_NE(yaml.find("  - embedding: {name: \"e2\", feature: \"C2\", dim: 4, dynamic: true, "
                      "combiner: sum, embeddings_initializer: truncated_normal(0.01)}\n"),
            std::string::npos)
      << yaml;
  EXPECT_NE(yaml.find("  - linear: {name: \"linear\", features: [\"C1\", \"C2\"], dynamic: true, "
                      "use_bias: false}\n"),
            std::string::npos)
      << yaml;
  // Crosses only when there are some (so the YAML of a linear without is as
  // it was), names quoted.
  EXPECT_NE(yaml.find("  - linear: {name: \"wide\", features: [\"C3\"], crosses: [[\"C1\", "
                      "\"C2\"], [\"C3\", \"C4\", \"true\"]], buckets: 100, use_bias: true}\n"),
            std::string::npos)
      << yaml;
  EXPECT_NE(yaml.find("  - dot_interaction: {name: \"dot_interaction\", input: \"bottom\", "
                      "inputs: [\"e2\", \"embedding_1\"]}\n"),
            std::string::npos)
      << yaml;

  // Feature names that YAML would read as other values.
  absl::StatusOr<ModelSpec> odd = ParseModelSpec(
      "input: [1]\nclasses: 2\nlayers:\n  - embedding: {feature: \"null\", dim: 2, dynamic: "
      "true}\n  - linear: {features: [\"true\", \"1e3\"], buckets: 7}\n"
      "  - concat: {input: embedding, inputs: [linear]}\n  - dense: {units: 2}\n",
      "net.yaml");
  ASSERT_TRUE(odd.ok()) << odd.status();
  absl::StatusOr<ModelSpec> odd_again = ParseModelSpec(ModelSpecToYaml(*odd), "written");
  ASSERT_TRUE(odd_again.ok()) << odd_again.status() << "\n" << ModelSpecToYaml(*odd);
  for (LayerSpec& l : odd_again->layers) l.line = 0;
  for (LayerSpec& l : odd->layers) l.line = 0;
  EXPECT_EQ(*odd_again, *odd) << ModelSpecToYaml(*odd);
}

// Checkpoints store a spec's YAML: a softmax model's is what it was before
// heads, tabular inputs and sparse layers (but for its floats, now written
// as their shortest text: alpha 0.3, once 0.300000012).
TEST(ModelSpecTest, ASoftmaxModelsYamlIsUnchanged) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(
      "input: [4, 4, 1]\nclasses: 3\nlayers: [flatten, {dense: {units: 3}}]\n", "net.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(ModelSpecToYaml(*spec),
            "input: [4, 4, 1]\nclasses: 3\nlayers:\n  - flatten: {name: \"flatten\"}\n"
            "  - dense: {name: \"dense\", units: 3, activation: none, use_bias: true, "
            "kernel_initializer: glorot_uniform, bias_initializer: zeros, alpha: 0.3, "
            "trainable: true}\n");
}

TEST(ModelSpecTest, SparseLayersTakeTheModelsInputSoThePreviousOutputStaysFree) {
  // bottom is taken by the concat after the embedding, not by the embedding.
  const std::string text =
      "input: [3]\nclasses: 2\nlayers:\n  - dense: {units: 2, name: bottom}\n"
      "  - embedding: {feature: f, dim: 2, dynamic: true}\n"
      "  - concat: {input: bottom, inputs: [embedding]}\n  - dense: {units: 2}\n";
  ASSERT_TRUE(ParseModelSpec(text, "net.yaml").ok()) << ParseModelSpec(text, "net.yaml").status();
  // Left untaken, it is refused as any untaken output is.
  const std::string message = Error(
      "input: [3]\nclasses: 2\nlayers:\n  - dense: {units: 2, name: bottom}\n"
      "  - linear: {features: [f], dynamic: true}\n");
  EXPECT_NE(message.find("the output of layer bottom (line 4) is not taken by any later layer "
                         "(the next one takes the model's input, as every linear without input: "
                         "does)"),
            std::string::npos)
      << message;
}

TEST(ModelSpecTest, BadSparseLayersAndHeadsAreRefusedNamingWhatAndWhere) {
  const std::string head = "input: [13]\nhead: binary\nlayers:\n";
  struct Case {
    std::string yaml;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {head + "  - embedding: {dim: 8, dynamic: true}\n",
       {"layers[0] embedding needs feature (the name of the sparse feature", "line 4"}},
      {head + "  - embedding: {feature: C1, dynamic: true}\n", {"embedding needs dim"}},
      {head + "  - embedding: {feature: C1, dim: 0, dynamic: true}\n",
       {"embedding.dim = \"0\": dim must be in [1, "}},
      {head + "  - embedding: {feature: C1, dim: 8, buckets: 10, dynamic: true, name: e}\n",
       {"net.yaml: layer e (embedding, line 4) has both buckets and dynamic: true"}},
      {head + "  - dense: {units: 1}\n  - embedding: {feature: C1, dim: 8}\n",
       {"net.yaml: layer embedding (embedding, line 5) needs buckets: <n> (a table of rows [0, "
        "n)) or dynamic: true"}},
      {head + "  - embedding: {feature: C1, dim: 8, dynamic: false}\n", {"needs buckets: <n>"}},
      {head + "  - linear: {features: [C1]}\n",
       {"layer linear (linear, line 4) needs buckets: <n>"}},
      {head + "  - linear: {features: [C1], buckets: 3, dynamic: true}\n",
       {"layer linear (linear, line 4) has both buckets and dynamic: true"}},
      {head + "  - embedding: {feature: C1, dim: 8, buckets: 0}\n",
       {"buckets = \"0\": buckets must be in [1, 1099511627776]"}},
      {head + "  - embedding: {feature: C1, dim: 8, buckets: lots}\n",
       {"buckets is a whole number"}},
      {head + "  - embedding: {feature: C1, dim: 8, dynamic: yes}\n", {"dynamic is true or false"}},
      {head + "  - embedding: {feature: C1, dim: 8, dynamic: true, combiner: sqrt}\n",
       {"embedding.combiner = \"sqrt\": combiner is one of sum, mean, sqrtn (did you mean "
        "sqrtn?)"}},
      {head + "  - embedding: {feature: C1, dim: 8, dynamic: true, combiner: average}\n",
       {"combiner is one of sum, mean, sqrtn, line 4"}},
      {head + "  - embedding: {feature: C1, dim: 8, dynamic: true, combinr: sum}\n",
       {"unknown key embedding.combinr (did you mean combiner?)"}},
      {head + "  - embedding: {feature: \"a b\", dim: 8, dynamic: true}\n",
       {"feature is a feature's name"}},
      {head + "  - embedding: {feature: [C1], dim: 8, dynamic: true}\n", {"embedding.feature"}},
      {head + "  - embedding: {feature: C1, dim: 8, dynamic: true, embeddings_initializer: "
              "glorot_uniform}\n",
       {"embeddings_initializer is uniform (scale 0.05), uniform(<scale>)"}},
      {head + "  - embedding: {feature: C1, dim: 8, dynamic: true, embeddings_initializer: "
              "uniform(-1)}\n",
       {"uniform's scale must be positive"}},
      {head + "  - embedding: {feature: C1, dim: 8, dynamic: true, inputs: [input]}\n",
       {"only add, concat and dot_interaction take inputs"}},
      {head + "  - linear: {features: [], dynamic: true}\n",
       {"linear.features is a non-empty list of the sparse features' names", "line 4"}},
      {head + "  - linear: {features: [C1, C2, C1], dynamic: true}\n",
       {"linear.features names C1 twice"}},
      {head + "  - linear: {features: C1, dynamic: true}\n", {"linear.features is a list"}},
      {head + "  - linear: {features: [C1, [C2]], dynamic: true}\n",
       {"linear.features: each is a name"}},
      {head + "  - linear: {features: [\"a b\"], dynamic: true}\n",
       {"linear.features has \"a b\": a feature's name is letters"}},
      {head + "  - linear: {dynamic: true}\n", {"linear needs features"}},
      {head + "  - linear: {features: [C1], dynamic: true, dim: 3}\n",
       {"unknown key linear.dim",
        "linear takes name, input, features, crosses, buckets, dynamic, "
        "use_bias"}},
      {head + "  - linear: {features: [C1], crosses: [[C1]], dynamic: true, name: wide}\n",
       {"net.yaml: layer wide (linear, line 4): cross [C1] has 1 feature; a cross is a list of "
        "two or more features' names"}},
      {head + "  - linear: {features: [C1], crosses: [[]], dynamic: true}\n",
       {"layer linear (linear, line 4): cross [] has 0 features"}},
      {head + "  - linear: {features: [C1], crosses: [[C1, C2, C1]], dynamic: true}\n",
       {"layer linear (linear, line 4): cross [C1, C2, C1] names C1 twice"}},
      {head + "  - linear: {features: [C1], crosses: [[C1, C2], [C3, C4], [C2, C1]], "
              "dynamic: true, name: wide}\n",
       {"layer wide (linear, line 4): crosses [C1, C2] and [C2, C1] cross the same features"}},
      {head + "  - linear: {features: [C1_X_C2], crosses: [[C1, C2]], dynamic: true}\n",
       {"layer linear (linear, line 4): cross [C1, C2]'s table linear/C1_X_C2 has the name of "
        "another of its tables"}},
      {head + "  - embedding: {feature: C1, dim: 8, dynamic: true, crosses: [[C1, C2]], "
              "name: e}\n",
       {"layers[0] embedding.crosses: layer e is embedding; only linear takes crosses", "line 4"}},
      {head + "  - dense: {units: 1, crosses: [[C1, C2]]}\n",
       {"layers[0] dense.crosses: layer (unnamed) is dense; only linear takes crosses"}},
      {head + "  - linear: {features: [C1], crosses: [C1, C2], dynamic: true}\n",
       {"linear.crosses: each is a list of features' names, e.g. [C1, C2]"}},
      {head + "  - linear: {features: [C1], crosses: C1, dynamic: true}\n",
       {"linear.crosses is a list of crosses"}},
      {head + "  - linear: {features: [C1], crosses: [[C1, [C2]]], dynamic: true}\n",
       {"linear.crosses: each feature is a name"}},
      {head + "  - linear: {features: [C1], crosses: [[C1, \"a b\"]], dynamic: true}\n",
       {"linear.crosses has \"a b\": a feature's name is letters"}},
      {head + "  - dot_interaction\n", {"dot_interaction needs inputs"}},
      {head + "  - dense: {units: 1, kernel_initializer: uniform}\n",
       {"kernel_initializer is glorot_uniform"}},
      {"input: [13]\nhead: sigmoid\nclasses: 2\nlayers: [flatten]\n",
       {"head = \"sigmoid\": head is softmax", ", binary (one logit", "or regression (one output",
        "line 2"}},
      {"input: [13]\nhead: regresion\nlayers: [flatten]\n", {"(did you mean regression?)"}},
      {"input: [13]\nhead: regression\nclasses: 3\nlayers: [flatten]\n",
       {"classes = 3: head: regression predicts a value, not a class; omit classes", "line 3"}},
      {"input: [13]\nclasses: 3\nloss: mse\nlayers: [flatten]\n",
       {"loss is a regression head's (head: regression); head softmax has its own", "line 3"}},
      {"input: [13]\nhead: regression\nloss: l2\nlayers: [flatten]\n",
       {"loss = \"l2\": a regression head's loss is mse (squared error), mae"}},
      {"input: [13]\nhead: regression\nloss: hubber\nlayers: [flatten]\n",
       {"(did you mean huber?)"}},
      {"input: [13]\nhead: regression\nhuber_delta: 2\nlayers: [flatten]\n",
       {"huber_delta is for head: regression with loss: huber, not loss: mse", "line 3"}},
      {"input: [13]\nhead: binary\nhuber_delta: 2\nlayers: [flatten]\n",
       {"huber_delta is for head: regression with loss: huber, not head: binary"}},
      {"input: [13]\nhead: regression\nloss: huber\nhuber_delta: 0\nlayers: [flatten]\n",
       {"huber_delta = \"0\": a number > 0", "line 4"}},
      {"input: [13]\nhead: regression\nloss: huber\nhuber_delta: nan\nlayers: [flatten]\n",
       {"huber_delta = \"nan\": a number > 0"}},
      {"input: [13]\nhead: binery\nlayers: [flatten]\n", {"(did you mean binary?)"}},
      {"input: [13]\nclasses: 10\nhead: binary\nlayers: [flatten]\n",
       {"classes = 10: with head: binary the model gives one logit for two classes; omit classes "
        "or give 2, line 2"}},
      {"input: [13]\nhead: softmax\nlayers: [flatten]\n", {"classes is missing"}},
      {"input: [-1]\nhead: binary\nlayers: [flatten]\n",
       {"input: every size is a whole number in [0, "}},
      {"input: [13, 2]\nhead: binary\nlayers: [flatten]\n", {"or [features]"}},
      {"input: [13]\nhead: binary\npreprocessing: {random_flip: true}\nlayers: [flatten]\n",
       {"preprocessing is for images", "line 3"}},
  };
  for (const Case& c : cases) {
    const std::string message = Error(c.yaml);
    for (const std::string& s : c.says) {
      EXPECT_NE(message.find(s), std::string::npos) << c.yaml << "\n -> " << message;
    }
  }
}

TEST(ModelSpecTest, TheReferenceDescribesTheSparseLayers) {
  const std::string reference = LayerReference();
  EXPECT_NE(reference.find("embedding: an embedding table"), std::string::npos) << reference;
  EXPECT_NE(reference.find("  feature: the name of the sparse feature"), std::string::npos);
  EXPECT_NE(reference.find("  dim: a whole number >= 1 (required)"), std::string::npos);
  EXPECT_NE(reference.find("  combiner: sum, mean or sqrtn"), std::string::npos);
  EXPECT_NE(reference.find("(default uniform(0.05))"), std::string::npos);
  EXPECT_NE(reference.find("  features: a list of the sparse features' names"), std::string::npos);
  EXPECT_NE(reference.find("  crosses: a list of crosses, e.g. [[C1, C2], [C3, C4, C5]]"),
            std::string::npos);
  EXPECT_NE(reference.find("dot_interaction: DLRM's feature interaction"), std::string::npos);
  EXPECT_NE(reference.find("  input: the name of an earlier layer whose output it takes, or input "
                           "(default: input; only its place in the graph matters)"),
            std::string::npos);
}

TEST(ModelSpecTest, SequenceLayersReadWriteBackAndAreRefusedNamingWhatAndWhere) {
  const std::string yaml =
      "input: [0]\nhead: binary\nlayers:\n"
      "  - embedding: {feature: hist, dim: 8, dynamic: true, sequence: {max_length: 50, "
      "positions: from_end}, name: hist}\n"
      "  - embedding: {feature: cand, dim: 8, dynamic: true, name: cand}\n"
      "  - multi_head_attention: {input: hist, query: cand, heads: 2, key_dim: 4, dropout: "
      "0.1}\n"
      "  - multi_head_attention: {input: hist, heads: 4, key_dim: 2, value_dim: 3, causal: "
      "true}\n"
      "  - sequence_pool: {mode: last}\n"
      "  - concat: {inputs: [multi_head_attention]}\n"
      "  - dense: {units: 1}\n";
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(yaml, "seq.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const LayerSpec& hist = spec->layers[0];
  EXPECT_EQ(hist.max_length, 50);
  EXPECT_EQ(hist.positions, "from_end");
  EXPECT_EQ(spec->layers[1].max_length, 0);  // not a sequence
  const LayerSpec& target = spec->layers[2];
  EXPECT_EQ(target.query, "cand");
  EXPECT_EQ(target.heads, 2);
  EXPECT_EQ(target.key_dim, 4);
  EXPECT_FLOAT_EQ(target.dropout, 0.1f);
  EXPECT_EQ(LayerInputNames(target), (std::vector<std::string>{"hist", "cand"}));
  const LayerSpec& self = spec->layers[3];
  EXPECT_EQ(self.name, "multi_head_attention_1");
  EXPECT_TRUE(self.causal);
  EXPECT_EQ(self.value_dim, 3);
  EXPECT_EQ(spec->layers[4].mode, "last");
  const std::string written = ModelSpecToYaml(*spec);
  EXPECT_NE(written.find("sequence: {max_length: 50, positions: from_end}"), std::string::npos)
      << written;
  EXPECT_EQ(written.find("sequence: {max_length: 0"), std::string::npos) << written;
  absl::StatusOr<ModelSpec> again = ParseModelSpec(written, "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << written;
  EXPECT_TRUE(SameModelSpec(*spec, *again));
  // none, the default written out, is no table and no query.
  absl::StatusOr<ModelSpec> none = ParseModelSpec(
      "input: [0]\nhead: binary\nlayers:\n"
      "  - embedding: {feature: h, dim: 8, dynamic: true, table: none, sequence: {max_length: 3}}\n"
      "  - multi_head_attention: {heads: 1, key_dim: 2, query: none}\n"
      "  - sequence_pool\n  - dense: {units: 1}\n",
      "none.yaml");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->layers[0].table, "");
  EXPECT_EQ(none->layers[1].query, "");

  const std::string head = "input: [0]\nhead: binary\nlayers:\n";
  struct Case {
    std::string yaml;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {head + "  - embedding: {feature: h, dim: 8, dynamic: true, sequence: {max_lenght: 5}}\n",
       {"unknown key embedding.sequence.max_lenght (did you mean max_length?)", "line 4"}},
      {head + "  - embedding: {feature: h, dim: 8, dynamic: true, sequence: {positions: none}}\n",
       {"embedding.sequence needs max_length"}},
      {head + "  - embedding: {feature: h, dim: 8, dynamic: true, sequence: 5}\n",
       {"embedding.sequence is a map {max_length: L"}},
      {head + "  - embedding: {feature: h, dim: 8, dynamic: true, sequence: {max_length: 0}}\n",
       {"sequence.max_length = \"0\": max_length must be in [1, 16384]"}},
      {head + "  - embedding: {feature: h, dim: 8, dynamic: true, sequence: {max_length: 5, "
              "positions: start}}\n",
       {"positions is one of none, from_start, from_end"}},
      {head + "  - multi_head_attention: {key_dim: 4}\n", {"multi_head_attention needs heads"}},
      {head + "  - multi_head_attention: {heads: 2, key_dim: 4, dropout: 1}\n",
       {"dropout must be in [0, 1)"}},
      {head + "  - multi_head_attention: {heads: 2, key_dim: 4, query: nowhere}\n",
       {"takes nowhere, which is no layer's name"}},
      {head + "  - sequence_pool: {mode: median}\n", {"mode is one of mean, max, sum, last"}},
      {head + "  - embedding: {feature: h, dim: 8, dynamic: true, table: a/b}\n",
       {"shares table a/b, but a shared table's name has no /"}},
  };
  for (const Case& c : cases) {
    const std::string message = Error(c.yaml);
    for (const std::string& s : c.says) {
      EXPECT_NE(message.find(s), std::string::npos) << c.yaml << "\n -> " << message;
    }
  }
}

// docs/models.md's "Every layer and key" holds the reference as it is.
TEST(ModelSpecTest, TheModelsDocHoldsTheLayerReference) {
  std::ifstream file(PSTRAIN_SOURCE_DIR "/docs/models.md");
  std::stringstream doc;
  doc << file.rdbuf();
  EXPECT_NE(doc.str().find("```\n" + LayerReference() + "```\n"), std::string::npos)
      << "paste LayerReference() into docs/models.md's \"Every layer and key\":\n"
      << LayerReference();
}

}  // namespace
}  // namespace pstrain
