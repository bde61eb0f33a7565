#include "onnx/onnx_import.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/spec_builder.h"
#include "testing/onnx_test_graph.h"

namespace pstrain {
namespace {

using onnx_test::GraphBuilder;
using onnx_test::SmallCnn;
using onnx_test::TestValues;
using ::testing::HasSubstr;

absl::StatusOr<ImportedOnnx> Import(const GraphBuilder& b) {
  return ImportOnnx(b.Bytes(), "net.onnx");
}

// The error's message, which must begin with the file's name.
std::string ErrorOf(const GraphBuilder& b) {
  absl::StatusOr<ImportedOnnx> r = Import(b);
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_THAT(std::string(r.status().message()), ::testing::StartsWith("net.onnx: "));
  return std::string(r.status().message());
}

const LayerSpec* FindLayer(const ModelSpec& spec, const std::string& type, int nth = 0) {
  for (const LayerSpec& l : spec.layers) {
    if (l.type == type && nth-- == 0) return &l;
  }
  return nullptr;
}

const ImportedTensor* FindWeight(const ImportedOnnx& m, const std::string& name) {
  for (const ImportedTensor& t : m.weights) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// Builds the spec, checks that the weights are exactly the model's
// variables, and returns the logits for `images` (NHWC).
std::vector<float> Logits(const ImportedOnnx& imported, const std::vector<float>& images,
                          int64_t batch) {
  absl::StatusOr<std::unique_ptr<Model>> model = BuildModelFromSpec(imported.spec, "net.onnx");
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  Model& m = **model;
  std::vector<float> params(m.num_params()), state(m.num_state());
  std::map<std::string, const ImportedTensor*> by_name;
  for (const ImportedTensor& t : imported.weights) by_name[t.name] = &t;
  EXPECT_EQ(by_name.size(), m.variables().size());
  for (const VariableInfo& v : m.variables()) {
    auto it = by_name.find(v.name);
    EXPECT_NE(it, by_name.end()) << v.name;
    if (it == by_name.end()) continue;
    EXPECT_EQ(it->second->shape, std::vector<int64_t>(v.shape.begin(), v.shape.end())) << v.name;
    EXPECT_EQ(static_cast<int64_t>(it->second->values.size()), v.size) << v.name;
    std::copy(it->second->values.begin(), it->second->values.end(),
              (v.trainable ? params.data() : state.data()) + v.offset);
  }
  const Tensor& logits = m.Infer(params.data(), state.data(), images.data(), batch);
  return std::vector<float>(logits.data(), logits.data() + logits.size());
}

// SmallCnn's logits computed in NCHW by plain loops.
std::vector<float> ReferenceLogits(const SmallCnn& net, const std::vector<float>& nchw,
                                   int64_t batch) {
  constexpr int64_t C = SmallCnn::kC, H = SmallCnn::kH, W = SmallCnn::kW, F = SmallCnn::kF,
                    K = SmallCnn::kK;
  std::vector<float> out;
  for (int64_t n = 0; n < batch; ++n) {
    const float* x = nchw.data() + n * C * H * W;
    std::vector<float> a(F * H * W);
    for (int64_t f = 0; f < F; ++f) {
      for (int64_t y = 0; y < H; ++y) {
        for (int64_t z = 0; z < W; ++z) {
          double s = net.conv_b[f];
          for (int64_t c = 0; c < C; ++c) {
            for (int64_t i = 0; i < K; ++i) {
              for (int64_t j = 0; j < K; ++j) {
                const int64_t yy = y + i - 1, zz = z + j - 1;
                if (yy < 0 || yy >= H || zz < 0 || zz >= W) continue;
                s += net.conv_w[((f * C + c) * K + i) * K + j] * x[(c * H + yy) * W + zz];
              }
            }
          }
          const double bn =
              net.gamma[f] * (s - net.mean[f]) / std::sqrt(net.var[f] + SmallCnn::kEpsilon) +
              net.beta[f];
          a[(f * H + y) * W + z] = static_cast<float>(std::max(bn, 0.0));
        }
      }
    }
    std::vector<float> pooled;  // [F, 3, 3], flattened in CHW order
    for (int64_t f = 0; f < F; ++f) {
      for (int64_t y = 0; y < H / 2; ++y) {
        for (int64_t z = 0; z < W / 2; ++z) {
          float m = a[(f * H + 2 * y) * W + 2 * z];
          for (int64_t i = 0; i < 2; ++i) {
            for (int64_t j = 0; j < 2; ++j) m = std::max(m, a[(f * H + 2 * y + i) * W + 2 * z + j]);
          }
          pooled.push_back(m);
        }
      }
    }
    std::vector<float> hidden(SmallCnn::kHidden);
    for (int64_t o = 0; o < SmallCnn::kHidden; ++o) {
      double s = net.fc1_b[o];
      for (size_t i = 0; i < pooled.size(); ++i) s += net.fc1_w[o * pooled.size() + i] * pooled[i];
      hidden[o] = static_cast<float>(std::max(s, 0.0));
    }
    for (int64_t o = 0; o < SmallCnn::kClasses; ++o) {
      double s = net.fc2_b[o];
      for (int64_t i = 0; i < SmallCnn::kHidden; ++i) {
        s += net.fc2_w[o * SmallCnn::kHidden + i] * hidden[i];
      }
      out.push_back(static_cast<float>(s));
    }
  }
  return out;
}

std::vector<float> NchwToNhwc(const std::vector<float>& x, int64_t n, int64_t c, int64_t h,
                              int64_t w) {
  std::vector<float> y(x.size());
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t k = 0; k < c; ++k) {
      for (int64_t i = 0; i < h; ++i) {
        for (int64_t j = 0; j < w; ++j) {
          y[((b * h + i) * w + j) * c + k] = x[((b * c + k) * h + i) * w + j];
        }
      }
    }
  }
  return y;
}

TEST(OnnxImportTest, TorchStyleCnnComputesTheSameLogits) {
  const SmallCnn net;
  absl::StatusOr<ImportedOnnx> imported = Import(net.Build());
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ModelSpec& spec = imported->spec;
  EXPECT_EQ(spec.input, (std::vector<int64_t>{6, 6, 2}));
  EXPECT_EQ(spec.classes, 3);
  EXPECT_EQ(spec.name, "");  // torch's "torch_jit" says nothing
  std::vector<std::string> types, names;
  for (const LayerSpec& l : spec.layers) {
    types.push_back(l.type);
    names.push_back(l.name);
  }
  EXPECT_EQ(types, (std::vector<std::string>{"conv2d", "batch_norm", "max_pool", "flatten",
                                             "dropout", "dense", "dense"}));
  EXPECT_EQ(names,
            (std::vector<std::string>{"conv1", "bn1", "pool", "Reshape", "dropout", "fc1", "fc2"}));
  EXPECT_EQ(spec.layers[0].padding, "same");
  EXPECT_TRUE(spec.layers[1].relu);
  EXPECT_FLOAT_EQ(spec.layers[1].momentum, 0.9f);
  EXPECT_FLOAT_EQ(spec.layers[1].epsilon, 1e-5f);
  EXPECT_FLOAT_EQ(spec.layers[4].rate, 0.25f);
  EXPECT_EQ(spec.layers[5].activation, "relu");
  EXPECT_EQ(spec.layers[6].activation, "none");
  EXPECT_EQ(imported->weights.size(), 10u);

  constexpr int64_t kBatch = 3;
  const std::vector<float> nchw = TestValues(kBatch * 2 * 6 * 6, 42, 1.0f);
  const std::vector<float> got = Logits(*imported, NchwToNhwc(nchw, kBatch, 2, 6, 6), kBatch);
  const std::vector<float> want = ReferenceLogits(net, nchw, kBatch);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << i;

  // Written out and read back, the spec is the same.
  absl::StatusOr<ModelSpec> again = ParseModelSpec(ModelSpecToYaml(spec), "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->layers.size(), spec.layers.size());
}

// pstrain's own export: NHWC images, standardization nodes, input/transpose,
// Transpose [0, 2, 3, 1] + Flatten, Softmax -> probabilities, ArgMax -> classes.
GraphBuilder PstrainStyleExport(bool metadata = true) {
  GraphBuilder b(13, 8);
  b.graph().set_name("fashion_cnn");
  if (metadata) {
    onnx::StringStringEntryProto* e = b.model().add_metadata_props();
    e->set_key("pstrain.preprocessing");
    e->set_value("per_image_standardization");
  }
  b.Input("images", {-1, 6, 6, 1});
  onnx::NodeProto* n = b.Node("ReduceMean", {"images"}, {"mean"}, "preprocessing/mean");
  GraphBuilder::Ints(n, "axes", {1, 2, 3});
  b.Node("Sub", {"images", "mean"}, {"centered"}, "preprocessing/sub");
  n = b.Node("Transpose", {"centered"}, {"nchw"}, "input/transpose");
  GraphBuilder::Ints(n, "perm", {0, 3, 1, 2});
  b.Init("conv2d/kernel", {2, 1, 3, 3}, TestValues(18, 1));
  b.Init("conv2d/bias", {2}, TestValues(2, 2));
  n = b.Node("Conv", {"nchw", "conv2d/kernel", "conv2d/bias"}, {"c"}, "conv2d/Conv");
  GraphBuilder::Ints(n, "kernel_shape", {3, 3});
  GraphBuilder::Ints(n, "strides", {2, 2});
  GraphBuilder::Ints(n, "pads", {0, 0, 1, 1});  // TF's same: the extra pixel at the end
  b.Node("Relu", {"c"}, {"cr"}, "conv2d/Relu");
  n = b.Node("Transpose", {"cr"}, {"nhwc"}, "flatten/transpose");
  GraphBuilder::Ints(n, "perm", {0, 2, 3, 1});
  b.Node("Flatten", {"nhwc"}, {"flat"}, "flatten/Flatten");
  b.Init("dense/kernel", {18, 4}, TestValues(72, 3));
  b.Init("dense/bias", {4}, TestValues(4, 4));
  n = b.Node("Gemm", {"flat", "dense/kernel", "dense/bias"}, {"logits"}, "dense/Gemm");
  b.Node("Softmax", {"logits"}, {"probabilities"}, "probabilities");
  n = b.Node("ArgMax", {"probabilities"}, {"classes"}, "classes");
  GraphBuilder::Int(n, "axis", 1);
  b.Output("probabilities", {-1, 4});
  b.Output("classes", {-1}, onnx::TensorProto_DataType_INT64);
  return b;
}

TEST(OnnxImportTest, PstrainStyleExport) {
  absl::StatusOr<ImportedOnnx> imported = Import(PstrainStyleExport());
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ModelSpec& spec = imported->spec;
  EXPECT_EQ(spec.name, "fashion_cnn");
  EXPECT_EQ(spec.input, (std::vector<int64_t>{6, 6, 1}));
  EXPECT_EQ(spec.classes, 4);
  EXPECT_TRUE(spec.per_image_standardization);
  ASSERT_EQ(spec.layers.size(), 3u);
  EXPECT_EQ(spec.layers[0].name, "conv2d");
  EXPECT_EQ(spec.layers[0].padding, "same");
  EXPECT_EQ(spec.layers[0].strides, 2);
  EXPECT_EQ(spec.layers[0].activation, "relu");
  EXPECT_EQ(spec.layers[1].type, "flatten");
  EXPECT_EQ(spec.layers[2].name, "dense");
  // A pstrain flatten: the dense kernel is the initializer as it is.
  const ImportedTensor* kernel = FindWeight(*imported, "dense/kernel");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->values, TestValues(72, 3));
  EXPECT_FALSE(imported->notes.empty());  // the Softmax dropped
  EXPECT_TRUE(BuildModelFromSpec(spec, "net.onnx").ok());

  // Preprocessing nodes without the metadata, or a stray one, are refused.
  EXPECT_THAT(ErrorOf(PstrainStyleExport(false)), HasSubstr("preprocessing/"));
  GraphBuilder stray = PstrainStyleExport();
  stray.graph().mutable_node(5)->set_name("preprocessing/late");  // the Relu
  EXPECT_THAT(ErrorOf(stray), HasSubstr("preprocessing/late"));
}

// Conv on [N, 1, 6, 6] with `pads` and `strides`, then Flatten and Gemm.
GraphBuilder ConvNet(std::vector<int64_t> pads, int64_t stride, int64_t k = 3) {
  GraphBuilder b;
  b.Input("x", {-1, 1, 6, 6});
  b.Init("w", {2, 1, k, k}, TestValues(2 * k * k, 1));
  onnx::NodeProto* n = b.Node("Conv", {"x", "w"}, {"c"}, "conv");
  GraphBuilder::Ints(n, "pads", pads);
  GraphBuilder::Ints(n, "strides", {stride, stride});
  b.Node("Flatten", {"c"}, {"f"});
  const int64_t out = stride == 2 ? 3 : (pads[0] ? 6 : 4);
  b.Init("fc", {2 * out * out, 2}, TestValues(4 * out * out, 2));
  b.Node("Gemm", {"f", "fc"}, {"y"});
  b.Output("y", {-1, 2});
  return b;
}

TEST(OnnxImportTest, ConvPadding) {
  struct Case {
    std::vector<int64_t> pads;
    int64_t stride;
    std::string padding;
  };
  for (const Case& c : std::vector<Case>{{{0, 0, 0, 0}, 1, "valid"},
                                         {{1, 1, 1, 1}, 1, "same"},
                                         {{0, 0, 1, 1}, 2, "same"},
                                         {{1, 1, 1, 1}, 2, "fixed"}}) {
    absl::StatusOr<ImportedOnnx> r = Import(ConvNet(c.pads, c.stride));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->spec.layers[0].padding, c.padding);
    EXPECT_EQ(r->spec.layers[0].use_bias, false);
    EXPECT_TRUE(BuildModelFromSpec(r->spec, "net.onnx").ok());
    // OIHW -> HWIO.
    const ImportedTensor* w = FindWeight(*r, "conv/kernel");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->shape, (std::vector<int64_t>{3, 3, 1, 2}));
    EXPECT_EQ(w->values[1], TestValues(18, 1)[9]);  // h0 w0 i0 o1 <- o1 i0 h0 w0
  }
  EXPECT_THAT(ErrorOf(ConvNet({1, 0, 0, 0}, 1)), HasSubstr("node conv (Conv)"));
  EXPECT_THAT(ErrorOf(ConvNet({1, 0, 0, 0}, 1)), HasSubstr("same"));
}

