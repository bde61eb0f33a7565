#include "onnx/onnx_export.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/registry.h"
#include "onnx/onnx.pb.h"
#include "onnx/onnx_import.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// A model with its initial values, every zero or one initializer (biases,
// batch norm's variables and statistics) replaced by distinct values so that
// a value in the wrong place shows.
struct Valued {
  std::unique_ptr<Model> model;
  std::vector<float> params, state;
};
Valued WithValues(absl::StatusOr<std::unique_ptr<Model>> model) {
  EXPECT_TRUE(model.ok()) << model.status();
  Valued v;
  v.model = std::move(*model);
  v.params.resize(v.model->num_params());
  v.state.resize(v.model->num_state());
  v.model->InitializeVariables(3, v.params.data(), v.state.data());
  for (size_t i = 0; i < v.params.size(); ++i) v.params[i] += 1e-3f * static_cast<float>(i % 7);
  for (size_t i = 0; i < v.state.size(); ++i) v.state[i] += 0.5f + 0.01f * static_cast<float>(i);
  return v;
}

onnx::ModelProto Export(const Valued& v) {
  absl::StatusOr<std::string> bytes = ModelToOnnx(*v.model, v.params, v.state);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  onnx::ModelProto proto;
  EXPECT_TRUE(bytes.ok() && proto.ParseFromString(*bytes));
  return proto;
}

std::string SourceFile(const std::string& path) {
  absl::StatusOr<std::string> text =
      Env::Default()->ReadFile(std::string(PSTRAIN_SOURCE_DIR) + "/" + path);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

const onnx::NodeProto* FindNode(const onnx::GraphProto& g, const std::string& name) {
  for (const onnx::NodeProto& n : g.node()) {
    if (n.name() == name) return &n;
  }
  ADD_FAILURE() << "no node " << name;
  return nullptr;
}

const onnx::TensorProto* FindInitializer(const onnx::GraphProto& g, const std::string& name) {
  for (const onnx::TensorProto& t : g.initializer()) {
    if (t.name() == name) return &t;
  }
  ADD_FAILURE() << "no initializer " << name;
  return nullptr;
}

const onnx::AttributeProto* FindAttribute(const onnx::NodeProto& n, const std::string& name) {
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (a.name() == name) return &a;
  }
  ADD_FAILURE() << n.name() << " has no attribute " << name;
  return nullptr;
}

std::vector<int64_t> Ints(const onnx::NodeProto* n, const std::string& name) {
  if (n == nullptr) return {};
  const onnx::AttributeProto* a = FindAttribute(*n, name);
  if (a == nullptr) return {};
  return {a->ints().begin(), a->ints().end()};
}

int64_t Int(const onnx::NodeProto* n, const std::string& name) {
  const onnx::AttributeProto* a = n == nullptr ? nullptr : FindAttribute(*n, name);
  return a == nullptr ? -1 : a->i();
}

std::vector<float> Floats(const onnx::TensorProto& t) {
  std::vector<float> v(t.raw_data().size() / sizeof(float));
  std::memcpy(v.data(), t.raw_data().data(), v.size() * sizeof(float));
  return v;
}

std::vector<int64_t> Dims(const onnx::TensorProto* t) {
  if (t == nullptr) return {};
  return {t->dims().begin(), t->dims().end()};
}

// The value_info's dims, -1 for the symbolic N.
std::vector<int64_t> Dims(const onnx::ValueInfoProto& info) {
  std::vector<int64_t> dims;
  for (const auto& d : info.type().tensor_type().shape().dim()) {
    if (d.has_dim_param()) {
      EXPECT_EQ(d.dim_param(), "N");
      dims.push_back(-1);
    } else {
      dims.push_back(d.dim_value());
    }
  }
  return dims;
}

std::map<std::string, std::string> Metadata(const onnx::ModelProto& m) {
  std::map<std::string, std::string> out;
  for (const auto& p : m.metadata_props()) out[p.key()] = p.value();
  return out;
}

// What every export is: the header, the input and outputs, float32
// raw_data initializers named as the model's variables (plus constants),
// nodes in an order of evaluation with unique names, no Dropout.
void ExpectWellFormed(const onnx::ModelProto& m, const Model& model) {
  EXPECT_EQ(m.ir_version(), 8);
  ASSERT_EQ(m.opset_import_size(), 1);
  EXPECT_EQ(m.opset_import(0).domain(), "");
  EXPECT_EQ(m.opset_import(0).version(), 13);
  EXPECT_EQ(m.producer_name(), "pstrain");
  EXPECT_FALSE(m.producer_version().empty());
  const onnx::GraphProto& g = m.graph();
  EXPECT_EQ(g.name(), model.name());
  EXPECT_EQ(Metadata(m)["pstrain.model_spec"], model.spec_yaml());

  ASSERT_EQ(g.input_size(), 1);
  EXPECT_EQ(g.input(0).name(), "images");
  EXPECT_EQ(g.input(0).type().tensor_type().elem_type(), onnx::TensorProto::FLOAT);
  const Shape& hwc = model.input_shape();
  EXPECT_THAT(Dims(g.input(0)), ElementsAre(-1, hwc[0], hwc[1], hwc[2]));
  ASSERT_EQ(g.output_size(), 2);
  EXPECT_EQ(g.output(0).name(), "probabilities");
  EXPECT_EQ(g.output(0).type().tensor_type().elem_type(), onnx::TensorProto::FLOAT);
  EXPECT_THAT(Dims(g.output(0)), ElementsAre(-1, model.num_classes()));
  EXPECT_EQ(g.output(1).name(), "classes");
  EXPECT_EQ(g.output(1).type().tensor_type().elem_type(), onnx::TensorProto::INT64);
  EXPECT_THAT(Dims(g.output(1)), ElementsAre(-1));

  std::set<std::string> defined = {"images"};
  std::set<std::string> variables;
  for (const VariableInfo& v : model.variables()) variables.insert(v.name);
  std::set<std::string> weights;
  for (const onnx::TensorProto& t : g.initializer()) {
    EXPECT_TRUE(defined.insert(t.name()).second) << t.name();
    EXPECT_TRUE(t.has_raw_data()) << t.name();
    EXPECT_EQ(t.float_data_size() + t.int64_data_size(), 0) << t.name();
    if (variables.count(t.name())) {
      weights.insert(t.name());
      EXPECT_EQ(t.data_type(), onnx::TensorProto::FLOAT) << t.name();
      int64_t elements = 1;
      for (int64_t d : t.dims()) elements *= d;
      EXPECT_EQ(t.raw_data().size(), elements * sizeof(float)) << t.name();
    } else {
      EXPECT_TRUE(t.name() == "preprocessing/stddev_floor" || t.name().ends_with("/pads") ||
                  t.name().ends_with("/epsilon") || t.name().starts_with("constants/"))
          << "an initializer that is no variable: " << t.name();
    }
  }
  EXPECT_EQ(weights, variables);
  std::set<std::string> node_names;
  for (const onnx::NodeProto& n : g.node()) {
    EXPECT_TRUE(node_names.insert(n.name()).second) << "two nodes named " << n.name();
    EXPECT_NE(n.op_type(), "Dropout");
    for (const std::string& input : n.input()) {
      EXPECT_TRUE(defined.count(input)) << n.name() << " takes " << input << " before it is made";
    }
    ASSERT_EQ(n.output_size(), 1) << n.name();
    EXPECT_EQ(n.output(0), n.name());
    EXPECT_TRUE(defined.insert(n.output(0)).second) << n.output(0);
  }
  // The preprocessing, then the one transpose to NCHW.
  int first = 0;
  while (first < g.node_size() && g.node(first).name().starts_with("preprocessing/")) ++first;
  ASSERT_LT(first, g.node_size());
  EXPECT_EQ(g.node(first).name(), "input/transpose");
  EXPECT_EQ(g.node(first).op_type(), "Transpose");
  EXPECT_THAT(Ints(&g.node(first), "perm"), ElementsAre(0, 3, 1, 2));
  const bool standardized = model.input_preprocessing().per_image_standardization;
  EXPECT_EQ(first > 0, standardized);
  EXPECT_EQ(Metadata(m).count("pstrain.preprocessing"), standardized ? 1u : 0u);

  const onnx::NodeProto* softmax = FindNode(g, "probabilities");
  const onnx::NodeProto* argmax = FindNode(g, "classes");
  ASSERT_TRUE(softmax && argmax);
  EXPECT_EQ(softmax->op_type(), "Softmax");
  EXPECT_EQ(Int(softmax, "axis"), 1);
  EXPECT_EQ(argmax->op_type(), "ArgMax");
  EXPECT_EQ(Int(argmax, "axis"), 1);
  EXPECT_EQ(Int(argmax, "keepdims"), 0);
  EXPECT_EQ(softmax->input(0), argmax->input(0));
}

