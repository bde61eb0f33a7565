#include "onnx/onnx_export.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/registry.h"
#include "onnx/onnx.pb.h"

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
      EXPECT_TRUE(t.name() == "preprocessing/stddev_floor" || t.name().ends_with("/pads"))
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
  EXPECT_THAT(ops, ElementsAre("Add", "ArgMax", "AveragePool", "BatchNormalization", "Concat",
                               "Conv", "Div", "Flatten", "Gemm", "GlobalAveragePool", "Identity",
                               "LeakyRelu", "Max", "MaxPool", "Mul", "Pad", "ReduceMean", "Relu",
                               "Sigmoid", "Softmax", "Sqrt", "Sub", "Tanh", "Transpose"));
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
  v.model->set_spec_yaml("");
  absl::StatusOr<std::string> bytes = ModelToOnnx(*v.model, v.params, v.state);
  EXPECT_TRUE(absl::IsInvalidArgument(bytes.status())) << bytes.status();
  EXPECT_THAT(std::string(bytes.status().message()), ::testing::HasSubstr("no model spec"));
  // A spec that is another model's.
  Valued other = WithValues(BuildModel("mnist_cnn", ModelOptions()));
  ModelOptions options;
  options.num_layers = 8;
  other.model->set_spec_yaml(*BuiltinModelSpec("cifar10_resnet", options));
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

}  // namespace
}  // namespace pstrain