TEST(OnnxImportTest, ConvRefusals) {
  GraphBuilder grouped = ConvNet({1, 1, 1, 1}, 1);
  GraphBuilder::Int(grouped.graph().mutable_node(0), "group", 2);
  EXPECT_THAT(ErrorOf(grouped), HasSubstr("group 2"));
  GraphBuilder dilated = ConvNet({1, 1, 1, 1}, 1);
  GraphBuilder::Ints(dilated.graph().mutable_node(0), "dilations", {2, 2});
  EXPECT_THAT(ErrorOf(dilated), HasSubstr("dilat"));
  GraphBuilder odd = ConvNet({1, 1, 1, 1}, 1);
  GraphBuilder::Int(odd.graph().mutable_node(0), "frobnicate", 1);
  EXPECT_THAT(ErrorOf(odd), HasSubstr("attribute frobnicate"));
  GraphBuilder rank3 = ConvNet({1, 1, 1, 1}, 1);
  rank3.graph().mutable_initializer(0)->clear_dims();
  rank3.graph().mutable_initializer(0)->add_dims(2);
  rank3.graph().mutable_initializer(0)->add_dims(9);
  EXPECT_THAT(ErrorOf(rank3), HasSubstr("weight w of dims [2, 9]"));
  GraphBuilder bias = ConvNet({1, 1, 1, 1}, 1);
  bias.Init("b", {3}, {1, 2, 3});
  bias.graph().mutable_node(0)->add_input("b");
  EXPECT_THAT(ErrorOf(bias), HasSubstr("bias b of dims [3]"));
  GraphBuilder ints = ConvNet({1, 1, 1, 1}, 1);
  ints.graph().mutable_initializer(0)->set_data_type(onnx::TensorProto_DataType_INT64);
  EXPECT_THAT(ErrorOf(ints), HasSubstr("INT64"));
  GraphBuilder half = ConvNet({1, 1, 1, 1}, 1);
  half.graph().mutable_initializer(0)->set_data_type(onnx::TensorProto_DataType_FLOAT16);
  EXPECT_THAT(ErrorOf(half), HasSubstr("FLOAT16"));
}