const VariableInfo& Variable(const Model& model, const std::string& name) {
  for (const VariableInfo& v : model.variables()) {
    if (v.name == name) return v;
  }
  ADD_FAILURE() << "no variable " << name;
  return model.variables().front();
}

TEST(OnnxExportTest, MnistCnnNodesAndInitializerLayouts) {
  const Valued v = WithValues(BuildModel("mnist_cnn", ModelOptions()));
  const onnx::ModelProto m = Export(v);
  ExpectWellFormed(m, *v.model);
  const onnx::GraphProto& g = m.graph();
  std::vector<std::string> names, ops;
  for (const onnx::NodeProto& n : g.node()) {
    names.push_back(n.name());
    ops.push_back(n.op_type());
  }
  EXPECT_THAT(names,
              ElementsAre("input/transpose", "conv2d", "conv2d/relu", "max_pooling2d", "conv2d_1",
                          "conv2d_1/relu", "max_pooling2d_1", "flatten/nhwc", "flatten", "dense",
                          "dense/relu", "dense_1", "probabilities", "classes"));
  EXPECT_THAT(ops,
              ElementsAre("Transpose", "Conv", "Relu", "MaxPool", "Conv", "Relu", "MaxPool",
                          "Transpose", "Flatten", "Gemm", "Relu", "Gemm", "Softmax", "ArgMax"));
  // SAME 5x5 at stride 1: two pixels on every side.
  const onnx::NodeProto* conv = FindNode(g, "conv2d");
  EXPECT_THAT(conv->input(), ElementsAre("input/transpose", "conv2d/kernel", "conv2d/bias"));
  EXPECT_THAT(Ints(conv, "pads"), ElementsAre(2, 2, 2, 2));
  EXPECT_THAT(Ints(conv, "kernel_shape"), ElementsAre(5, 5));
  EXPECT_THAT(Ints(conv, "strides"), ElementsAre(1, 1));
  EXPECT_THAT(Ints(FindNode(g, "max_pooling2d"), "strides"), ElementsAre(2, 2));
  EXPECT_THAT(Ints(FindNode(g, "max_pooling2d"), "pads"), ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(Ints(FindNode(g, "flatten/nhwc"), "perm"), ElementsAre(0, 2, 3, 1));
  EXPECT_EQ(Int(FindNode(g, "flatten"), "axis"), 1);
  EXPECT_EQ(Int(FindNode(g, "dense"), "transB"), 0);

  // conv2d_1/kernel: HWIO [5, 5, 32, 64] written OIHW [64, 32, 5, 5].
  const VariableInfo& kernel = Variable(*v.model, "conv2d_1/kernel");
  const onnx::TensorProto* oihw = FindInitializer(g, "conv2d_1/kernel");
  ASSERT_NE(oihw, nullptr);
  EXPECT_THAT(Dims(oihw), ElementsAre(64, 32, 5, 5));
  const std::vector<float> values = Floats(*oihw);
  for (int64_t o : {0, 17, 63}) {
    for (int64_t i : {0, 5, 31}) {
      for (int64_t h : {0, 2, 4}) {
        for (int64_t w : {0, 3, 4}) {
          EXPECT_EQ(values[((o * 32 + i) * 5 + h) * 5 + w],
                    v.params[kernel.offset + ((h * 5 + w) * 32 + i) * 64 + o])
              << o << " " << i << " " << h << " " << w;
        }
      }
    }
  }
  // dense/kernel: [in, out] as pstrain's (NHWC flatten order), byte for byte.
  for (const char* name : {"dense/kernel", "dense/bias", "dense_1/kernel", "conv2d/bias"}) {
    const VariableInfo& var = Variable(*v.model, name);
    const onnx::TensorProto* t = FindInitializer(g, name);
    ASSERT_NE(t, nullptr);
    EXPECT_THAT(Dims(t), ElementsAreArray(var.shape)) << name;
    EXPECT_EQ(t->raw_data(), std::string(reinterpret_cast<const char*>(&v.params[var.offset]),
                                         var.size * sizeof(float)))
        << name;
  }
}

TEST(OnnxExportTest, ResNetStandardizesAndNormalizesWithTheMovingStatistics) {
  ModelOptions options;
  options.num_layers = 8;
  const Valued v = WithValues(BuildModel("cifar10_resnet", options));
  const onnx::ModelProto m = Export(v);
  ExpectWellFormed(m, *v.model);
  const onnx::GraphProto& g = m.graph();
  EXPECT_EQ(Metadata(m)["pstrain.preprocessing"], "per_image_standardization");
  std::vector<std::string> preprocessing;
  for (const onnx::NodeProto& n : g.node()) {
    if (n.name().starts_with("preprocessing/")) preprocessing.push_back(n.op_type());
  }
  EXPECT_THAT(preprocessing,
              ElementsAre("ReduceMean", "Sub", "Mul", "ReduceMean", "Sqrt", "Max", "Div"));
  EXPECT_THAT(Ints(FindNode(g, "preprocessing/mean"), "axes"), ElementsAre(1, 2, 3));
  const onnx::TensorProto* floor = FindInitializer(g, "preprocessing/stddev_floor");
  ASSERT_NE(floor, nullptr);
  EXPECT_EQ(floor->dims_size(), 0);
  EXPECT_FLOAT_EQ(Floats(*floor)[0], 1.0f / (255.0f * std::sqrt(32.0f * 32.0f * 3.0f)));

  const onnx::NodeProto* bn = FindNode(g, "stage2/block0/bn1");
  ASSERT_NE(bn, nullptr);
  EXPECT_EQ(bn->op_type(), "BatchNormalization");
  EXPECT_THAT(bn->input(), ElementsAre("stage2/block0/conv1", "stage2/block0/bn1/gamma",
                                       "stage2/block0/bn1/beta", "stage2/block0/bn1/moving_mean",
                                       "stage2/block0/bn1/moving_variance"));
  EXPECT_FLOAT_EQ(FindAttribute(*bn, "epsilon")->f(), options.batch_norm_epsilon);
  EXPECT_EQ(FindNode(g, "stage2/block0/bn1/relu")->op_type(), "Relu");
  for (const char* name : {"stage2/block0/bn1/moving_mean", "stage2/block0/bn1/moving_variance"}) {
    const VariableInfo& var = Variable(*v.model, name);
    ASSERT_FALSE(var.trainable);
    const onnx::TensorProto* t = FindInitializer(g, name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(Floats(*t),
              std::vector<float>(&v.state[var.offset], &v.state[var.offset] + var.size));
  }
  // A strided conv with fixed padding: one pixel on every side.
  EXPECT_THAT(Ints(FindNode(g, "stage2/block0/conv1"), "pads"), ElementsAre(1, 1, 1, 1));
  EXPECT_THAT(Ints(FindNode(g, "stage2/block0/conv1"), "strides"), ElementsAre(2, 2));
  // The option-A shortcut: average pool, zero channels on both sides.
  const onnx::NodeProto* pool = FindNode(g, "stage2/block0/shortcut_pool");
  EXPECT_EQ(pool->op_type(), "AveragePool");
  EXPECT_EQ(Int(pool, "count_include_pad"), 0);
  const onnx::NodeProto* pad = FindNode(g, "stage2/block0/shortcut");
  EXPECT_EQ(pad->op_type(), "Pad");
  EXPECT_THAT(pad->input(),
              ElementsAre("stage2/block0/shortcut_pool", "stage2/block0/shortcut/pads"));
  const onnx::TensorProto* pads = FindInitializer(g, "stage2/block0/shortcut/pads");
  ASSERT_NE(pads, nullptr);
  EXPECT_EQ(pads->data_type(), onnx::TensorProto::INT64);
  std::vector<int64_t> pad_values(8);
  ASSERT_EQ(pads->raw_data().size(), sizeof(int64_t) * 8);
  std::memcpy(pad_values.data(), pads->raw_data().data(), pads->raw_data().size());
  EXPECT_THAT(pad_values, ElementsAre(0, 8, 0, 0, 0, 8, 0, 0));
  EXPECT_EQ(FindNode(g, "global_average_pooling")->op_type(), "GlobalAveragePool");
  EXPECT_EQ(FindNode(g, "global_average_pooling/flatten")->op_type(), "Flatten");
  EXPECT_EQ(FindNode(g, "dense")->input(0), "global_average_pooling/flatten");
}

TEST(OnnxExportTest, EveryLayerType) {
  const Valued v =
      WithValues(BuildModelFromSpecText(SourceFile("tests/onnx/every_layer.yaml"), "every_layer"));
  ASSERT_NE(v.model, nullptr);
  const onnx::ModelProto m = Export(v);
  ExpectWellFormed(m, *v.model);
  const onnx::GraphProto& g = m.graph();
  std::set<std::string> ops;
  for (const onnx::NodeProto& n : g.node()) ops.insert(n.op_type());
  EXPECT_THAT(
      ops, ElementsAre("Add", "ArgMax", "AveragePool", "BatchNormalization", "Concat", "Conv",
                       "Div", "Erf", "Flatten", "Gemm", "GlobalAveragePool", "Identity",
                       "LeakyRelu", "Max", "MaxPool", "Mul", "Pad", "ReduceMean", "Relu", "Sigmoid",
                       "Softmax", "Sqrt", "Sub", "Tanh", "Transpose"));
  // GELU written out in opset 13's ops: x * (erf(x / sqrt(2)) + 1) / 2.
  EXPECT_EQ(FindNode(g, "c0/gelu/erf")->op_type(), "Erf");
  EXPECT_THAT(FindNode(g, "c0/gelu")->input(), ElementsAre("c0", "c0/gelu/half"));
  EXPECT_EQ(FindNode(g, "g1/scaled")->input(0), "d1/sigmoid");
  // Layer norm written out: its mean and variance over the last axis.
  EXPECT_EQ(FindNode(g, "ln/mean")->input(0), "g1");
  EXPECT_THAT(Ints(FindNode(g, "ln/variance"), "axes"), ElementsAre(-1));
  EXPECT_THAT(FindNode(g, "ln")->input(), ElementsAre("ln/scaled", "ln/beta"));
  EXPECT_EQ(FindNode(g, "bn_flat")->input(0), "ln");
  // SAME with an odd total: the extra pixel after, as TensorFlow.
  EXPECT_THAT(Ints(FindNode(g, "c1"), "pads"), ElementsAre(1, 1, 1, 1));  // 7 -> 4
  EXPECT_THAT(Ints(FindNode(g, "mp"), "pads"), ElementsAre(0, 0, 1, 1));  // 4 -> 2
  EXPECT_THAT(Ints(FindNode(g, "ap"), "pads"), ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(Ints(FindNode(g, "c0"), "pads"), ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(Ints(FindNode(g, "c2"), "pads"), ElementsAre(1, 1, 1, 1));  // fixed
  EXPECT_THAT(FindNode(g, "c2")->input(), ElementsAre("bn/relu", "c2/kernel"));
  EXPECT_EQ(FindNode(g, "c1/leaky_relu")->op_type(), "LeakyRelu");
  EXPECT_FLOAT_EQ(FindAttribute(*FindNode(g, "c1/leaky_relu"), "alpha")->f(), 0.2f);
  EXPECT_FLOAT_EQ(FindAttribute(*FindNode(g, "lr"), "alpha")->f(), 0.1f);
  EXPECT_EQ(FindNode(g, "c2/tanh")->op_type(), "Tanh");
  EXPECT_EQ(FindNode(g, "d1/sigmoid")->op_type(), "Sigmoid");
  EXPECT_EQ(FindNode(g, "mp")->input(0), "bn/relu");
  EXPECT_THAT(FindNode(g, "cat")->input(), ElementsAre("c2/tanh", "mp"));
  EXPECT_EQ(Int(FindNode(g, "cat"), "axis"), 1);
  EXPECT_THAT(FindNode(g, "flat_cat")->input(), ElementsAre("flat", "gap/flatten"));
  // Three inputs: summed in pstrain's order.
  EXPECT_THAT(FindNode(g, "sum/sum_1")->input(), ElementsAre("r", "pad"));
  EXPECT_THAT(FindNode(g, "sum")->input(), ElementsAre("sum/sum_1", "id"));
  // Dropout is gone: the tanh takes the batch norm's output.
  EXPECT_EQ(FindNode(g, "th")->input(0), "bn_flat");
  EXPECT_EQ(FindNode(g, "bn_flat")->op_type(), "BatchNormalization");
  // A flatten of a flat input has nothing to reorder.
  EXPECT_EQ(FindNode(g, "flat2")->input(0), "lr");
  EXPECT_EQ(FindNode(g, "flat")->input(0), "flat/nhwc");
  EXPECT_THAT(FindNode(g, "logits")->input(), ElementsAre("d2/tanh", "logits/kernel"));
  EXPECT_EQ(FindNode(g, "probabilities")->input(0), "logits");
}

TEST(OnnxExportTest, TheSameValuesGiveTheSameBytes) {
  const Valued v = WithValues(BuildModel("mnist_cnn", ModelOptions()));
  EXPECT_EQ(*ModelToOnnx(*v.model, v.params, v.state), *ModelToOnnx(*v.model, v.params, v.state));
}

TEST(OnnxExportTest, RefusesValuesOfAnotherCount) {
  Valued v = WithValues(BuildModel("mnist_cnn", ModelOptions()));
  v.params.pop_back();
  absl::StatusOr<std::string> bytes = ModelToOnnx(*v.model, v.params, v.state);
  EXPECT_TRUE(absl::IsInvalidArgument(bytes.status())) << bytes.status();
  EXPECT_THAT(std::string(bytes.status().message()), ::testing::HasSubstr("parameters"));
  ModelOptions options;
  options.num_layers = 8;
  Valued r = WithValues(BuildModel("cifar10_resnet", options));
  r.state.push_back(0);
  EXPECT_TRUE(absl::IsInvalidArgument(ModelToOnnx(*r.model, r.params, r.state).status()));
}

TEST(OnnxExportTest, RefusesAModelWithoutItsSpec) {
  Valued v = WithValues(BuildModel("mnist_cnn", ModelOptions()));
  v.model->set_spec(std::nullopt);
  absl::StatusOr<std::string> bytes = ModelToOnnx(*v.model, v.params, v.state);
  EXPECT_TRUE(absl::IsInvalidArgument(bytes.status())) << bytes.status();
  EXPECT_THAT(std::string(bytes.status().message()), ::testing::HasSubstr("no model spec"));
  // A spec that is another model's.
  Valued other = WithValues(BuildModel("mnist_cnn", ModelOptions()));
  ModelOptions options;
  options.num_layers = 8;
  other.model->set_spec(*ParseModelSpec(*BuiltinModelSpec("cifar10_resnet", options), "resnet"));
  bytes = ModelToOnnx(*other.model, other.params, other.state);
  EXPECT_TRUE(absl::IsInvalidArgument(bytes.status())) << bytes.status();
}

TEST(OnnxExportTest, NamesThatWouldCollideAreMadeUnique) {
  // conv2d a's fused ReLU is node "a/relu", a layer's name too; a layer named
  // as a variable or an output.
  const Valued v = WithValues(BuildModelFromSpecText(R"(
name: collide
input: [4, 4, 1]
classes: 2
layers:
  - conv2d: {filters: 2, kernel: 3, padding: same, activation: relu, name: a}
  - relu: {name: a/relu}
  - identity: {name: d/kernel}
  - identity: {name: probabilities}
  - flatten
  - dense: {units: 2, name: d}
)",
                                                     "collide"));
  ASSERT_NE(v.model, nullptr);
  const onnx::ModelProto m = Export(v);
  ExpectWellFormed(m, *v.model);
  const onnx::GraphProto& g = m.graph();
  EXPECT_EQ(FindNode(g, "a/relu")->input(0), "a");
  EXPECT_EQ(FindNode(g, "a/relu_1")->input(0), "a/relu");
  EXPECT_EQ(FindNode(g, "d/kernel_1")->input(0), "a/relu_1");
  EXPECT_EQ(FindNode(g, "probabilities_1")->input(0), "d/kernel_1");
  EXPECT_THAT(FindNode(g, "d")->input(), ElementsAre("flatten", "d/kernel", "d/bias"));
  EXPECT_EQ(FindNode(g, "probabilities")->input(0), "d");
}

// --- Tabular models: dense and sparse id features, embedding tables ---

// The spec at `path` with its dynamic tables given `buckets` buckets.
std::string Bucketed(const std::string& path, int64_t buckets) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(SourceFile(path), '\n')) {
    // Crossed tables have no ONNX form (CrossedTablesAreUnimplemented).
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "crosses:")) continue;
    lines.push_back(
        absl::StrReplaceAll(line, {{"dynamic: true", absl::StrCat("buckets: ", buckets)}}));
  }
  return absl::StrJoin(lines, "\n");
}

