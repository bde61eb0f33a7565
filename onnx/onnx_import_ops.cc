// The node-by-node half of the importer (onnx_import_internal.h): each node
// by its op to its Convert*, and the ops that become pstrain's layers with
// weights or windows (Conv, Gemm, MatMul, the activations, the pools,
// BatchNormalization, Dropout). onnx_import_shape_ops.cc has the rest.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "onnx/onnx_import_internal.h"
#include "onnx/onnx_import_tensors.h"

namespace pstrain {
namespace onnx_import_internal {
namespace {

// A dense kernel [in, out] from ONNX's B ([in, out], or [out, in] when
// `transposed`), its rows in pstrain's order.
std::vector<float> DenseKernel(const std::vector<float>& b, int64_t in, int64_t out,
                               bool transposed, const std::vector<int64_t>& chw) {
  std::vector<float> k(b.size());
  for (int64_t r = 0; r < in; ++r) {
    const int64_t src = OnnxRow(r, chw);
    for (int64_t o = 0; o < out; ++o) {
      k[r * out + o] = transposed ? b[o * in + src] : b[src * out + o];
    }
  }
  return k;
}

}  // namespace

absl::Status Importer::Convert(int index) {
  const onnx::NodeProto& n = model_.graph().node(index);
  const std::string& op = n.op_type();
  if (n.output_size() < 1 || n.output(0).empty()) return NodeError(n, "has no output");
  if (op == "Conv") return ConvertConv(n);
  if (op == "Gemm") return ConvertGemm(n);
  if (op == "MatMul") return ConvertMatMul(n);
  if (op == "Relu" || op == "LeakyRelu" || op == "Sigmoid" || op == "Tanh") {
    return ConvertActivation(n);
  }
  if (op == "MaxPool" || op == "AveragePool") return ConvertPool(n);
  if (op == "GlobalAveragePool") return ConvertGlobalPool(n);
  if (op == "BatchNormalization") return ConvertBatchNorm(n);
  if (op == "Dropout") return ConvertDropout(n);
  if (op == "Flatten") {
    PSTRAIN_RETURN_IF_ERROR(CheckAttributes(n, {"axis"}));
    ASSIGN_OR_RETURN_ONNX(Act in, ActInput(n, 0));
    ASSIGN_OR_NODE_ERROR(int64_t axis, IntAttr(n, "axis", 1));
    if (axis < 0) axis += static_cast<int64_t>(in.dims.size()) + 1;
    if (axis != 1) {
      return NodeError(n,
                       "flattens from an axis other than 1; pstrain flattens [N, ...] to "
                       "[N, features]");
    }
    return ConvertFlatten(n, in);
  }
  if (op == "Reshape") return ConvertReshape(n);
  if (op == "Add") return ConvertAdd(n);
  if (op == "Concat") return ConvertConcat(n);
  if (op == "Pad") return ConvertPad(n);
  if (op == "Transpose") return ConvertTranspose(n);
  if (op == "Softmax" || op == "LogSoftmax") return ConvertSoftmax(n);
  if (op == "Identity") {
    PSTRAIN_RETURN_IF_ERROR(CheckAttributes(n, {}));
    auto it = values_.find(n.input_size() > 0 ? n.input(0) : "");
    if (it == values_.end()) return ActInput(n, 0).status();
    if (it->second.kind == Value::kAct) {
      SetAct(n, it->second.act);
    } else {
      values_[n.output(0)] = it->second;
    }
    return absl::OkStatus();
  }
  if (op == "Constant") return ConvertConstant(n);
  if (op == "Shape" || op == "Gather" || op == "Unsqueeze") return ConvertShapeOp(n);
  return NodeError(n, absl::StrCat("is an op pstrain does not import; it imports ",
                                   absl::StrJoin(SupportedOnnxOps(), ", ")));
}

absl::Status Importer::ConvertConv(const onnx::NodeProto& n) {
  PSTRAIN_RETURN_IF_ERROR(
      CheckAttributes(n, {"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"}));
  ASSIGN_OR_RETURN_ONNX(Act in, ActInput(n, 0));
  if (in.flat || in.dims.size() != 3) {
    return NodeError(n, absl::StrCat("takes [N, ", absl::StrJoin(in.dims, ", "),
                                     "]; a 2-D convolution takes [N, C, H, W]"));
  }
  ASSIGN_OR_RETURN_ONNX(const onnx::TensorProto* w, TensorInput(n, 1, "weight"));
  const std::vector<int64_t> wd = DimsOf(*w);
  ASSIGN_OR_NODE_ERROR(int64_t group, IntAttr(n, "group", 1));
  if (group != 1) {
    return NodeError(n, absl::StrCat("has group ", group,
                                     " (a grouped or depthwise convolution); pstrain's conv2d "
                                     "takes group 1"));
  }
  if (wd.size() != 4 || wd[1] != in.dims[0] || wd[2] != wd[3] || wd[0] < 1) {
    return NodeError(
        n, absl::StrCat("has weight ", w->name(), " of dims ", DimsText(wd), " for a ", in.dims[0],
                        "-channel input; a 2-D convolution's weight is [filters, ", in.dims[0],
                        ", k, k] (square kernels)"));
  }
  const int64_t filters = wd[0], k = wd[2];
  ASSIGN_OR_NODE_ERROR(std::vector<int64_t> kernel_shape, IntsAttr(n, "kernel_shape"));
  if (!kernel_shape.empty() && kernel_shape != std::vector<int64_t>{k, k}) {
    return NodeError(n, absl::StrCat("has kernel_shape ", IntsText(kernel_shape),
                                     " but its weight is ", DimsText(wd)));
  }
  ASSIGN_OR_NODE_ERROR(int64_t dilation, SquareAttr(n, "dilations", 1));
  if (dilation != 1) return NodeError(n, "is dilated; pstrain's conv2d takes dilations 1");
  ASSIGN_OR_NODE_ERROR(int64_t stride, SquareAttr(n, "strides", 1));
  if (k > kMaxKernel || stride < 1 || stride > kMaxKernel || filters > kMaxSize) {
    return NodeError(n, absl::StrCat("has a ", k, "x", k, " kernel, stride ", stride, " and ",
                                     filters, " filters; pstrain takes kernels and strides in [1, ",
                                     kMaxKernel, "] and at most ", kMaxSize, " filters"));
  }
  std::vector<int64_t> out_hw;
  ASSIGN_OR_NODE_ERROR(std::string padding,
                       MatchPadding(n, in.dims[1], in.dims[2], k, stride, true, &out_hw));
  ASSIGN_OR_RETURN_ONNX(std::vector<float> wv, Floats(n, n.input(1), *w, "weight"));
  std::vector<float> bias;
  const bool use_bias = HasInput(n, 2);
  if (use_bias) {
    ASSIGN_OR_RETURN_ONNX(const onnx::TensorProto* b, TensorInput(n, 2, "bias"));
    if (DimsOf(*b) != std::vector<int64_t>{filters}) {
      return NodeError(n, absl::StrCat("has bias ", b->name(), " of dims ", DimsText(DimsOf(*b)),
                                       " for ", filters, " filters; it must be [", filters, "]"));
    }
    ASSIGN_OR_RETURN_ONNX(bias, Floats(n, n.input(2), *b, "bias"));
  }
  const int64_t c = in.dims[0];
  std::vector<float> hwio(wv.size());
  for (int64_t m = 0; m < filters; ++m) {
    for (int64_t ci = 0; ci < c; ++ci) {
      for (int64_t y = 0; y < k; ++y) {
        for (int64_t x = 0; x < k; ++x) {
          hwio[((y * k + x) * c + ci) * filters + m] = wv[((m * c + ci) * k + y) * k + x];
        }
      }
    }
  }
  LayerSpec l;
  l.type = "conv2d";
  l.name = LayerName(n, w->name(), "conv2d");
  l.filters = static_cast<int>(filters);
  l.kernel = static_cast<int>(k);
  l.strides = static_cast<int>(stride);
  l.padding = padding;
  l.use_bias = use_bias;
  AddWeight(l.name, "kernel", {k, k, c, filters}, std::move(hwio));
  if (use_bias) AddWeight(l.name, "bias", {filters}, std::move(bias));
  SetAct(n, Emit(std::move(l), in, {filters, out_hw[0], out_hw[1]}, false));
  return absl::OkStatus();
}

absl::Status Importer::ConvertGemm(const onnx::NodeProto& n) {
  PSTRAIN_RETURN_IF_ERROR(CheckAttributes(n, {"alpha", "beta", "transA", "transB"}));
  ASSIGN_OR_RETURN_ONNX(Act in, ActInput(n, 0));
  if (in.dims.size() != 1) {
    return NodeError(n, absl::StrCat("takes [N, ", absl::StrJoin(in.dims, ", "),
                                     "]; Gemm takes [N, features] (a Flatten before it)"));
  }
  ASSIGN_OR_NODE_ERROR(int64_t trans_a, IntAttr(n, "transA", 0));
  ASSIGN_OR_NODE_ERROR(int64_t trans_b, IntAttr(n, "transB", 0));
  ASSIGN_OR_NODE_ERROR(float alpha, FloatAttr(n, "alpha", 1.0f));
  ASSIGN_OR_NODE_ERROR(float beta, FloatAttr(n, "beta", 1.0f));
  const bool use_bias = HasInput(n, 2);
  if (trans_a != 0 || alpha != 1.0f || (use_bias && beta != 1.0f)) {
    return NodeError(n, absl::StrCat("has transA ", trans_a, ", alpha ", alpha, ", beta ", beta,
                                     "; pstrain's dense is Gemm with transA 0, alpha 1, beta 1"));
  }
  ASSIGN_OR_RETURN_ONNX(const onnx::TensorProto* b, TensorInput(n, 1, "weight"));
  const std::vector<int64_t> bd = DimsOf(*b);
  const int64_t features = in.dims[0];
  if (bd.size() != 2 || bd[trans_b ? 1 : 0] != features || bd[trans_b ? 0 : 1] < 1) {
    return NodeError(
        n, absl::StrCat("has weight ", b->name(), " of dims ", DimsText(bd), " (transB ", trans_b,
                        ") for ", features, " input features; it must be ",
                        trans_b ? "[units, " : "[", features, trans_b ? "]" : ", units]"));
  }
  const int64_t units = bd[trans_b ? 0 : 1];
  if (units > kMaxSize) return NodeError(n, absl::StrCat("has ", units, " units, over ", kMaxSize));
  ASSIGN_OR_RETURN_ONNX(std::vector<float> bv, Floats(n, n.input(1), *b, "weight"));
  std::vector<float> bias;
  if (use_bias) {
    ASSIGN_OR_RETURN_ONNX(const onnx::TensorProto* c, TensorInput(n, 2, "bias"));
    const std::vector<int64_t> cd = DimsOf(*c);
    if (cd != std::vector<int64_t>{units} && cd != std::vector<int64_t>{1, units}) {
      return NodeError(n, absl::StrCat("has bias ", c->name(), " of dims ", DimsText(cd), " for ",
                                       units, " units; it must be [", units, "]"));
    }
    ASSIGN_OR_RETURN_ONNX(bias, Floats(n, n.input(2), *c, "bias"));
  }
  LayerSpec l;
  l.type = "dense";
  l.name = LayerName(n, b->name(), "dense");
  l.units = static_cast<int>(units);
  l.use_bias = use_bias;
  AddWeight(l.name, "kernel", {features, units},
            DenseKernel(bv, features, units, trans_b != 0, in.chw));
  if (use_bias) AddWeight(l.name, "bias", {units}, std::move(bias));
  SetAct(n, Emit(std::move(l), in, {units}, true));
  return absl::OkStatus();
}

absl::Status Importer::ConvertMatMul(const onnx::NodeProto& n) {
  PSTRAIN_RETURN_IF_ERROR(CheckAttributes(n, {}));
  ASSIGN_OR_RETURN_ONNX(Act in, ActInput(n, 0));
  if (in.dims.size() != 1) {
    return NodeError(n, absl::StrCat("takes [N, ", absl::StrJoin(in.dims, ", "),
                                     "]; pstrain's dense takes [N, features] (a Flatten before "
                                     "it)"));
  }
  ASSIGN_OR_RETURN_ONNX(const onnx::TensorProto* b, TensorInput(n, 1, "weight"));
  const std::vector<int64_t> bd = DimsOf(*b);
  const int64_t features = in.dims[0];
  if (bd.size() != 2 || bd[0] != features || bd[1] < 1 || bd[1] > kMaxSize) {
    return NodeError(
        n, absl::StrCat("has weight ", b->name(), " of dims ", DimsText(bd), " for ", features,
                        " input features; it must be [", features, ", units]"));
  }
  const int64_t units = bd[1];
  ASSIGN_OR_RETURN_ONNX(std::vector<float> bv, Floats(n, n.input(1), *b, "weight"));
  // The Add of a bias right after it is the dense layer's bias.
  const onnx::NodeProto* add = nullptr;
  std::vector<float> bias;
  if (SingleUse(n.output(0))) {
    const int user = consumers_.at(n.output(0))[0];
    const onnx::NodeProto& a = model_.graph().node(user);
    if (a.op_type() == "Add" && a.input_size() == 2 && a.output_size() >= 1 &&
        a.attribute_size() == 0) {
      const std::string& other = a.input(0) == n.output(0) ? a.input(1) : a.input(0);
      auto it = values_.find(other);
      if (it != values_.end() && it->second.kind == Value::kTensor) {
        const std::vector<int64_t> cd = DimsOf(*it->second.tensor);
        if (cd != std::vector<int64_t>{units} && cd != std::vector<int64_t>{1, units}) {
          return Error(absl::StrCat(NodeWhere(a), " adds ", other, " of dims ", DimsText(cd),
                                    " to a MatMul of ", units, " units; a bias must be [", units,
                                    "]"));
        }
        ASSIGN_OR_RETURN_ONNX(bias, Floats(a, other, *it->second.tensor, "bias"));
        add = &a;
        done_[user] = true;
      }
    }
  }
  LayerSpec l;
  l.type = "dense";
  l.name = LayerName(n, b->name(), "dense");
  l.units = static_cast<int>(units);
  l.use_bias = add != nullptr;
  AddWeight(l.name, "kernel", {features, units}, DenseKernel(bv, features, units, false, in.chw));
  if (add != nullptr) AddWeight(l.name, "bias", {units}, std::move(bias));
  const Act act = Emit(std::move(l), in, {units}, true);
  SetAct(n, act);
  if (add != nullptr) SetAct(*add, act);
  return absl::OkStatus();
}

absl::Status Importer::ConvertActivation(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  const std::string type = op == "Relu"        ? "relu"
                           : op == "LeakyRelu" ? "leaky_relu"
                           : op == "Sigmoid"   ? "sigmoid"
                                               : "tanh";
  PSTRAIN_RETURN_IF_ERROR(CheckAttributes(
      n, type == "leaky_relu" ? std::vector<std::string>{"alpha"} : std::vector<std::string>{}));
  ASSIGN_OR_RETURN_ONNX(Act in, ActInput(n, 0));
  ASSIGN_OR_NODE_ERROR(float alpha, FloatAttr(n, "alpha", 0.01f));
  if (!(alpha >= 0.0f && alpha <= 1.0f)) {
    return NodeError(n, absl::StrCat("has alpha ", alpha, "; pstrain's leaky_relu takes [0, 1]"));
  }
  // in.sole_use: nothing else takes the layer's output, through any chain of
  // pass-through nodes (Identity, a flat Flatten, a one-input Concat).
  if (!out_.spec.layers.empty() && in.layer == out_.spec.layers.back().name && in.sole_use) {
    LayerSpec& last = out_.spec.layers.back();
    if ((last.type == "conv2d" || last.type == "dense") && last.activation == "none") {
      last.activation = type;
      if (type == "leaky_relu") last.alpha = alpha;
      SetAct(n, in);
      return absl::OkStatus();
    }
    if (last.type == "batch_norm" && type == "relu" && !last.relu) {
      last.relu = true;
      SetAct(n, in);
      return absl::OkStatus();
    }
  }
  LayerSpec l;
  l.type = type;
  l.name = LayerName(n, "", type);
  if (type == "leaky_relu") l.alpha = alpha;
  Act act = Emit(std::move(l), in, in.dims, in.flat);
  act.chw = in.chw;
  SetAct(n, act);
  return absl::OkStatus();
}

absl::Status Importer::ConvertPool(const onnx::NodeProto& n) {
  const bool max = n.op_type() == "MaxPool";
  PSTRAIN_RETURN_IF_ERROR(CheckAttributes(
      n, max ? std::vector<std::string>{"kernel_shape", "strides", "pads", "auto_pad", "ceil_mode",
                                        "dilations", "storage_order"}
             : std::vector<std::string>{"kernel_shape", "strides", "pads", "auto_pad", "ceil_mode",
                                        "count_include_pad"}));
  ASSIGN_OR_RETURN_ONNX(Act in, ActInput(n, 0));
  if (in.flat || in.dims.size() != 3) {
    return NodeError(n, absl::StrCat("takes [N, ", absl::StrJoin(in.dims, ", "),
                                     "]; 2-D pooling takes [N, C, H, W]"));
  }
  ASSIGN_OR_NODE_ERROR(int64_t k, SquareAttr(n, "kernel_shape", 0));
  if (k < 1) return NodeError(n, "has no kernel_shape");
  ASSIGN_OR_NODE_ERROR(int64_t stride, SquareAttr(n, "strides", 1));
  ASSIGN_OR_NODE_ERROR(int64_t dilation, SquareAttr(n, "dilations", 1));
  if (dilation != 1) return NodeError(n, "is dilated; pstrain's pools take dilations 1");
  if (k > kMaxPool || stride < 1 || stride > kMaxPool) {
    return NodeError(n, absl::StrCat("has a ", k, "x", k, " window and stride ", stride,
                                     "; pstrain takes both in [1, ", kMaxPool, "]"));
  }
  std::vector<int64_t> out_hw;
  ASSIGN_OR_NODE_ERROR(std::string padding,
                       MatchPadding(n, in.dims[1], in.dims[2], k, stride, false, &out_hw));
  ASSIGN_OR_NODE_ERROR(int64_t include_pad, IntAttr(n, "count_include_pad", 0));
  if (!max && include_pad != 0 && padding != "valid") {
    return NodeError(n,
                     "counts the padding in its averages (count_include_pad 1, PyTorch's "
                     "AvgPool2d default); pstrain's average_pool averages only the inputs a "
                     "window covers: export with count_include_pad=False or padding=0");
  }
  LayerSpec l;
  l.type = max ? "max_pool" : "average_pool";
  l.name = LayerName(n, "", l.type);
  l.pool = static_cast<int>(k);
  l.strides = static_cast<int>(stride);
  l.padding = padding;
  SetAct(n, Emit(std::move(l), in, {in.dims[0], out_hw[0], out_hw[1]}, false));
  return absl::OkStatus();
}

absl::Status Importer::ConvertGlobalPool(const onnx::NodeProto& n) {
  PSTRAIN_RETURN_IF_ERROR(CheckAttributes(n, {}));
  ASSIGN_OR_RETURN_ONNX(Act in, ActInput(n, 0));
  if (in.flat || in.dims.size() != 3) {
    return NodeError(
        n, absl::StrCat("takes [N, ", absl::StrJoin(in.dims, ", "), "]; it takes [N, C, H, W]"));
  }
  LayerSpec l;
  l.type = "global_average_pool";
  l.name = LayerName(n, "", l.type);
  // pstrain's gives [C]; the Flatten ONNX needs after it changes nothing.
  SetAct(n, Emit(std::move(l), in, {in.dims[0], 1, 1}, true));
  return absl::OkStatus();
}

absl::Status Importer::ConvertBatchNorm(const onnx::NodeProto& n) {
  PSTRAIN_RETURN_IF_ERROR(CheckAttributes(n, {"epsilon", "momentum", "training_mode", "spatial"}));
  ASSIGN_OR_RETURN_ONNX(Act in, ActInput(n, 0));
  ASSIGN_OR_NODE_ERROR(int64_t spatial, IntAttr(n, "spatial", 1));
  if (spatial != 1) return NodeError(n, "has spatial 0; pstrain normalizes per channel");
  if (in.dims.empty()) return NodeError(n, "takes an input without channels");
  const int64_t channels = in.dims[0];
  static const char* const kRoles[4] = {"scale", "bias", "mean", "variance"};
  static const char* const kVariables[4] = {"gamma", "beta", "moving_mean", "moving_variance"};
  std::vector<float> params[4];
  std::string scale_name;
  for (int i = 0; i < 4; ++i) {
    ASSIGN_OR_RETURN_ONNX(const onnx::TensorProto* t, TensorInput(n, i + 1, kRoles[i]));
    if (i == 0) scale_name = t->name();
    if (DimsOf(*t) != std::vector<int64_t>{channels}) {
      return NodeError(
          n, absl::StrCat("has ", kRoles[i], " ", t->name(), " of dims ", DimsText(DimsOf(*t)),
                          " for ", channels, " channels; it must be [", channels, "]"));
    }
    ASSIGN_OR_RETURN_ONNX(params[i], Floats(n, n.input(i + 1), *t, kRoles[i]));
    if (!in.chw.empty()) {  // per feature of an NCHW flatten: into pstrain's order
      std::vector<float> p(params[i].size());
      for (size_t r = 0; r < p.size(); ++r) p[r] = params[i][OnnxRow(r, in.chw)];
      params[i] = std::move(p);
    }
  }
  ASSIGN_OR_NODE_ERROR(float epsilon, FloatAttr(n, "epsilon", 1e-5f));
  if (!(epsilon > 0.0f && epsilon <= 1.0f)) {
    return NodeError(n, absl::StrCat("has epsilon ", epsilon, "; pstrain takes (0, 1]"));
  }
  float momentum = -1.0f;  // absent: the job's batch_norm_decay
  if (FindAttr(n, "momentum") != nullptr) {
    ASSIGN_OR_NODE_ERROR(momentum, FloatAttr(n, "momentum", 0.9f));
    if (!(momentum >= 0.0f && momentum < 1.0f)) {
      return NodeError(n, absl::StrCat("has momentum ", momentum,
                                       "; pstrain's moving-average decay is in [0, 1)"));
    }
  }
  LayerSpec l;
  l.type = "batch_norm";
  l.name = LayerName(n, scale_name, "batch_norm");
  l.epsilon = epsilon;
  l.momentum = momentum;
  for (int i = 0; i < 4; ++i) AddWeight(l.name, kVariables[i], {channels}, std::move(params[i]));
  Act act = Emit(std::move(l), in, in.dims, in.flat);
  act.chw = in.chw;
  SetAct(n, act);
  return absl::OkStatus();
}

absl::Status Importer::ConvertDropout(const onnx::NodeProto& n) {
  PSTRAIN_RETURN_IF_ERROR(CheckAttributes(n, {"ratio", "seed"}));
  ASSIGN_OR_RETURN_ONNX(Act in, ActInput(n, 0));
  float rate = 0.5f;
  if (HasInput(n, 1)) {
    ASSIGN_OR_RETURN_ONNX(const onnx::TensorProto* t, TensorInput(n, 1, "ratio"));
    ASSIGN_OR_RETURN_ONNX(std::vector<float> v, Floats(n, n.input(1), *t, "ratio"));
    if (v.size() != 1) return NodeError(n, "has a ratio that is not one number");
    rate = v[0];
  } else {
    ASSIGN_OR_NODE_ERROR(rate, FloatAttr(n, "ratio", 0.5f));
  }
  if (!(rate >= 0.0f && rate < 1.0f)) {
    return NodeError(n, absl::StrCat("has ratio ", rate, "; pstrain's dropout takes [0, 1)"));
  }
  LayerSpec l;
  l.type = "dropout";
  l.name = LayerName(n, "", "dropout");
  l.rate = rate;
  Act act = Emit(std::move(l), in, in.dims, in.flat);
  act.chw = in.chw;
  SetAct(n, act);
  return absl::OkStatus();
}

}  // namespace onnx_import_internal
}  // namespace pstrain
