// The spec's image and dense layers in the ONNX export
// (onnx_export_internal.h): conv2d, dense, the pools, flatten, batch_norm,
// add, concat, pad_channels and the activations, and the images'
// standardization.
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "models/conv2d.h"
#include "models/spec_builder.h"
#include "onnx/onnx_export_internal.h"

namespace pstrain {
namespace onnx_export_internal {
namespace {

// GELU of `x` as opset 13's ops: x * (erf(x / sqrt(2)) + 1) / 2; the
// nodes named `name` (the product) and `name`/...
std::string AddGelu(GraphBuilder& b, const std::string& name, const std::string& x) {
  onnx::NodeProto* scaled =
      b.Node("Div", name + "/scaled", {x, b.FloatConstant("sqrt2", static_cast<float>(M_SQRT2))});
  onnx::NodeProto* erf = b.Node("Erf", name + "/erf", {scaled->output(0)});
  onnx::NodeProto* plus =
      b.Node("Add", name + "/plus_one", {erf->output(0), b.FloatConstant("one", 1.0f)});
  onnx::NodeProto* half =
      b.Node("Mul", name + "/half", {plus->output(0), b.FloatConstant("half", 0.5f)});
  return b.Node("Mul", name, {x, half->output(0)})->output(0);
}

// ONNX pads [top, left, bottom, right] and the output size of a square
// window over [h, w] as pstrain computes them (models/conv2d.h).
struct Window {
  std::vector<int64_t> pads;
  int64_t out_h = 0, out_w = 0;
};
Window WindowOf(const Shape& in, int64_t kernel, int64_t stride, Padding padding) {
  const PaddedDim h = ComputePadding(in[0], kernel, stride, padding);
  const PaddedDim w = ComputePadding(in[1], kernel, stride, padding);
  // The padding after: fixed's whole kernel - 1 - before (written out, though
  // a strided last window may not reach it, so a reader sees fixed padding),
  // else what the last window needs beyond the input (same), if any.
  const auto after = [&](int64_t size, const PaddedDim& d) {
    if (padding == Padding::kFixed) return kernel - 1 - d.pad_before;
    return std::max<int64_t>((d.out - 1) * stride + kernel - size - d.pad_before, 0);
  };
  return {{h.pad_before, w.pad_before, after(in[0], h), after(in[1], w)}, h.out, w.out};
}

}  // namespace

absl::StatusOr<Activation> AddActivation(GraphBuilder& b, const LayerSpec& l, Activation x) {
  if (l.activation == "none") return x;
  if (l.activation == "gelu") return Activation{AddGelu(b, l.name + "/gelu", x.tensor), x.shape};
  static const std::map<std::string, std::string> kOps = {
      {"relu", "Relu"}, {"sigmoid", "Sigmoid"}, {"tanh", "Tanh"}, {"leaky_relu", "LeakyRelu"}};
  auto op = kOps.find(l.activation);
  if (op == kOps.end()) return LayerError(b, l, "has an activation the export does not know");
  onnx::NodeProto* node = b.Node(op->second, l.name + "/" + l.activation, {x.tensor});
  if (l.activation == "leaky_relu") SetFloat(node, "alpha", l.alpha);
  return Activation{node->output(0), x.shape};
}

absl::StatusOr<Activation> AddLayer(GraphBuilder& b, const LayerSpec& l,
                                    const std::vector<Activation>& in) {
  const Activation& x = in[0];
  const bool spatial = x.shape.size() == 3;
  const std::string& t = l.type;
  if (t == "conv2d") {
    if (!spatial) return LayerError(b, l, "takes a flat input");
    const int64_t k = l.kernel, cin = x.shape[2], f = l.filters;
    // HWIO [k, k, cin, f] -> OIHW [f, cin, k, k].
    std::vector<int64_t> index(k * k * cin * f);
    for (int64_t o = 0; o < f; ++o) {
      for (int64_t i = 0; i < cin; ++i) {
        for (int64_t h = 0; h < k; ++h) {
          for (int64_t w = 0; w < k; ++w) {
            index[((o * cin + i) * k + h) * k + w] = ((h * k + w) * cin + i) * f + o;
          }
        }
      }
    }
    std::vector<std::string> inputs = {x.tensor};
    PSTRAIN_ASSIGN_OR_RETURN(inputs.emplace_back(),
                             b.Variable(l.name + "/kernel", {f, cin, k, k}, &index));
    if (l.use_bias) {
      PSTRAIN_ASSIGN_OR_RETURN(inputs.emplace_back(), b.Variable(l.name + "/bias", {f}));
    }
    const Window window = WindowOf(x.shape, k, l.strides, SpecPadding(l));
    onnx::NodeProto* node = b.Node("Conv", l.name, inputs);
    SetInts(node, "kernel_shape", {k, k});
    SetInts(node, "strides", {l.strides, l.strides});
    SetInts(node, "pads", window.pads);
    SetInts(node, "dilations", {1, 1});
    SetInt(node, "group", 1);
    return AddActivation(b, l, {node->output(0), {window.out_h, window.out_w, f}});
  }
  if (t == "dense") {
    if (spatial) return LayerError(b, l, "takes a [h, w, c] input; a flatten goes before it");
    if (x.shape.size() == 2) {
      // A sequence [N, L, d]: position by position, as MatMul then the bias.
      PSTRAIN_ASSIGN_OR_RETURN(const std::string kernel,
                               b.Variable(l.name + "/kernel", {x.shape[1], l.units}));
      std::string y =
          b.Node("MatMul", l.use_bias ? l.name + "/matmul" : l.name, {x.tensor, kernel})->output(0);
      if (l.use_bias) {
        PSTRAIN_ASSIGN_OR_RETURN(const std::string bias, b.Variable(l.name + "/bias", {l.units}));
        y = b.Node("Add", l.name, {y, bias})->output(0);
      }
      return AddActivation(b, l, {y, {x.shape[0], l.units}});
    }
    std::vector<std::string> inputs = {x.tensor};
    PSTRAIN_ASSIGN_OR_RETURN(inputs.emplace_back(),
                             b.Variable(l.name + "/kernel", {x.shape[0], l.units}));
    if (l.use_bias) {
      PSTRAIN_ASSIGN_OR_RETURN(inputs.emplace_back(), b.Variable(l.name + "/bias", {l.units}));
    }
    onnx::NodeProto* node = b.Node("Gemm", l.name, inputs);
    SetFloat(node, "alpha", 1.0f);
    SetFloat(node, "beta", 1.0f);
    SetInt(node, "transA", 0);
    SetInt(node, "transB", 0);
    return AddActivation(b, l, {node->output(0), {l.units}});
  }
  if (t == "max_pool" || t == "average_pool") {
    if (!spatial) return LayerError(b, l, "takes a flat input");
    const Window window = WindowOf(x.shape, l.pool, l.strides, SpecPadding(l));
    onnx::NodeProto* node = b.Node(t == "max_pool" ? "MaxPool" : "AveragePool", l.name, {x.tensor});
    SetInts(node, "kernel_shape", {l.pool, l.pool});
    SetInts(node, "strides", {l.strides, l.strides});
    SetInts(node, "pads", window.pads);
    SetInt(node, "ceil_mode", 0);
    // pstrain averages the inputs a window covers, not the padding.
    if (t == "average_pool") SetInt(node, "count_include_pad", 0);
    return Activation{node->output(0), {window.out_h, window.out_w, x.shape[2]}};
  }
  if (t == "global_average_pool") {
    if (!spatial) return LayerError(b, l, "takes a flat input");
    onnx::NodeProto* pool = b.Node("GlobalAveragePool", l.name, {x.tensor});
    onnx::NodeProto* flat = b.Node("Flatten", l.name + "/flatten", {pool->output(0)});
    SetInt(flat, "axis", 1);
    return Activation{flat->output(0), {x.shape[2]}};
  }
  if (t == "flatten") {
    std::string from = x.tensor;
    if (spatial) {
      // pstrain flattens NHWC: back to that order first.
      onnx::NodeProto* nhwc = b.Node("Transpose", l.name + "/nhwc", {x.tensor});
      SetInts(nhwc, "perm", {0, 2, 3, 1});
      from = nhwc->output(0);
    }
    onnx::NodeProto* flat = b.Node("Flatten", l.name, {from});
    SetInt(flat, "axis", 1);
    return Activation{flat->output(0), {NumElements(x.shape)}};
  }
  if (t == "dropout") return x;  // the identity at inference
  if (t == "batch_norm") {
    const int64_t c = x.shape.back();
    std::vector<std::string> inputs = {x.tensor};
    for (const char* v : {"gamma", "beta", "moving_mean", "moving_variance"}) {
      PSTRAIN_ASSIGN_OR_RETURN(inputs.emplace_back(), b.Variable(l.name + "/" + v, {c}));
    }
    onnx::NodeProto* node = b.Node("BatchNormalization", l.name, inputs);
    SetFloat(node, "epsilon", l.epsilon);
    Activation out{node->output(0), x.shape};
    if (!l.relu) return out;
    onnx::NodeProto* relu = b.Node("Relu", l.name + "/relu", {out.tensor});
    return Activation{relu->output(0), x.shape};
  }
  if (t == "layer_norm") {
    // Opset 13 has no LayerNormalization: its ops, over the last axis (of
    // [N, d] or a sequence's [N, L, d]; an image's is not last in NCHW).
    if (spatial) {
      return LayerError(b, l,
                        "normalizes the channels of an image, which the ONNX export does not "
                        "write yet");
    }
    const int64_t d = x.shape.back();
    const auto mean_of = [&](const std::string& name, const std::string& of) {
      onnx::NodeProto* mean = b.Node("ReduceMean", name, {of});
      SetInts(mean, "axes", {-1});
      SetInt(mean, "keepdims", 1);
      return mean->output(0);
    };
    const std::string mean = mean_of(l.name + "/mean", x.tensor);
    const std::string centered = b.Node("Sub", l.name + "/centered", {x.tensor, mean})->output(0);
    const std::string squares = b.Node("Mul", l.name + "/squares", {centered, centered})->output(0);
    const std::string variance = mean_of(l.name + "/variance", squares);
    const std::string shifted = b.Node("Add", l.name + "/variance_epsilon",
                                       {variance, b.FloatScalar(l.name + "/epsilon", l.epsilon)})
                                    ->output(0);
    const std::string stddev = b.Node("Sqrt", l.name + "/stddev", {shifted})->output(0);
    const std::string normalized =
        b.Node("Div", l.name + "/normalized", {centered, stddev})->output(0);
    PSTRAIN_ASSIGN_OR_RETURN(const std::string gamma, b.Variable(l.name + "/gamma", {d}));
    PSTRAIN_ASSIGN_OR_RETURN(const std::string beta, b.Variable(l.name + "/beta", {d}));
    const std::string scaled = b.Node("Mul", l.name + "/scaled", {normalized, gamma})->output(0);
    return Activation{b.Node("Add", l.name, {scaled, beta})->output(0), x.shape};
  }
  if (t == "add") {
    // Summed in pstrain's order: ((in0 + in1) + in2) + ...
    std::string sum = x.tensor;
    for (size_t k = 1; k < in.size(); ++k) {
      const std::string name = k + 1 == in.size() ? l.name : absl::StrCat(l.name, "/sum_", k);
      onnx::NodeProto* node = b.Node("Add", name, {sum, in[k].tensor});
      sum = node->output(0);
    }
    return Activation{sum, x.shape};
  }
  if (t == "concat") {
    std::vector<std::string> inputs;
    Shape shape = x.shape;
    shape.back() = 0;
    for (const Activation& a : in) {
      inputs.push_back(a.tensor);
      shape.back() += a.shape.back();
    }
    onnx::NodeProto* node = b.Node("Concat", l.name, inputs);
    // The channels in NCHW, the features when flat, a sequence's last axis.
    SetInt(node, "axis", x.shape.size() == 2 ? 2 : 1);
    return Activation{node->output(0), shape};
  }
  if (t == "pad_channels") {
    const int64_t before = (l.filters - x.shape.back()) / 2;
    const int64_t after = l.filters - x.shape.back() - before;
    // [N, C] or [N, C, H, W]: pads on axis 1, begins then ends; [N, L, d]
    // on axis 2.
    const size_t rank = x.shape.size() + 1;
    const size_t axis = x.shape.size() == 2 ? 2 : 1;
    std::vector<int64_t> pads(2 * rank, 0);
    pads[axis] = before;
    pads[rank + axis] = after;
    const std::string pads_name = b.Int64s(l.name + "/pads", pads);
    onnx::NodeProto* node = b.Node("Pad", l.name, {x.tensor, pads_name});
    onnx::AttributeProto* mode = node->add_attribute();
    mode->set_name("mode");
    mode->set_type(onnx::AttributeProto::STRING);
    mode->set_s("constant");
    Shape shape = x.shape;
    shape.back() = l.filters;
    return Activation{node->output(0), shape};
  }
  static const std::map<std::string, std::string> kElementwise = {{"identity", "Identity"},
                                                                  {"relu", "Relu"},
                                                                  {"sigmoid", "Sigmoid"},
                                                                  {"tanh", "Tanh"},
                                                                  {"leaky_relu", "LeakyRelu"}};
  if (t == "gelu") return Activation{AddGelu(b, l.name, x.tensor), x.shape};
  auto op = kElementwise.find(t);
  if (op == kElementwise.end()) return LayerError(b, l, "has a type the ONNX export does not know");
  onnx::NodeProto* node = b.Node(op->second, l.name, {x.tensor});
  if (t == "leaky_relu") SetFloat(node, "alpha", l.alpha);
  return Activation{node->output(0), x.shape};
}

std::string AddStandardization(GraphBuilder& b, const std::string& images, int64_t n) {
  const std::string p = kOnnxPreprocessingPrefix;
  const std::vector<int64_t> axes = {1, 2, 3};
  onnx::NodeProto* mean = b.Node("ReduceMean", p + "mean", {images});
  SetInts(mean, "axes", axes);
  SetInt(mean, "keepdims", 1);
  onnx::NodeProto* centered = b.Node("Sub", p + "centered", {images, mean->output(0)});
  onnx::NodeProto* square = b.Node("Mul", p + "square", {centered->output(0), centered->output(0)});
  onnx::NodeProto* variance = b.Node("ReduceMean", p + "variance", {square->output(0)});
  SetInts(variance, "axes", axes);
  SetInt(variance, "keepdims", 1);
  onnx::NodeProto* stddev = b.Node("Sqrt", p + "stddev", {variance->output(0)});
  const float floor = static_cast<float>(1.0 / (255.0 * std::sqrt(static_cast<double>(n))));
  const std::string floor_name = b.FloatScalar(p + "stddev_floor", floor);
  onnx::NodeProto* adjusted = b.Node("Max", p + "adjusted_stddev", {stddev->output(0), floor_name});
  onnx::NodeProto* out =
      b.Node("Div", p + "standardized", {centered->output(0), adjusted->output(0)});
  return out->output(0);
}

}  // namespace onnx_export_internal
}  // namespace pstrain