// A tabular model with values and trained rows at about half of each
// table's ids (not in id order), the others absent.
struct Tabular {
  Valued v;
  std::vector<TrainedTableRows> tables;
};
Tabular WithRows(absl::StatusOr<std::unique_ptr<Model>> model) {
  Tabular t;
  t.v = WithValues(std::move(model));
  if (t.v.model == nullptr) return t;
  uint64_t state = 99;
  for (const SparseTableInfo& info : t.v.model->sparse_tables()) {
    TrainedTableRows& rows = t.tables.emplace_back();
    for (int64_t id = info.buckets - 1; id >= 0; --id) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      if ((state >> 33) % 2 == 0) continue;
      rows.ids.push_back(id);
      for (int64_t j = 0; j < info.dim; ++j) {
        rows.weights.push_back(static_cast<float>(id) + 0.001f * static_cast<float>(j + 1));
      }
    }
  }
  return t;
}

onnx::ModelProto Export(const Tabular& t) {
  absl::StatusOr<std::string> bytes = ModelToOnnx(*t.v.model, t.v.params, t.v.state, t.tables);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  onnx::ModelProto proto;
  EXPECT_TRUE(bytes.ok() && proto.ParseFromString(*bytes));
  return proto;
}

std::vector<std::string> DimNames(const onnx::ValueInfoProto& info) {
  std::vector<std::string> dims;
  for (const auto& d : info.type().tensor_type().shape().dim()) {
    dims.push_back(d.has_dim_param() ? d.dim_param() : absl::StrCat(d.dim_value()));
  }
  return dims;
}

