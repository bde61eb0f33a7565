#ifndef PSTRAIN_TESTING_ONNX_TEST_GRAPH_H_
#define PSTRAIN_TESTING_ONNX_TEST_GRAPH_H_

// For tests and fuzz/make_seeds.cc only: ONNX models built in C++ through the
// schema's protobuf classes, a node at a time.

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "onnx/onnx.pb.h"

namespace pstrain {
namespace onnx_test {

class GraphBuilder {
 public:
  explicit GraphBuilder(int64_t opset = 13, int64_t ir_version = 7) {
    model_.set_ir_version(ir_version);
    model_.set_producer_name("pstrain-test");
    onnx::OperatorSetIdProto* o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    model_.mutable_graph()->set_name("test_graph");
  }

  onnx::ModelProto& model() { return model_; }
  onnx::GraphProto& graph() { return *model_.mutable_graph(); }

  // A float input or output; a dimension < 0 is the dynamic batch "N".
  void Input(const std::string& name, const std::vector<int64_t>& dims) {
    Value(graph().add_input(), name, dims, onnx::TensorProto_DataType_FLOAT);
  }
  void Output(const std::string& name, const std::vector<int64_t>& dims,
              int type = onnx::TensorProto_DataType_FLOAT) {
    Value(graph().add_output(), name, dims, type);
  }