// x [N, 4] -> MatMul -> (Add bias) -> `activation` -> y [N, 3].
GraphBuilder DenseNet(bool bias, const std::string& activation = "") {
  GraphBuilder b;
  b.Input("x", {-1, 4, 1, 1});
  b.Node("Flatten", {"x"}, {"f"});
  b.Init("W", {4, 3}, TestValues(12, 1));
  b.Node("MatMul", {"f", "W"}, {"m"}, "fc/MatMul");
  std::string last = "m";
  if (bias) {
    b.Init("B", {3}, TestValues(3, 2));
    b.Node("Add", {"m", "B"}, {"a"}, "fc/Add");
    last = "a";
  }
  if (!activation.empty()) {
    onnx::NodeProto* n = b.Node(activation, {last}, {"act"});
    if (activation == "LeakyRelu") GraphBuilder::Float(n, "alpha", 0.2f);
    last = "act";
  }
  b.Node("Identity", {last}, {"y"});
  b.Output("y", {-1, 3});
  return b;
}

TEST(OnnxImportTest, MatMulAddIsDense) {
  absl::StatusOr<ImportedOnnx> r = Import(DenseNet(true, "Sigmoid"));
  ASSERT_TRUE(r.ok()) << r.status();
  const LayerSpec* dense = FindLayer(r->spec, "dense");
  ASSERT_NE(dense, nullptr);
  EXPECT_EQ(dense->name, "fc");
  EXPECT_TRUE(dense->use_bias);
  EXPECT_EQ(dense->activation, "sigmoid");
  EXPECT_NE(FindWeight(*r, "fc/bias"), nullptr);
  EXPECT_TRUE(BuildModelFromSpec(r->spec, "net.onnx").ok());

  r = Import(DenseNet(false, "LeakyRelu"));
  ASSERT_TRUE(r.ok()) << r.status();
  dense = FindLayer(r->spec, "dense");
  EXPECT_FALSE(dense->use_bias);
  EXPECT_EQ(dense->activation, "leaky_relu");
  EXPECT_FLOAT_EQ(dense->alpha, 0.2f);

  r = Import(DenseNet(true, "Tanh"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(FindLayer(r->spec, "dense")->activation, "tanh");
}

TEST(OnnxImportTest, GemmRefusals) {
  auto gemm = [](const std::string& attr, float value, std::vector<int64_t> dims) {
    GraphBuilder b;
    b.Input("x", {-1, 4, 1, 1});
    b.Node("Flatten", {"x"}, {"f"});
    b.Init("W", dims, TestValues(dims[0] * dims[1], 1));
    onnx::NodeProto* n = b.Node("Gemm", {"f", "W"}, {"y"}, "fc");
    if (attr == "alpha") GraphBuilder::Float(n, attr, value);
    if (attr == "transA") GraphBuilder::Int(n, attr, static_cast<int64_t>(value));
    b.Output("y", {-1, 3});
    return b;
  };
  EXPECT_TRUE(Import(gemm("", 0, {4, 3})).ok());
  EXPECT_THAT(ErrorOf(gemm("alpha", 2, {4, 3})), HasSubstr("alpha 2"));
  EXPECT_THAT(ErrorOf(gemm("transA", 1, {4, 3})), HasSubstr("transA 1"));
  EXPECT_THAT(ErrorOf(gemm("", 0, {5, 3})), HasSubstr("weight W of dims [5, 3]"));
  // Images must be [N, C, H, W].
  GraphBuilder flat;
  flat.Input("x", {-1, 4});
  flat.Init("W", {4, 3}, TestValues(12, 1));
  flat.Node("Gemm", {"x", "W"}, {"y"}, "fc");
  flat.Output("y", {-1, 3});
  EXPECT_THAT(ErrorOf(flat), HasSubstr("the input x has shape [N, 4]"));
}

// x [N, 4, 4, 4] through `body` (nodes from "x" to "z"), GlobalAveragePool,
// Flatten, Gemm -> y [N, 2].
GraphBuilder Head(const std::function<void(GraphBuilder&)>& body, int64_t channels = 4) {
  GraphBuilder b;
  b.Input("x", {-1, 4, 4, 4});
  body(b);
  b.Node("GlobalAveragePool", {"z"}, {"g"}, "/gap/GlobalAveragePool");
  b.Node("Flatten", {"g"}, {"f"});
  b.Init("head.weight", {2, channels}, TestValues(2 * channels, 9));
  onnx::NodeProto* n = b.Node("Gemm", {"f", "head.weight"}, {"y"});
  GraphBuilder::Int(n, "transB", 1);
  b.Output("y", {-1, 2});
  return b;
}

TEST(OnnxImportTest, GlobalPoolAddConcatBatchNorm) {
  // A residual: conv -> tanh, added to the input; a concat; batch norm.
  GraphBuilder b = Head(
      [](GraphBuilder& g) {
        g.Init("c.weight", {4, 4, 1, 1}, TestValues(16, 1));
        g.Node("Conv", {"x", "c.weight"}, {"c"}, "/c/Conv");
        g.Node("Tanh", {"c"}, {"t"});
        g.Node("Add", {"t", "x"}, {"s"}, "/add/Add");
        onnx::NodeProto* n = g.Node("Concat", {"s", "x"}, {"cat"}, "/cat/Concat");
        GraphBuilder::Int(n, "axis", 1);
        for (const char* p : {"bn.weight", "bn.bias", "bn.running_mean"}) {
          g.Init(p, {8}, TestValues(8, 3));
        }
        g.Init("bn.running_var", {8}, std::vector<float>(8, 1.0f));
        n = g.Node("BatchNormalization",
                   {"cat", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}, {"z"});
        GraphBuilder::Float(n, "epsilon", 0.01f);
      },
      8);
  absl::StatusOr<ImportedOnnx> r = Import(b);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<std::string> types;
  for (const LayerSpec& l : r->spec.layers) types.push_back(l.type);
  EXPECT_EQ(types, (std::vector<std::string>{"conv2d", "add", "concat", "batch_norm",
                                             "global_average_pool", "dense"}));
  EXPECT_EQ(r->spec.layers[0].activation, "tanh");
  EXPECT_EQ(r->spec.layers[1].input, "");
  EXPECT_EQ(r->spec.layers[1].inputs, std::vector<std::string>{"input"});
  EXPECT_EQ(r->spec.layers[2].inputs, std::vector<std::string>{"input"});
  EXPECT_FLOAT_EQ(r->spec.layers[3].epsilon, 0.01f);
  EXPECT_FLOAT_EQ(r->spec.layers[3].momentum, -1.0f);  // no momentum: the job's
  EXPECT_TRUE(BuildModelFromSpec(r->spec, "net.onnx").ok());

  // Batch norm parameters for the wrong number of channels.
  GraphBuilder bad = Head([](GraphBuilder& g) {
    for (const char* p : {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}) {
      g.Init(p, {3}, TestValues(3, 3));
    }
    g.Node("BatchNormalization", {"x", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"},
           {"z"}, "bn");
  });
  EXPECT_THAT(ErrorOf(bad), HasSubstr("scale bn.weight of dims [3] for 4 channels"));
}

TEST(OnnxImportTest, PoolsAndDropout) {
  GraphBuilder b = Head([](GraphBuilder& g) {
    onnx::NodeProto* n = g.Node("AveragePool", {"x"}, {"a"}, "/avg/AveragePool");
    GraphBuilder::Ints(n, "kernel_shape", {3, 3});
    GraphBuilder::Ints(n, "pads", {1, 1, 1, 1});
    GraphBuilder::Int(n, "count_include_pad", 0);
    n = g.Node("MaxPool", {"a"}, {"m"}, "/max/MaxPool");
    GraphBuilder::Ints(n, "kernel_shape", {2, 2});
    GraphBuilder::Ints(n, "strides", {2, 2});
    g.Node("LeakyRelu", {"m"}, {"l"});
    n = g.Node("Dropout", {"l"}, {"z"}, "/drop/Dropout");
    GraphBuilder::Float(n, "ratio", 0.3f);
  });
  b.model().mutable_opset_import(0)->set_version(11);
  absl::StatusOr<ImportedOnnx> r = Import(b);
  ASSERT_TRUE(r.ok()) << r.status();
  const LayerSpec* avg = FindLayer(r->spec, "average_pool");
  ASSERT_NE(avg, nullptr);
  EXPECT_EQ(avg->padding, "same");
  EXPECT_EQ(avg->strides, 1);
  EXPECT_EQ(avg->name, "avg");
  EXPECT_EQ(FindLayer(r->spec, "max_pool")->strides, 2);
  EXPECT_FLOAT_EQ(FindLayer(r->spec, "leaky_relu")->alpha, 0.01f);
  EXPECT_FLOAT_EQ(FindLayer(r->spec, "dropout")->rate, 0.3f);
  EXPECT_TRUE(BuildModelFromSpec(r->spec, "net.onnx").ok());

  GraphBuilder counted = Head([](GraphBuilder& g) {
    onnx::NodeProto* n = g.Node("AveragePool", {"x"}, {"z"}, "avg");
    GraphBuilder::Ints(n, "kernel_shape", {3, 3});
    GraphBuilder::Ints(n, "pads", {1, 1, 1, 1});
    GraphBuilder::Int(n, "count_include_pad", 1);
  });
  EXPECT_THAT(ErrorOf(counted), HasSubstr("count_include_pad"));
  GraphBuilder padded = Head([](GraphBuilder& g) {
    g.InitInt64("pads", {8}, {0, 0, 1, 1, 0, 0, 1, 1});
    g.Node("Pad", {"x", "pads"}, {"p"}, "pad");
    onnx::NodeProto* n = g.Node("AveragePool", {"p"}, {"z"}, "avg");
    GraphBuilder::Ints(n, "kernel_shape", {3, 3});
  });
  EXPECT_THAT(ErrorOf(padded), HasSubstr("AvgPool2d"));
  GraphBuilder channels = Head(
      [](GraphBuilder& g) {
        g.InitInt64("pads", {8}, {0, 2, 0, 0, 0, 2, 0, 0});
        g.Node("Pad", {"x", "pads"}, {"z"}, "pad");
      },
      8);
  r = Import(channels);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(FindLayer(r->spec, "pad_channels")->filters, 8);
}

TEST(OnnxImportTest, UnsupportedOpsAndTrailingSoftmax) {
  GraphBuilder erf = Head([](GraphBuilder& g) { g.Node("Erf", {"x"}, {"z"}, "gelu/erf"); });
  const std::string message = ErrorOf(erf);
  EXPECT_THAT(message, HasSubstr("node gelu/erf (Erf)"));
  EXPECT_THAT(message, HasSubstr("Conv, Gemm, MatMul"));

  GraphBuilder log_softmax = DenseNet(true);
  log_softmax.graph().mutable_node(3)->set_op_type("LogSoftmax");  // the Identity
  absl::StatusOr<ImportedOnnx> r = Import(log_softmax);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.layers.size(), 2u);  // flatten, dense

  // A Softmax in the middle is refused.
  GraphBuilder middle = DenseNet(true, "Softmax");
  middle.graph().mutable_node(4)->set_op_type("Relu");
  EXPECT_THAT(ErrorOf(middle), HasSubstr("after Softmax"));
}

TEST(OnnxImportTest, Versions) {
  GraphBuilder ir = DenseNet(true);
  ir.model().set_ir_version(9);
  EXPECT_THAT(ErrorOf(ir), HasSubstr("IR version 9 is newer"));
  GraphBuilder new_opset = DenseNet(true);
  new_opset.model().mutable_opset_import(0)->set_version(18);
  EXPECT_THAT(ErrorOf(new_opset), HasSubstr("opset 18 is newer"));
  GraphBuilder old_opset = DenseNet(true);
  old_opset.model().mutable_opset_import(0)->set_version(6);
  EXPECT_THAT(ErrorOf(old_opset), HasSubstr("opset 6 is too old"));
}

TEST(OnnxImportTest, BadGraphs) {
  GraphBuilder cycle = DenseNet(true);
  cycle.graph().mutable_node(0)->set_input(0, "a");  // Flatten takes the Add's output
  EXPECT_THAT(ErrorOf(cycle), HasSubstr("cycle"));
  GraphBuilder self = DenseNet(true);
  self.graph().mutable_node(0)->set_input(0, "f");
  EXPECT_THAT(ErrorOf(self), HasSubstr("cycle"));
  GraphBuilder unknown = DenseNet(true);
  unknown.graph().mutable_node(1)->set_input(1, "nowhere");
  EXPECT_THAT(ErrorOf(unknown), HasSubstr("takes nowhere, which no node"));
  GraphBuilder no_input = DenseNet(true);
  no_input.graph().clear_input();
  EXPECT_THAT(ErrorOf(no_input), HasSubstr("takes x"));
  GraphBuilder two_inputs = DenseNet(true);
  two_inputs.Input("y2", {-1, 4, 1, 1});
  EXPECT_THAT(ErrorOf(two_inputs), HasSubstr("2 inputs"));
  GraphBuilder dynamic = DenseNet(true);
  dynamic.graph()
      .mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(1)
      ->set_dim_param("C");
  EXPECT_THAT(ErrorOf(dynamic), HasSubstr("[N, C, 1, 1]"));
  GraphBuilder zero = DenseNet(true);
  zero.graph().mutable_initializer(0)->set_dims(0, 0);
  EXPECT_THAT(ErrorOf(zero), HasSubstr("positive"));
}

TEST(OnnxImportTest, BadTensors) {
  GraphBuilder huge = DenseNet(true);
  onnx::TensorProto* w = huge.graph().mutable_initializer(0);
  w->set_dims(0, int64_t{1} << 20);
  w->set_dims(1, int64_t{1} << 20);
  EXPECT_THAT(ErrorOf(huge), HasSubstr("tensor W"));  // 2^40 elements declared
  EXPECT_EQ(Import(huge).status().code(), absl::StatusCode::kDataLoss);
  GraphBuilder declared = DenseNet(true);
  w = declared.graph().mutable_initializer(0);
  w->set_dims(1, int64_t{1} << 40);
  EXPECT_EQ(Import(declared).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ErrorOf(declared), HasSubstr("tensor W"));
  GraphBuilder short_data = DenseNet(true);
  short_data.graph().mutable_initializer(0)->mutable_raw_data()->resize(20);
  EXPECT_EQ(Import(short_data).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ErrorOf(short_data), HasSubstr("holds 20 bytes"));
  GraphBuilder external = DenseNet(true);
  external.graph().mutable_initializer(0)->set_data_location(
      onnx::TensorProto_DataLocation_EXTERNAL);
  EXPECT_THAT(ErrorOf(external), HasSubstr("external"));
}

TEST(OnnxImportTest, BadBytes) {
  EXPECT_EQ(ImportOnnx("", "net.onnx").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ImportOnnx("\xff\xff\xff\xff garbage", "net.onnx").status().code(),
            absl::StatusCode::kDataLoss);
  const std::string bytes = SmallCnn().Build().Bytes();
  for (size_t cut : {bytes.size() / 3, bytes.size() / 2, bytes.size() - 1}) {
    absl::StatusOr<ImportedOnnx> r = ImportOnnx(bytes.substr(0, cut), "net.onnx");
    EXPECT_FALSE(r.ok()) << cut;
    EXPECT_THAT(std::string(r.status().message()), ::testing::StartsWith("net.onnx: "));
  }
  // Every single-bit flip in the first 2 KB: an import or a clean error.
  int errors = 0;
  for (size_t i = 0; i < std::min<size_t>(bytes.size(), 2048); ++i) {
    std::string flipped = bytes;
    flipped[i] ^= static_cast<char>(1 << (i % 8));
    absl::StatusOr<ImportedOnnx> r = ImportOnnx(flipped, "net.onnx");
    if (!r.ok()) {
      ++errors;
      EXPECT_THAT(std::string(r.status().message()), ::testing::StartsWith("net.onnx: "));
    }
  }
  EXPECT_GT(errors, 0);
  // Random bytes overwritten anywhere: what imports writes out and reads back.
  uint32_t seed = 7;
  for (int round = 0; round < 500; ++round) {
    std::string mutated = bytes;
    for (int k = 0; k < 4; ++k) {
      seed = seed * 1664525u + 1013904223u;
      mutated[(seed >> 8) % mutated.size()] = static_cast<char>(seed >> 24);
    }
    absl::StatusOr<ImportedOnnx> r = ImportOnnx(mutated, "net.onnx");
    if (!r.ok()) {
      EXPECT_THAT(std::string(r.status().message()), ::testing::StartsWith("net.onnx: "));
      continue;
    }
    EXPECT_TRUE(ParseModelSpec(ModelSpecToYaml(r->spec), "again.yaml").ok()) << round;
  }
}

TEST(OnnxImportTest, TorchExport) {
  // tests/onnx/torch_cnn.py --export fuzz/seeds/onnx/torch_cnn.onnx --channels 4,8 --hidden 16
  std::ifstream in(std::string(PSTRAIN_SOURCE_DIR) + "/fuzz/seeds/onnx/torch_cnn.onnx",
                   std::ios::binary);
  ASSERT_TRUE(in.good()) << "fuzz/seeds/onnx/torch_cnn.onnx is missing";
  std::stringstream bytes;
  bytes << in.rdbuf();
  absl::StatusOr<ImportedOnnx> r = ImportOnnx(bytes.str(), "torch_cnn.onnx");
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<std::string> layers;
  for (const LayerSpec& l : r->spec.layers) {
    layers.push_back(l.type + (l.relu || l.activation == "relu" ? "+relu" : ""));
  }
  EXPECT_EQ(layers, (std::vector<std::string>{"conv2d", "batch_norm+relu", "max_pool", "conv2d",
                                              "batch_norm+relu", "max_pool", "flatten", "dropout",
                                              "dense+relu", "dense"}));
  EXPECT_EQ(r->spec.input, (std::vector<int64_t>{28, 28, 1}));
  EXPECT_EQ(r->spec.classes, 10);
  // PyTorch's logits for these images, from the model as exported (the
  // export's training-mode trace moves BatchNorm's running statistics):
  //   m = torch_cnn.make_model(1, (4, 8), 16); torch_cnn.export(m, path); m.eval()
  //   m(torch.tensor([[((i * 7 + n * 3) % 11) / 10 for i in range(784)] for n in range(2)])
  //     .reshape(2, 1, 28, 28))
  const std::vector<float> torch_logits = {
      -0.197371f, 0.072994f,  -0.199113f, 0.050399f,  -0.038772f, -0.117014f, -0.116801f,
      -0.044825f, -0.028916f, -0.125944f, -0.185276f, 0.069850f,  -0.193989f, 0.041812f,
      -0.027950f, -0.128628f, -0.114321f, -0.051597f, -0.036137f, -0.131997f};
  std::vector<float> images(2 * 28 * 28);  // one channel: NCHW and NHWC agree
  for (int n = 0; n < 2; ++n) {
    for (int i = 0; i < 784; ++i) images[n * 784 + i] = ((i * 7 + n * 3) % 11) / 10.0f;
  }
  const std::vector<float> logits = Logits(*r, images, 2);
  ASSERT_EQ(logits.size(), torch_logits.size());
  for (size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(logits[i], torch_logits[i], 1e-5) << i;
}

// Sizes from the file are bounded before any arithmetic on them (UBSan's
// signed overflow otherwise): pads of 2^62, a chain of Concat(x, x).
TEST(OnnxImportTest, HugeSizesAreRefusedBeforeOverflowing) {
  GraphBuilder pad = Head([](GraphBuilder& g) {
    const int64_t huge = int64_t{1} << 62;
    g.InitInt64("pads", {8}, {0, huge, 0, 0, 0, huge, 0, 0});
    g.Node("Pad", {"x", "pads"}, {"z"}, "pad");
  });
  std::string message = ErrorOf(pad);
  EXPECT_THAT(message, HasSubstr("node pad (Pad) pads channels by 4611686018427387904"));
  EXPECT_THAT(message, HasSubstr("at most 1048576 channels"));

  GraphBuilder chain = Head([](GraphBuilder& g) {
    std::string last = "x";
    for (int i = 0; i < 44; ++i) {
      const std::string out = i == 43 ? "z" : "cat" + std::to_string(i);
      onnx::NodeProto* n = g.Node("Concat", {last, last}, {out}, "cat" + std::to_string(i));
      GraphBuilder::Int(n, "axis", 1);
      last = out;
    }
  });
  // x has 4 channels: the 19th doubling would give 2^21.
  EXPECT_THAT(ErrorOf(chain), HasSubstr("node cat18 (Concat) joins over 1048576 channels"));
}

// An activation fuses into the layer before it only when nothing else takes
// that layer's output, through Identity, a flat Flatten or a one-input
// Concat: else the other consumer would get the activated output.
TEST(OnnxImportTest, ActivationFusesOnlyIntoASoleConsumer) {
  for (const std::string pass : {"Identity", "Concat"}) {
    GraphBuilder b = Head([&](GraphBuilder& g) {
      g.Init("c.weight", {4, 4, 1, 1}, TestValues(16, 1));
      g.Node("Conv", {"x", "c.weight"}, {"c"}, "/c/Conv");
      onnx::NodeProto* n = g.Node(pass, {"c"}, {"i"}, "pass");
      if (pass == "Concat") GraphBuilder::Int(n, "axis", 1);
      g.Node("Relu", {"i"}, {"r"}, "relu");
      g.Node("Add", {"r", "c"}, {"z"}, "add");
    });
    absl::StatusOr<ImportedOnnx> r = Import(b);
    ASSERT_TRUE(r.ok()) << r.status();
    std::vector<std::string> types;
    for (const LayerSpec& l : r->spec.layers) types.push_back(l.type);
    EXPECT_EQ(types,
              (std::vector<std::string>{"conv2d", "relu", "add", "global_average_pool", "dense"}))
        << pass;
    EXPECT_EQ(r->spec.layers[0].activation, "none") << pass;
    EXPECT_EQ(r->spec.layers[2].inputs, std::vector<std::string>{"c"}) << pass;
    EXPECT_TRUE(BuildModelFromSpec(r->spec, "net.onnx").ok());
  }
  // dense -> Flatten (already flat) -> Relu, and the dense's output to an Add.
  GraphBuilder flat;
  flat.Input("x", {-1, 4, 1, 1});
  flat.Node("Flatten", {"x"}, {"f"});
  flat.Init("W", {4, 4}, TestValues(16, 1));
  flat.Node("MatMul", {"f", "W"}, {"m"}, "fc/MatMul");
  flat.Node("Flatten", {"m"}, {"mf"}, "again");
  flat.Node("Relu", {"mf"}, {"r"}, "relu");
  flat.Node("Add", {"r", "m"}, {"s"}, "add");
  flat.Init("W2", {4, 2}, TestValues(8, 2));
  flat.Node("MatMul", {"s", "W2"}, {"y"}, "out/MatMul");
  flat.Output("y", {-1, 2});
  absl::StatusOr<ImportedOnnx> r = Import(flat);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(FindLayer(r->spec, "dense")->activation, "none");
  EXPECT_NE(FindLayer(r->spec, "relu"), nullptr);
  // With one consumer all along the chain it still fuses.
  GraphBuilder sole = Head([](GraphBuilder& g) {
    g.Init("c.weight", {4, 4, 1, 1}, TestValues(16, 1));
    g.Node("Conv", {"x", "c.weight"}, {"c"}, "/c/Conv");
    g.Node("Identity", {"c"}, {"i"}, "pass");
    g.Node("Relu", {"i"}, {"z"}, "relu");
  });
  r = Import(sole);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.layers[0].activation, "relu");
  EXPECT_EQ(FindLayer(r->spec, "relu"), nullptr);
}

TEST(OnnxImportTest, LayerNamesAreUnique) {
  // Many nodes of one name: name, name_1, name_2, ... (skipping names taken).
  GraphBuilder b = Head([](GraphBuilder& g) {
    g.Node("Dropout", {"x"}, {"d_a"}, "d/Dropout");
    g.Node("Dropout", {"d_a"}, {"d_b"}, "d_1");
    std::string last = "d_b";
    for (int i = 0; i < 3000; ++i) {
      const std::string out = i == 2999 ? "z" : "t" + std::to_string(i);
      g.Node("Dropout", {last}, {out}, "d/Dropout");
      last = out;
    }
  });
  absl::StatusOr<ImportedOnnx> r = Import(b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.layers[0].name, "d");
  EXPECT_EQ(r->spec.layers[1].name, "d_1");
  EXPECT_EQ(r->spec.layers[2].name, "d_2");
  EXPECT_EQ(r->spec.layers[3001].name, "d_3001");
  EXPECT_EQ(r->origins.at("d_3001"), "node d/Dropout (Dropout)");
}

// The batch dimension of shape arithmetic comes only from Shape of an
// activation: a -2 (or any value under -1) in a constant is refused.
TEST(OnnxImportTest, ShapeConstantsCannotBeTheBatch) {
  auto reshape = [](const std::function<void(GraphBuilder&)>& shape) {
    GraphBuilder b;
    b.Input("x", {-1, 4, 1, 1});
    shape(b);
    b.Node("Reshape", {"x", "shape"}, {"f"}, "reshape");
    b.Init("W", {4, 3}, TestValues(12, 1));
    b.Node("MatMul", {"f", "W"}, {"y"}, "fc/MatMul");
    b.Output("y", {-1, 3});
    return b;
  };
  EXPECT_TRUE(Import(reshape([](GraphBuilder& g) { g.InitInt64("shape", {2}, {-1, 4}); })).ok());
  EXPECT_THAT(ErrorOf(reshape([](GraphBuilder& g) {
                g.InitInt64("shape", {2}, {-2, 4});
              })),
              HasSubstr("node reshape (Reshape) takes tensor shape holding -2"));
  EXPECT_THAT(ErrorOf(reshape([](GraphBuilder& g) {
                g.ConstantInt64("shape", {2}, {-2, -1});
              })),
              HasSubstr("holding -2"));
  EXPECT_THAT(ErrorOf(reshape([](GraphBuilder& g) {
                onnx::NodeProto* n = g.Node("Constant", {}, {"shape"}, "ints");
                GraphBuilder::Ints(n, "value_ints", {-2, 4});
              })),
              HasSubstr("holding -2"));
  // Through Gather and Concat too.
  EXPECT_THAT(ErrorOf(reshape([](GraphBuilder& g) {
                g.InitInt64("data", {2}, {-7, 4});
                g.InitInt64("index", {1}, {0});
                g.Node("Gather", {"data", "index"}, {"batch"}, "gather");
                g.InitInt64("rest", {1}, {-1});
                onnx::NodeProto* n = g.Node("Concat", {"batch", "rest"}, {"shape"}, "cat");
                GraphBuilder::Int(n, "axis", 0);
              })),
              HasSubstr("node gather (Gather) takes tensor data holding -7"));
  // Shape of an initializer: its dims as they are, checked.
  EXPECT_THAT(ErrorOf(reshape([](GraphBuilder& g) {
                onnx::TensorProto* t = g.Init("dims", {1, 4}, {1, 2, 3, 4});
                t->set_dims(0, -2);
                g.Node("Shape", {"dims"}, {"shape"}, "shape_of");
              })),
              HasSubstr("node shape_of (Shape): tensor dims has dims [-2, 4]"));
  EXPECT_THAT(ErrorOf(reshape([](GraphBuilder& g) {
                g.Init("dims", std::vector<int64_t>(65, 1), {1});
                g.Node("Shape", {"dims"}, {"shape"}, "shape_of");
              })),
              HasSubstr("node shape_of (Shape) takes the shape of dims, of 65 dimensions"));
  // A negative Gather index is an index, not a size.
  EXPECT_TRUE(Import(reshape([](GraphBuilder& g) {
                g.InitInt64("data", {2}, {-1, 4});
                g.InitInt64("index", {1}, {-2});
                g.Node("Gather", {"data", "index"}, {"batch"}, "gather");
                g.InitInt64("rest", {1}, {4});
                onnx::NodeProto* n = g.Node("Concat", {"batch", "rest"}, {"shape"}, "cat");
                GraphBuilder::Int(n, "axis", 0);
              })).ok());
}

TEST(OnnxImportTest, MessagesNameTheNodeAndTensor) {
  // A Constant node's tensor has no name of its own: the message names the
  // node and the value it takes.
  GraphBuilder b = ConvNet({1, 1, 1, 1}, 1);
  b.graph().mutable_node(0)->set_input(1, "wc");
  onnx::TensorProto* t = b.Constant("wc", onnx::TensorProto_DataType_INT64);
  for (int64_t d : {2, 1, 3, 3}) t->add_dims(d);
  for (int i = 0; i < 18; ++i) t->add_int64_data(i);
  EXPECT_THAT(ErrorOf(b), HasSubstr("node conv (Conv): tensor wc (its weight) is INT64"));
  GraphBuilder bad_bias = ConvNet({1, 1, 1, 1}, 1);
  bad_bias.graph().mutable_node(0)->add_input("bc");
  bad_bias.graph().mutable_node(0)->set_name("");
  onnx::TensorProto* bias = bad_bias.Constant("bc", onnx::TensorProto_DataType_FLOAT);
  bias->add_dims(2);
  bias->set_raw_data(std::string(4, '\0'));  // one float of two
  absl::StatusOr<ImportedOnnx> r = Import(bad_bias);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ErrorOf(bad_bias),
              HasSubstr("the Conv node giving c: tensor bc (its bias) declares dims [2]"));

  // A spec that does not read back: the layers named, not the generated
  // YAML's lines. A conv whose output only feeds a Shape is a layer no later
  // layer takes.
  GraphBuilder dead;
  dead.Input("x", {-1, 1, 2, 2});
  dead.Init("w", {2, 1, 1, 1}, TestValues(2, 1));
  dead.Node("Conv", {"x", "w"}, {"c"}, "/side/Conv");
  dead.Node("Shape", {"c"}, {"s"}, "shape");
  dead.ConstantInt64("zero", {1}, {0});
  dead.Node("Gather", {"s", "zero"}, {"n"}, "gather");
  dead.ConstantInt64("rest", {1}, {-1});
  onnx::NodeProto* n = dead.Node("Concat", {"n", "rest"}, {"shape2"}, "cat");
  GraphBuilder::Int(n, "axis", 0);
  dead.Node("Reshape", {"x", "shape2"}, {"f"}, "reshape");
  dead.Init("W", {4, 3}, TestValues(12, 1));
  dead.Node("MatMul", {"f", "W"}, {"y"}, "fc/MatMul");
  dead.Output("y", {-1, 3});
  const std::string message = ErrorOf(dead);
  EXPECT_THAT(message, HasSubstr("the output of layer side is not taken by any later layer"));
  EXPECT_THAT(message, HasSubstr("layer side comes from node /side/Conv (Conv)"));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("line")));
}