// What every tabular export is: inputs dense (when n > 0) and one int64
// [N, <f>_len] per feature; the head's outputs; initializers the variables,
// the tables [buckets, dim] holding the trained rows at their ids and zeros
// elsewhere, and constants; nodes in an order of evaluation.
void ExpectTabularWellFormed(const onnx::ModelProto& m, const Tabular& t) {
  const Model& model = *t.v.model;
  EXPECT_EQ(m.ir_version(), 8);
  EXPECT_EQ(m.opset_import(0).version(), 13);
  EXPECT_EQ(Metadata(m)["pstrain.model_spec"], model.spec_yaml());
  const onnx::GraphProto& g = m.graph();
  std::set<std::string> defined;
  int input = 0;
  const int64_t n = model.input_shape()[0];
  if (n > 0) {
    ASSERT_GT(g.input_size(), 0);
    EXPECT_EQ(g.input(0).name(), "dense");
    EXPECT_EQ(g.input(0).type().tensor_type().elem_type(), onnx::TensorProto::FLOAT);
    EXPECT_THAT(DimNames(g.input(0)), ElementsAre("N", absl::StrCat(n)));
    defined.insert("dense");
    ++input;
  }
  ASSERT_EQ(g.input_size(), input + static_cast<int>(model.sparse_features().size()));
  for (const std::string& f : model.sparse_features()) {
    const onnx::ValueInfoProto& in = g.input(input++);
    EXPECT_EQ(in.name(), f);
    EXPECT_EQ(in.type().tensor_type().elem_type(), onnx::TensorProto::INT64);
    EXPECT_THAT(DimNames(in), ElementsAre("N", f + "_len"));
    defined.insert(f);
  }
  const bool binary = model.head() == Head::kBinary;
  ASSERT_EQ(g.output_size(), binary ? 3 : 2);
  EXPECT_EQ(g.output(0).name(), "probabilities");
  EXPECT_THAT(DimNames(g.output(0)), ElementsAre("N", absl::StrCat(model.num_classes())));
  EXPECT_EQ(g.output(1).name(), "classes");
  EXPECT_EQ(g.output(1).type().tensor_type().elem_type(), onnx::TensorProto::INT64);
  EXPECT_THAT(DimNames(g.output(1)), ElementsAre("N"));
  if (binary) {
    EXPECT_EQ(g.output(2).name(), "logistic");
    EXPECT_THAT(DimNames(g.output(2)), ElementsAre("N", "1"));
  }

  std::set<std::string> variables;
  for (const VariableInfo& v : model.variables()) variables.insert(v.name);
  std::set<std::string> weights;
  std::map<std::string, const onnx::TensorProto*> initializers;
  for (const onnx::TensorProto& i : g.initializer()) {
    EXPECT_TRUE(defined.insert(i.name()).second) << i.name();
    EXPECT_TRUE(i.has_raw_data()) << i.name();
    initializers[i.name()] = &i;
    if (variables.count(i.name())) weights.insert(i.name());
  }
  EXPECT_EQ(weights, variables);
  for (size_t k = 0; k < model.sparse_tables().size(); ++k) {
    const SparseTableInfo& info = model.sparse_tables()[k];
    ASSERT_TRUE(initializers.count(info.name)) << info.name;
    const onnx::TensorProto& table = *initializers[info.name];
    EXPECT_EQ(table.data_type(), onnx::TensorProto::FLOAT);
    EXPECT_THAT(Dims(&table), ElementsAre(info.buckets, info.dim)) << info.name;
    std::vector<float> expected(info.buckets * info.dim, 0.0f);
    const TrainedTableRows& rows = t.tables[k];
    for (size_t r = 0; r < rows.ids.size(); ++r) {
      std::copy_n(rows.weights.begin() + r * info.dim, info.dim,
                  expected.begin() + rows.ids[r] * info.dim);
    }
    EXPECT_EQ(Floats(table), expected) << info.name;
  }
  for (const auto& [name, i] : initializers) {
    if (variables.count(name)) continue;
    bool table = false;
    for (const SparseTableInfo& info : model.sparse_tables()) table |= info.name == name;
    EXPECT_TRUE(table || name.starts_with("constants/") || name.ends_with("_shape") ||
                name.ends_with("/pair_indices") || name.ends_with("/pads") ||
                name.ends_with("/pad_value") || name.ends_with("/scale") ||
                name.ends_with("/last") || name.ends_with("/length") || name.ends_with("/epsilon"))
        << "an initializer that is no variable, table or constant: " << name;
  }
  std::set<std::string> node_names;
  for (const onnx::NodeProto& node : g.node()) {
    EXPECT_TRUE(node_names.insert(node.name()).second) << "two nodes named " << node.name();
    for (const std::string& in : node.input()) {
      EXPECT_TRUE(defined.count(in)) << node.name() << " takes " << in << " before it is made";
    }
    ASSERT_EQ(node.output_size(), 1) << node.name();
    EXPECT_EQ(node.output(0), node.name());
    EXPECT_TRUE(defined.insert(node.output(0)).second) << node.output(0);
  }
  for (const onnx::ValueInfoProto& out : g.output()) EXPECT_TRUE(defined.count(out.name()));
}