  // A float initializer as little-endian raw_data.
  onnx::TensorProto* Init(const std::string& name, const std::vector<int64_t>& dims,
                          const std::vector<float>& values) {
    onnx::TensorProto* t = graph().add_initializer();
    FillFloat(t, name, dims, values);
    return t;
  }
  onnx::TensorProto* InitInt64(const std::string& name, const std::vector<int64_t>& dims,
                               const std::vector<int64_t>& values) {
    onnx::TensorProto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto_DataType_INT64);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 8));
    return t;
  }

  onnx::NodeProto* Node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    onnx::NodeProto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? "/" + outputs[0] + "/" + op : name);
    for (const std::string& i : inputs) n->add_input(i);
    for (const std::string& o : outputs) n->add_output(o);
    return n;
  }

  // A Constant node giving a tensor.
  onnx::TensorProto* Constant(const std::string& output, int type) {
    onnx::NodeProto* n = Node("Constant", {}, {output});
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(type);
    return a->mutable_t();
  }
  void ConstantFloat(const std::string& output, float v) {
    FillFloat(Constant(output, onnx::TensorProto_DataType_FLOAT), "", {}, {v});
  }
  void ConstantInt64(const std::string& output, const std::vector<int64_t>& dims,
                     const std::vector<int64_t>& values) {
    onnx::TensorProto* t = Constant(output, onnx::TensorProto_DataType_INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
  }

  static void Int(onnx::NodeProto* n, const std::string& name, int64_t v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void Float(onnx::NodeProto* n, const std::string& name, float v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void Ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void String(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }

  std::string Bytes() const { return model_.SerializeAsString(); }

  static void FillFloat(onnx::TensorProto* t, const std::string& name,
                        const std::vector<int64_t>& dims, const std::vector<float>& values) {
    if (!name.empty()) t->set_name(name);
    t->set_data_type(onnx::TensorProto_DataType_FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(
        std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  }

 private:
  static void Value(onnx::ValueInfoProto* v, const std::string& name,
                    const std::vector<int64_t>& dims, int type) {
    v->set_name(name);
    onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    for (int64_t d : dims) {
      onnx::TensorShapeProto_Dimension* dim = t->mutable_shape()->add_dim();
      if (d < 0) {
        dim->set_dim_param("N");
      } else {
        dim->set_dim_value(d);
      }
    }
  }

  onnx::ModelProto model_;
};

// Deterministic values in [-scale, scale).
inline std::vector<float> TestValues(int64_t n, uint32_t seed, float scale = 0.5f) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = scale * (static_cast<float>(s >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f);
  }
  return v;
}

// A CNN as torch.onnx.export(training=TRAINING, do_constant_folding=False,
// opset_version=13) writes it: Conv (pads 1) -> BatchNormalization (5
// outputs) -> Relu -> MaxPool 2 -> x.view(x.size(0), -1) (Shape, Gather,
// Unsqueeze, Concat, Reshape) -> Dropout (ratio and training_mode inputs) ->
// Gemm transB 1 -> Relu -> Gemm transB 1, for [N, 2, 6, 6] images and 3
// classes. The weights are TestValues(size, seed) with these seeds.
struct SmallCnn {
  static constexpr int64_t kC = 2, kH = 6, kW = 6, kF = 4, kK = 3, kHidden = 5, kClasses = 3;
  static constexpr float kEpsilon = 1e-5f;
  std::vector<float> conv_w = TestValues(kF * kC * kK * kK, 1);
  std::vector<float> conv_b = TestValues(kF, 2);
  std::vector<float> gamma = TestValues(kF, 3, 0.3f), beta = TestValues(kF, 4);
  std::vector<float> mean = TestValues(kF, 5), var = TestValues(kF, 6, 0.4f);
  std::vector<float> fc1_w = TestValues(kHidden * kF * 9, 7), fc1_b = TestValues(kHidden, 8);
  std::vector<float> fc2_w = TestValues(kClasses * kHidden, 9), fc2_b = TestValues(kClasses, 10);

  SmallCnn() {
    for (float& g : gamma) g += 1.0f;
    for (float& v : var) v += 0.6f;  // positive
  }

  GraphBuilder Build() const {
    GraphBuilder b(13, 7);
    b.model().mutable_graph()->set_name("torch_jit");
    b.Input("images", {-1, kC, kH, kW});
    b.Init("conv1.weight", {kF, kC, kK, kK}, conv_w);
    b.Init("conv1.bias", {kF}, conv_b);
    b.Init("bn1.weight", {kF}, gamma);
    b.Init("bn1.bias", {kF}, beta);
    b.Init("bn1.running_mean", {kF}, mean);
    b.Init("bn1.running_var", {kF}, var);
    b.Init("fc1.weight", {kHidden, kF * 9}, fc1_w);
    b.Init("fc1.bias", {kHidden}, fc1_b);
    b.Init("fc2.weight", {kClasses, kHidden}, fc2_w);
    b.Init("fc2.bias", {kClasses}, fc2_b);
    onnx::NodeProto* n =
        b.Node("Conv", {"images", "conv1.weight", "conv1.bias"}, {"c1"}, "/conv1/Conv");
    GraphBuilder::Ints(n, "dilations", {1, 1});
    GraphBuilder::Int(n, "group", 1);
    GraphBuilder::Ints(n, "kernel_shape", {kK, kK});
    GraphBuilder::Ints(n, "pads", {1, 1, 1, 1});
    GraphBuilder::Ints(n, "strides", {1, 1});
    n = b.Node("BatchNormalization",
               {"c1", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"},
               {"b1", "b1_mean", "b1_var", "b1_saved_mean", "b1_saved_var"},
               "/bn1/BatchNormalization");
    GraphBuilder::Float(n, "epsilon", kEpsilon);
    GraphBuilder::Float(n, "momentum", 0.9f);
    b.Node("Relu", {"b1"}, {"r1"}, "/Relu");
    n = b.Node("MaxPool", {"r1"}, {"p1"}, "/pool/MaxPool");
    GraphBuilder::Int(n, "ceil_mode", 0);
    GraphBuilder::Ints(n, "kernel_shape", {2, 2});
    GraphBuilder::Ints(n, "pads", {0, 0, 0, 0});
    GraphBuilder::Ints(n, "strides", {2, 2});
    b.Node("Shape", {"p1"}, {"shape"}, "/Shape");
    b.ConstantInt64("zero", {}, {0});
    b.Node("Gather", {"shape", "zero"}, {"batch"}, "/Gather");
    b.ConstantInt64("minus_one", {}, {-1});
    b.ConstantInt64("axes0", {1}, {0});
    b.ConstantInt64("axes1", {1}, {0});
    b.Node("Unsqueeze", {"batch", "axes0"}, {"batch1"}, "/Unsqueeze");
    b.Node("Unsqueeze", {"minus_one", "axes1"}, {"minus_one1"}, "/Unsqueeze_1");
    n = b.Node("Concat", {"batch1", "minus_one1"}, {"new_shape"}, "/Concat");
    GraphBuilder::Int(n, "axis", 0);
    b.Node("Reshape", {"p1", "new_shape"}, {"flat"}, "/Reshape");
    b.ConstantFloat("ratio", 0.25f);
    onnx::TensorProto* mode = b.Constant("training", onnx::TensorProto_DataType_BOOL);
    mode->set_raw_data(std::string(1, '\1'));
    b.Node("Dropout", {"flat", "ratio", "training"}, {"d", "d_mask"}, "/dropout/Dropout");
    n = b.Node("Gemm", {"d", "fc1.weight", "fc1.bias"}, {"h"}, "/fc1/Gemm");
    GraphBuilder::Float(n, "alpha", 1.0f);
    GraphBuilder::Float(n, "beta", 1.0f);
    GraphBuilder::Int(n, "transB", 1);
    b.Node("Relu", {"h"}, {"hr"}, "/Relu_1");
    n = b.Node("Gemm", {"hr", "fc2.weight", "fc2.bias"}, {"logits"}, "/fc2/Gemm");
    GraphBuilder::Float(n, "alpha", 1.0f);
    GraphBuilder::Float(n, "beta", 1.0f);
    GraphBuilder::Int(n, "transB", 1);
    b.Output("logits", {-1, kClasses});
    return b;
  }
};

}  // namespace onnx_test
}  // namespace pstrain

#endif  // PSTRAIN_TESTING_ONNX_TEST_GRAPH_H_