// What pstrain's exporter writes for pad_channels (onnx/onnx_export.cc): Pad
// on axis 1 of [N, C, H, W] or [N, F], half before and half after.
TEST(OnnxImportTest, PadChannelsAsExported) {
  GraphBuilder flat;
  flat.Input("x", {-1, 4, 1, 1});
  flat.Node("Flatten", {"x"}, {"f"});
  flat.InitInt64("pad/pads", {4}, {0, 1, 0, 1});
  onnx::NodeProto* n = flat.Node("Pad", {"f", "pad/pads"}, {"p"}, "pad");
  GraphBuilder::String(n, "mode", "constant");
  flat.Init("W", {6, 3}, TestValues(18, 1));
  flat.Node("MatMul", {"p", "W"}, {"y"}, "fc/MatMul");
  flat.Output("y", {-1, 3});
  absl::StatusOr<ImportedOnnx> r = Import(flat);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_NE(FindLayer(r->spec, "pad_channels"), nullptr);
  EXPECT_EQ(FindLayer(r->spec, "pad_channels")->filters, 6);
  // The padding is zeros around the features: the logits are the dense's
  // on the middle rows.
  const std::vector<float> x = {1, 2, 3, 4};
  const std::vector<float> got = Logits(*r, x, 1);
  const std::vector<float> w = TestValues(18, 1);
  ASSERT_EQ(got.size(), 3u);
  for (int o = 0; o < 3; ++o) {
    float want = 0;
    for (int i = 0; i < 4; ++i) want += x[i] * w[(i + 1) * 3 + o];
    EXPECT_NEAR(got[o], want, 1e-5) << o;
  }
  GraphBuilder uneven = flat;
  uneven.graph().mutable_initializer(0)->set_raw_data(
      std::string(reinterpret_cast<const char*>(std::vector<int64_t>{0, 1, 0, 3}.data()), 32));
  EXPECT_THAT(ErrorOf(uneven), HasSubstr("node pad (Pad) pads channels by 1 before and 3 after"));
  GraphBuilder rank = flat;
  rank.graph().mutable_initializer(0)->add_dims(1);
  rank.graph().mutable_initializer(0)->set_dims(0, 8);
  rank.graph().mutable_initializer(0)->set_raw_data(std::string(64, '\0'));
  EXPECT_THAT(ErrorOf(rank), HasSubstr("node pad (Pad) pads [0, 0, 0, 0, 0, 0, 0, 0]"));
}

// Every op the list names is one the importer takes (no "is an op pstrain
// does not import" for it), and the list is what that refusal shows.
TEST(OnnxImportTest, SupportedOpsAreImported) {
  for (const std::string& op : SupportedOnnxOps()) {
    GraphBuilder b = Head([&](GraphBuilder& g) { g.Node(op, {"x"}, {"z"}, "probe"); });
    absl::StatusOr<ImportedOnnx> r = Import(b);
    if (!r.ok()) {
      EXPECT_THAT(std::string(r.status().message()),
                  ::testing::Not(HasSubstr("is an op pstrain does not import")))
          << op;
    }
  }
  GraphBuilder erf = Head([](GraphBuilder& g) { g.Node("Erf", {"x"}, {"z"}, "erf"); });
  EXPECT_THAT(ErrorOf(erf), HasSubstr(absl::StrJoin(SupportedOnnxOps(), ", ")));
}

}  // namespace
}  // namespace pstrain