std::vector<std::string> Inputs(const onnx::NodeProto* n) {
  if (n == nullptr) return {};
  return {n->input().begin(), n->input().end()};
}

std::string OpOf(const onnx::GraphProto& g, const std::string& name) {
  const onnx::NodeProto* n = FindNode(g, name);
  return n == nullptr ? "" : n->op_type();
}

TEST(OnnxExportTabularTest, WideAndDeepWithBucketedTables) {
  const Tabular t =
      WithRows(BuildModelFromSpecText(Bucketed("examples/models/wide_and_deep.yaml", 50), "wd"));
  ASSERT_NE(t.v.model, nullptr);
  ASSERT_EQ(t.v.model->head(), Head::kBinary);
  const onnx::ModelProto m = Export(t);
  ExpectTabularWellFormed(m, t);
  const onnx::GraphProto& g = m.graph();
  EXPECT_EQ(g.input_size(), 27);
  // emb_C1 (sum): a Gather of the clamped ids, masked, summed over L.
  EXPECT_EQ(OpOf(g, "C1/ids"), "Max");
  EXPECT_THAT(Inputs(FindNode(g, "C1/ids")), ElementsAre("C1", "constants/int64_zero"));
  EXPECT_EQ(OpOf(g, "C1/is_id"), "GreaterOrEqual");
  EXPECT_EQ(Int(FindNode(g, "C1/valid"), "to"), onnx::TensorProto::FLOAT);
  EXPECT_THAT(Inputs(FindNode(g, "C1/mask")), ElementsAre("C1/valid", "constants/axis_2"));
  EXPECT_THAT(Inputs(FindNode(g, "emb_C1/rows")), ElementsAre("emb_C1/embeddings", "C1/ids"));
  EXPECT_EQ(OpOf(g, "emb_C1/rows"), "Gather");
  EXPECT_EQ(Int(FindNode(g, "emb_C1/rows"), "axis"), 0);
  EXPECT_THAT(Inputs(FindNode(g, "emb_C1/masked")), ElementsAre("emb_C1/rows", "C1/mask"));
  EXPECT_EQ(OpOf(g, "emb_C1"), "ReduceSum");
  EXPECT_THAT(Inputs(FindNode(g, "emb_C1")), ElementsAre("emb_C1/masked", "constants/axis_1"));
  EXPECT_EQ(Int(FindNode(g, "emb_C1"), "keepdims"), 0);
  // The deep input: the dense features first, as pstrain's concat.
  const std::vector<std::string> deep = Inputs(FindNode(g, "deep_input"));
  ASSERT_EQ(deep.size(), 27u);
  EXPECT_EQ(deep[0], "dense");
  EXPECT_EQ(deep[26], "emb_C26");
  // The wide part: the bias and one sum per feature; C1's mask is shared.
  EXPECT_EQ(OpOf(g, "wide"), "Sum");
  const std::vector<std::string> wide = Inputs(FindNode(g, "wide"));
  ASSERT_EQ(wide.size(), 27u);
  EXPECT_EQ(wide[0], "wide/bias");
  EXPECT_EQ(wide[1], "wide/C1/sum");
  EXPECT_THAT(Inputs(FindNode(g, "wide/C1/rows")), ElementsAre("wide/C1", "C1/ids"));
  EXPECT_THAT(Inputs(FindNode(g, "wide/C1/masked")), ElementsAre("wide/C1/rows", "C1/mask"));
  EXPECT_THAT(Inputs(FindNode(g, "logit")), ElementsAre("deep_logit", "wide"));
  // The binary head.
  EXPECT_EQ(OpOf(g, "logistic"), "Sigmoid");
  EXPECT_THAT(Inputs(FindNode(g, "logistic")), ElementsAre("logit"));
  EXPECT_THAT(Inputs(FindNode(g, "probabilities/negative")),
              ElementsAre("constants/one", "logistic"));
  EXPECT_EQ(OpOf(g, "probabilities"), "Concat");
  EXPECT_THAT(Inputs(FindNode(g, "probabilities")),
              ElementsAre("probabilities/negative", "logistic"));
  EXPECT_EQ(OpOf(g, "classes/positive"), "Greater");
  EXPECT_THAT(Inputs(FindNode(g, "classes/positive")), ElementsAre("logistic", "constants/half"));
  EXPECT_EQ(Int(FindNode(g, "classes/int64"), "to"), onnx::TensorProto::INT64);
  EXPECT_EQ(OpOf(g, "classes"), "Squeeze");
  // Nothing but sum combiners: no counts.
  for (const onnx::NodeProto& n : g.node()) EXPECT_NE(n.op_type(), "Div") << n.name();
  EXPECT_EQ(*ModelToOnnx(*t.v.model, t.v.params, t.v.state, t.tables),
            *ModelToOnnx(*t.v.model, t.v.params, t.v.state, t.tables));
}

