#include "config/model_spec.h"

#include <fstream>
#include <sstream>
#include <string>
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
      {head + "  - dense: {units: 10, units: 11}\n", {"given twice"}},
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

// The README's "Your own model" holds the reference as it is.
TEST(ModelSpecTest, TheReadmeHoldsTheLayerReference) {
  std::ifstream file(PSTRAIN_SOURCE_DIR "/README.md");
  std::stringstream readme;
  readme << file.rdbuf();
  EXPECT_NE(readme.str().find("```\n" + LayerReference() + "```\n"), std::string::npos)
      << "paste LayerReference() into README.md's \"Your own model\":\n"
      << LayerReference();
}

}  // namespace
}  // namespace pstrain