TEST(OnnxExportTabularTest, DlrmGathersThePairsInTheLayersOrder) {
  const Tabular t =
      WithRows(BuildModelFromSpecText(Bucketed("examples/models/dlrm.yaml", 30), "dlrm"));
  ASSERT_NE(t.v.model, nullptr);
  const onnx::ModelProto m = Export(t);
  ExpectTabularWellFormed(m, t);
  const onnx::GraphProto& g = m.graph();
  // The bottom MLP on the dense features; its first layer, named dense as
  // the input is, has node dense_1.
  EXPECT_THAT(Inputs(FindNode(g, "dense_1")), ElementsAre("dense", "dense/kernel", "dense/bias"));
  EXPECT_THAT(Inputs(FindNode(g, "dense/relu")), ElementsAre("dense_1"));
  // mean: the sum divided by max(count, 1).
  EXPECT_THAT(Inputs(FindNode(g, "emb_C1")), ElementsAre("emb_C1/sum", "C1/count_at_least_1"));
  EXPECT_EQ(OpOf(g, "emb_C1"), "Div");
  EXPECT_THAT(Inputs(FindNode(g, "C1/count")), ElementsAre("C1/valid", "constants/axis_1"));
  EXPECT_EQ(Int(FindNode(g, "C1/count"), "keepdims"), 1);
  // 27 vectors of 16: the Gram matrix's pairs (1, 0), (2, 0), (2, 1), ...
  const onnx::NodeProto* interaction = nullptr;
  for (const onnx::NodeProto& n : g.node()) {
    if (n.name().ends_with("/pairs")) interaction = &n;
  }
  ASSERT_NE(interaction, nullptr);
  const std::string layer = interaction->name().substr(0, interaction->name().size() - 6);
  EXPECT_EQ(OpOf(g, layer + "/dots"), "MatMul");
  EXPECT_THAT(Ints(FindNode(g, layer + "/transposed"), "perm"), ElementsAre(0, 2, 1));
  const std::vector<std::string> stacked = Inputs(FindNode(g, layer + "/concat"));
  ASSERT_EQ(stacked.size(), 27u);
  EXPECT_EQ(stacked[0], "bottom/relu");
  EXPECT_EQ(stacked[1], "emb_C1");
  const onnx::TensorProto* shape = FindInitializer(g, layer + "/stacked_shape");
  ASSERT_NE(shape, nullptr);
  std::vector<int64_t> dims(3);
  ASSERT_EQ(shape->raw_data().size(), sizeof(int64_t) * 3);
  std::memcpy(dims.data(), shape->raw_data().data(), sizeof(int64_t) * 3);
  EXPECT_THAT(dims, ElementsAre(0, 27, 16));
  const onnx::TensorProto* pairs = FindInitializer(g, layer + "/pair_indices");
  ASSERT_NE(pairs, nullptr);
  ASSERT_EQ(pairs->raw_data().size(), sizeof(int64_t) * 27 * 26 / 2);
  std::vector<int64_t> index(27 * 26 / 2);
  std::memcpy(index.data(), pairs->raw_data().data(), pairs->raw_data().size());
  EXPECT_EQ(index[0], 1 * 27 + 0);
  EXPECT_EQ(index[1], 2 * 27 + 0);
  EXPECT_EQ(index[2], 2 * 27 + 1);
  EXPECT_EQ(index[3], 3 * 27 + 0);
  EXPECT_EQ(index.back(), 26 * 27 + 25);
  EXPECT_EQ(Int(interaction, "axis"), 1);
  EXPECT_THAT(Inputs(FindNode(g, layer)), ElementsAre("bottom/relu", interaction->name()));
}

TEST(OnnxExportTabularTest, EveryCombinerWithoutDenseFeatures) {
  const Tabular t = WithRows(
      BuildModelFromSpecText(SourceFile("tests/onnx/tabular_combiners.yaml"), "combiners"));
  ASSERT_NE(t.v.model, nullptr);
  const onnx::ModelProto m = Export(t);
  ExpectTabularWellFormed(m, t);
  const onnx::GraphProto& g = m.graph();
  EXPECT_EQ(g.input(0).name(), "a");  // no dense input
  EXPECT_THAT(Inputs(FindNode(g, "a_mean")), ElementsAre("a_mean/sum", "a/count_at_least_1"));
  EXPECT_THAT(Inputs(FindNode(g, "a_sqrtn")), ElementsAre("a_sqrtn/sum", "a/sqrt_count"));
  EXPECT_THAT(Inputs(FindNode(g, "a/sqrt_count")), ElementsAre("a/count_at_least_1"));
  EXPECT_EQ(OpOf(g, "b_sum"), "ReduceSum");
  // Feature a's nodes are made once, for its three tables.
  int a_ids = 0;
  for (const onnx::NodeProto& n : g.node()) a_ids += n.name().starts_with("a/ids");
  EXPECT_EQ(a_ids, 1);
  EXPECT_THAT(Inputs(FindNode(g, "a_sqrtn/rows")), ElementsAre("a_sqrtn/embeddings", "a/ids"));
  EXPECT_THAT(Inputs(FindNode(g, "wide/a/rows")), ElementsAre("wide/a", "a/ids"));
  // The empty dense input is left out of the concat.
  EXPECT_THAT(Inputs(FindNode(g, "deep_input")), ElementsAre("interact", "b_sum"));
}

TEST(OnnxExportTabularTest, ASoftmaxHeadKeepsTheImageModelsOutputs) {
  const Tabular t =
      WithRows(BuildModelFromSpecText(SourceFile("tests/onnx/tabular_softmax.yaml"), "softmax"));
  ASSERT_NE(t.v.model, nullptr);
  const onnx::ModelProto m = Export(t);
  ExpectTabularWellFormed(m, t);
  const onnx::GraphProto& g = m.graph();
  EXPECT_EQ(OpOf(g, "probabilities"), "Softmax");
  EXPECT_EQ(OpOf(g, "classes"), "ArgMax");
  EXPECT_THAT(Inputs(FindNode(g, "wide_f")), ElementsAre("wide_f/f/sum"));  // no bias
}

bool HasNode(const onnx::GraphProto& g, const std::string& name) {
  return std::any_of(g.node().begin(), g.node().end(),
                     [&](const onnx::NodeProto& n) { return n.name() == name; });
}

// An int64 initializer's values.
std::vector<int64_t> Int64Values(const onnx::TensorProto* t) {
  if (t == nullptr) return {};
  std::vector<int64_t> values(t->raw_data().size() / sizeof(int64_t));
  std::memcpy(values.data(), t->raw_data().data(), values.size() * sizeof(int64_t));
  return values;
}

// tests/onnx/tabular_sequence.yaml: every sequence layer (ONNX Runtime's
// agreement with pstrain is tests/onnx/onnx_runtime_agreement_test.cc's).
TEST(OnnxExportTabularTest, SequenceLayersAndTheirMasks) {
  const Tabular t = WithRows(
      BuildModelFromSpecText(SourceFile("tests/onnx/tabular_sequence.yaml"), "tabular_sequence"));
  ASSERT_NE(t.v.model, nullptr);
  const onnx::ModelProto m = Export(t);
  ExpectTabularWellFormed(m, t);
  const onnx::GraphProto& g = m.graph();
  // The history's last 3 values: GatherElements from the input padded with
  // three -1s, at columns max(values - 3, 0) + k.
  EXPECT_EQ(OpOf(g, "hist/padded"), "Pad");
  EXPECT_THAT(Inputs(FindNode(g, "hist/padded")),
              ElementsAre("history", "hist/pads", "hist/pad_value"));
  EXPECT_THAT(Int64Values(FindInitializer(g, "hist/pads")), ElementsAre(0, 0, 0, 3));
  EXPECT_THAT(Int64Values(FindInitializer(g, "hist/pad_value")), ElementsAre(-1));
  EXPECT_EQ(OpOf(g, "hist/first"), "Max");
  EXPECT_THAT(Inputs(FindNode(g, "hist/take")), ElementsAre("hist/first", "constants/range_3"));
  EXPECT_EQ(OpOf(g, "hist/ids"), "GatherElements");
  EXPECT_EQ(Int(FindNode(g, "hist/ids"), "axis"), 1);
  EXPECT_THAT(Inputs(FindNode(g, "hist/ids")), ElementsAre("hist/padded", "hist/take"));
  // Positions before min(values, 3) hold values: the mask and the counts agree.
  EXPECT_EQ(OpOf(g, "hist/is_value"), "Less");
  EXPECT_THAT(Inputs(FindNode(g, "hist/is_value")), ElementsAre("constants/range_3", "hist/count"));
  // The shared table: one initializer, read with each feature's ids.
  EXPECT_THAT(Inputs(FindNode(g, "hist/rows")), ElementsAre("items", "hist/row_ids"));
  EXPECT_THAT(Inputs(FindNode(g, "cand/rows")), ElementsAre("items", "candidate/ids"));
  // Positions from the end: count - 1 - k; from the start: added as they are.
  EXPECT_THAT(Inputs(FindNode(g, "hist/position_rows")),
              ElementsAre("hist/positions", "hist/position_ids"));
  EXPECT_THAT(Inputs(FindNode(g, "tokens/with_positions")),
              ElementsAre("tokens/rows", "tokens/positions"));
  EXPECT_FALSE(HasNode(g, "empty/with_positions"));
  EXPECT_THAT(Inputs(FindNode(g, "hist")), ElementsAre("hist/with_positions", "hist/mask"));
  // Causal attention: the keys' mask times the lower triangle.
  EXPECT_THAT(Inputs(FindNode(g, "causal/allowed")), ElementsAre("hist/key_mask", "causal/causal"));
  EXPECT_EQ(OpOf(g, "causal/at_or_before"), "LessOrEqual");
  EXPECT_THAT(Inputs(FindNode(g, "causal/at_or_before")),
              ElementsAre("causal/key_positions", "causal/query_positions"));
  EXPECT_EQ(OpOf(g, "causal/causal"), "Cast");
  EXPECT_EQ(OpOf(g, "causal/masked_scores"), "Where");
  EXPECT_THAT(Inputs(FindNode(g, "causal/weights")),
              ElementsAre("causal/softmax", "causal/allowed"));
  // Its output keeps the history's mask, and the model's zeroed padding.
  EXPECT_THAT(Inputs(FindNode(g, "causal/zero_padding")), ElementsAre("causal", "hist/mask"));
  EXPECT_THAT(Inputs(FindNode(g, "norm/zero_padding")), ElementsAre("norm", "hist/mask"));
  // dense on [N, L, d]: MatMul, then the bias.
  EXPECT_EQ(OpOf(g, "ffn/matmul"), "MatMul");
  EXPECT_THAT(Inputs(FindNode(g, "ffn")), ElementsAre("ffn/matmul", "ffn/bias"));
  EXPECT_EQ(OpOf(g, "ffn_2"), "MatMul");  // no bias
  EXPECT_EQ(Int(FindNode(g, "joined"), "axis"), 2);
  // Target attention: the candidate a sequence of one, and back.
  EXPECT_EQ(OpOf(g, "target/query_sequence"), "Unsqueeze");
  EXPECT_EQ(OpOf(g, "target"), "Squeeze");
  EXPECT_FALSE(HasNode(g, "target/zero_padding"));
  // Self-attention over tokens (not causal) masks by the tokens' mask alone.
  EXPECT_FALSE(HasNode(g, "self/allowed"));
  EXPECT_THAT(Inputs(FindNode(g, "self/is_allowed")), ElementsAre("tokens/key_mask"));
  // The pools.
  EXPECT_EQ(OpOf(g, "maxed/masked"), "Where");
  EXPECT_EQ(OpOf(g, "maxed"), "Mul");
  EXPECT_EQ(OpOf(g, "last/is_last"), "Equal");
  EXPECT_EQ(OpOf(g, "summed"), "ReduceSum");
  EXPECT_THAT(Inputs(FindNode(g, "text")), ElementsAre("text/sum", "text/count_at_least_1"));
  // DIN's unit: [h, c, h - c, h c], its MLP, the scores masked.
  EXPECT_THAT(
      Inputs(FindNode(g, "interest/unit_input")),
      ElementsAre("hist", "interest/candidates", "interest/difference", "interest/product"));
  EXPECT_THAT(Inputs(FindNode(g, "interest/weights")), ElementsAre("interest/score", "hist/mask"));
  EXPECT_EQ(OpOf(g, "interest"), "ReduceSum");
}

// tests/onnx/tabular_mmoe.yaml: mmoe and slice (ONNX Runtime's agreement
// with pstrain is tests/onnx/onnx_runtime_agreement_test.cc's).
TEST(OnnxExportTabularTest, MmoeAndSlices) {
  const Tabular t =
      WithRows(BuildModelFromSpecText(SourceFile("tests/onnx/tabular_mmoe.yaml"), "tabular_mmoe"));
  ASSERT_NE(t.v.model, nullptr);
  const onnx::ModelProto m = Export(t);
  ExpectTabularWellFormed(m, t);
  const onnx::GraphProto& g = m.graph();
  // An expert: Gemm and Relu per layer, then [N, 1, u] to be stacked.
  EXPECT_EQ(OpOf(g, "mmoe/expert1/dense0"), "Gemm");
  EXPECT_THAT(Inputs(FindNode(g, "mmoe/expert1/dense0")),
              ElementsAre("concatenate", "mmoe/expert1/kernel0", "mmoe/expert1/bias0"));
  EXPECT_EQ(OpOf(g, "mmoe/expert1/relu0"), "Relu");
  EXPECT_THAT(Inputs(FindNode(g, "mmoe/expert1/dense1")),
              ElementsAre("mmoe/expert1/relu0", "mmoe/expert1/kernel1", "mmoe/expert1/bias1"));
  EXPECT_THAT(Inputs(FindNode(g, "mmoe/expert1/stacked")),
              ElementsAre("mmoe/expert1/relu1", "constants/axis_1"));
  EXPECT_THAT(Inputs(FindNode(g, "mmoe/experts")),
              ElementsAre("mmoe/expert0/stacked", "mmoe/expert1/stacked", "mmoe/expert2/stacked"));
  EXPECT_EQ(Int(FindNode(g, "mmoe/experts"), "axis"), 1);
  // A gate: Gemm, then Softmax over the experts.
  EXPECT_THAT(Inputs(FindNode(g, "mmoe/gate1/logits")),
              ElementsAre("concatenate", "mmoe/gate1/kernel", "mmoe/gate1/bias"));
  EXPECT_EQ(OpOf(g, "mmoe/gate1"), "Softmax");
  EXPECT_EQ(Int(FindNode(g, "mmoe/gate1"), "axis"), 1);
  EXPECT_THAT(Inputs(FindNode(g, "mmoe/gates")),
              ElementsAre("mmoe/gate0/stacked", "mmoe/gate1/stacked"));
  // Every task's mixture at once: [N, tasks, experts] x [N, experts, u].
  EXPECT_EQ(OpOf(g, "mmoe/mixtures"), "MatMul");
  EXPECT_THAT(Inputs(FindNode(g, "mmoe/mixtures")), ElementsAre("mmoe/gates", "mmoe/experts"));
  EXPECT_EQ(OpOf(g, "mmoe"), "Flatten");
  EXPECT_EQ(Int(FindNode(g, "mmoe"), "axis"), 1);
  // Task 1's part: [4, 8) of the features.
  EXPECT_EQ(OpOf(g, "task1"), "Slice");
  EXPECT_THAT(Inputs(FindNode(g, "task1")),
              ElementsAre("mmoe", "constants/int64_4", "constants/int64_8", "constants/axis_1"));
  EXPECT_THAT(Int64Values(FindInitializer(g, "constants/int64_8")), ElementsAre(8));
  EXPECT_THAT(Inputs(FindNode(g, "task0")),
              ElementsAre("mmoe", "constants/int64_0", "constants/int64_4", "constants/axis_1"));
  EXPECT_EQ(FindNode(g, "tower1")->input(0), "task1");

  // The importer takes image models only: an mmoe's graph, even one
  // without tables, is refused at its flat input, before its nodes.
  const Valued dense = WithValues(
      BuildModelFromSpecText("input: [8]\nclasses: 2\nlayers:\n"
                             "  - mmoe: {name: mmoe, experts: 3, tasks: 2, units: [6, 4]}\n"
                             "  - slice: {name: t0, input: mmoe, begin: 0, size: 4}\n"
                             "  - dense: {name: out, units: 2}\n",
                             "mmoe"));
  ASSERT_NE(dense.model, nullptr);
  absl::StatusOr<std::string> bytes = ModelToOnnx(*dense.model, dense.params, dense.state, {});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<ImportedOnnx> imported = ImportOnnx(*bytes, "model.onnx");
  EXPECT_TRUE(absl::IsInvalidArgument(imported.status())) << imported.status();
  EXPECT_THAT(std::string(imported.status().message()), ::testing::HasSubstr("takes images"));
}

TEST(OnnxExportTabularTest, DynamicTablesAreUnimplemented) {
  const Valued v = WithValues(
      BuildModelFromSpecText(SourceFile("examples/models/wide_and_deep.yaml"), "wide_and_deep"));
  ASSERT_NE(v.model, nullptr);
  absl::StatusOr<std::string> bytes = ModelToOnnx(
      *v.model, v.params, v.state, std::vector<TrainedTableRows>(v.model->sparse_tables().size()));
  EXPECT_TRUE(absl::IsUnimplemented(bytes.status())) << bytes.status();
  EXPECT_THAT(std::string(bytes.status().message()),
              ::testing::HasSubstr("table emb_C1/embeddings: dynamic tables have no ONNX form: "
                                   "their ids are unbounded; give the table `buckets:` to export "
                                   "it to ONNX"));
}

TEST(OnnxExportTabularTest, CrossedTablesAreUnimplemented) {
  absl::StatusOr<std::unique_ptr<Model>> model = BuildModelFromSpecText(R"(
input: [2]
head: binary
layers:
  - linear: {features: [a, b], crosses: [[a, b]], buckets: 10}
)",
                                                                        "crossed");
  if (!model.ok()) GTEST_SKIP() << "this build has no crosses: " << model.status();
  const Valued v = WithValues(std::move(model));
  absl::StatusOr<std::string> bytes = ModelToOnnx(
      *v.model, v.params, v.state, std::vector<TrainedTableRows>(v.model->sparse_tables().size()));
  EXPECT_TRUE(absl::IsUnimplemented(bytes.status())) << bytes.status();
  EXPECT_THAT(std::string(bytes.status().message()),
              ::testing::HasSubstr("crossed tables have no ONNX form"));
}

// A string's row in a table is its fingerprint modulo the table's buckets:
// tables of one feature with different bucket counts cannot share the
// feature's one id input.
TEST(OnnxExportTabularTest, AFeaturesTablesOfOtherBucketCountsAreUnimplemented) {
  const Valued v = WithValues(BuildModelFromSpecText(R"(
input: [2]
head: binary
layers:
  - embedding: {feature: a, dim: 2, buckets: 11, name: emb}
  - concat: {input: input, inputs: [emb]}
  - dense: {units: 1, name: deep}
  - linear: {features: [a], buckets: 17, name: wide}
  - add: {input: deep, inputs: [wide]}
)",
                                                     "mixed buckets"));
  ASSERT_NE(v.model, nullptr);
  absl::StatusOr<std::string> bytes = ModelToOnnx(
      *v.model, v.params, v.state, std::vector<TrainedTableRows>(v.model->sparse_tables().size()));
  EXPECT_TRUE(absl::IsUnimplemented(bytes.status())) << bytes.status();
  EXPECT_THAT(std::string(bytes.status().message()),
              ::testing::HasSubstr("feature a is read by tables of 11 (emb/embeddings) and 17 "
                                   "(wide/a) buckets"));
}

TEST(OnnxExportTabularTest, RefusesRowsThatAreNotTheTables) {
  Tabular t = WithRows(
      BuildModelFromSpecText(SourceFile("tests/onnx/tabular_combiners.yaml"), "combiners"));
  ASSERT_NE(t.v.model, nullptr);
  const auto refused = [&](std::vector<TrainedTableRows> tables, const std::string& what) {
    absl::StatusOr<std::string> bytes = ModelToOnnx(*t.v.model, t.v.params, t.v.state, tables);
    EXPECT_TRUE(absl::IsInvalidArgument(bytes.status())) << what << ": " << bytes.status();
    EXPECT_THAT(std::string(bytes.status().message()), ::testing::HasSubstr(what));
  };
  refused({}, "got the rows of 0 tables, but the model has 7");
  std::vector<TrainedTableRows> more = t.tables;
  more.emplace_back();
  refused(more, "got the rows of 8 tables");
  std::vector<TrainedTableRows> bad = t.tables;
  bad[0].ids.push_back(13);  // a_mean has 13 buckets
  bad[0].weights.resize(bad[0].weights.size() + 4);
  refused(bad, "trained row id 13 is outside [0, buckets)");
  bad = t.tables;
  bad[2].ids.push_back(-1);
  bad[2].weights.resize(bad[2].weights.size() + 4);
  refused(bad, "trained row id -1 is outside");
  bad = t.tables;
  ASSERT_FALSE(bad[1].ids.empty());
  bad[1].ids.push_back(bad[1].ids[0]);
  bad[1].weights.resize(bad[1].weights.size() + 4);
  refused(bad, "is given twice");
  bad = t.tables;
  bad[4].weights.pop_back();
  refused(bad, "each id needs dim weights");
}

TEST(OnnxExportTabularTest, TablesPastTwoGibAreRefusedBeforeTheyAreMade) {
  const Valued v = WithValues(BuildModelFromSpecText(R"(
input: [1]
head: binary
layers:
  - embedding: {feature: f, dim: 64, buckets: 10000000}
  - dense: {units: 1}
)",
                                                     "huge"));
  ASSERT_NE(v.model, nullptr);
  absl::StatusOr<std::string> bytes =
      ModelToOnnx(*v.model, v.params, v.state, std::vector<TrainedTableRows>(1));
  EXPECT_TRUE(absl::IsResourceExhausted(bytes.status())) << bytes.status();
  EXPECT_THAT(std::string(bytes.status().message()), ::testing::HasSubstr("2 GiB"));
}

TEST(OnnxExportTabularTest, TheImporterRefusesATabularGraph) {
  for (const char* path :
       {"examples/models/wide_and_deep.yaml", "tests/onnx/tabular_combiners.yaml",
        "tests/onnx/tabular_softmax.yaml"}) {
    const Tabular t = WithRows(BuildModelFromSpecText(Bucketed(path, 20), path));
    ASSERT_NE(t.v.model, nullptr);
    absl::StatusOr<std::string> bytes = ModelToOnnx(*t.v.model, t.v.params, t.v.state, t.tables);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    absl::StatusOr<ImportedOnnx> imported = ImportOnnx(*bytes, "model.onnx");
    EXPECT_TRUE(absl::IsInvalidArgument(imported.status())) << path << ": " << imported.status();
    EXPECT_THAT(std::string(imported.status().message()), ::testing::HasSubstr("embedding tables"))
        << path;
  }
}

}  // namespace
}  // namespace pstrain
