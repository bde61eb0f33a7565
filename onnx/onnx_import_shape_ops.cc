// The ops that pass on, reshape, join or pad activations (Flatten, Reshape,
// Add, Concat, Pad, Transpose, Softmax), and the constants and shape
// arithmetic (Constant, Shape, Gather, Unsqueeze) that feed a Reshape.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "onnx/onnx_import_internal.h"
#include "onnx/onnx_import_tensors.h"

namespace pstrain {
namespace onnx_import_internal {

absl::Status Importer::ConvertFlatten(const onnx::NodeProto& n, const Act& in) {
  ASSIGN_OR_NODE_ERROR(const int64_t features, Features(in.dims));
  if (in.flat && !in.nhwc) {  // already [F] in pstrain (dense, global pool)
    Act act = in;
    act.dims = {features};
    SetAct(n, act);
    return absl::OkStatus();
  }
  LayerSpec l;
  l.type = "flatten";
  l.name = LayerName(n, "", "flatten");
  Act act = Emit(std::move(l), in, {features}, true);
  if (!in.nhwc && in.dims.size() == 3 && in.dims[1] * in.dims[2] > 1) act.chw = in.dims;
  SetAct(n, act);
  return absl::OkStatus();
}

absl::Status Importer::ConvertReshape(const onnx::NodeProto& n) {
  PSTRAIN_RETURN_IF_ERROR(CheckAttributes(n, {"allowzero"}));
  ASSIGN_OR_RETURN_ONNX(Act in, ActInput(n, 0));
  bool scalar = false;
  ASSIGN_OR_RETURN_ONNX(std::vector<int64_t> shape, IntsInput(n, 1, &scalar, true));
  ASSIGN_OR_NODE_ERROR(int64_t allow_zero, IntAttr(n, "allowzero", 0));
  ASSIGN_OR_NODE_ERROR(const int64_t features, Features(in.dims));
  const bool ok = !scalar && shape.size() == 2 &&
                  ((shape[0] == 0 && allow_zero == 0) || shape[0] == kBatchDim || shape[0] == -1) &&
                  (shape[1] == features || (shape[1] == -1 && shape[0] != -1));
  if (!ok) {
    return NodeError(
        n, absl::StrCat("reshapes [N, ", absl::StrJoin(in.dims, ", "), "] to ", IntsText(shape),
                        "; pstrain takes Reshape only as a flatten to [N, -1]"));
  }
  return ConvertFlatten(n, in);
}

absl::Status Importer::ConvertAdd(const onnx::NodeProto& n) {
  PSTRAIN_RETURN_IF_ERROR(CheckAttributes(n, {}));
  if (n.input_size() != 2) return NodeError(n, "does not have two inputs");
  for (int k = 0; k < 2; ++k) {
    auto it = values_.find(n.input(k));
    if (it != values_.end() && it->second.kind != Value::kAct) {
      return NodeError(n, absl::StrCat("adds the constant ", n.input(k),
                                       "; pstrain takes Add of a constant only as the bias "
                                       "right after MatMul, else Add of two activations"));
    }
  }
  ASSIGN_OR_RETURN_ONNX(Act a, ActInput(n, 0));
  ASSIGN_OR_RETURN_ONNX(Act b, ActInput(n, 1));
  if (a.dims != b.dims || a.flat != b.flat || a.chw != b.chw) {
    return NodeError(n, absl::StrCat("adds [N, ", absl::StrJoin(a.dims, ", "), "] and [N, ",
                                     absl::StrJoin(b.dims, ", "),
                                     "]; pstrain's add takes activations of one shape (no "
                                     "broadcasting)"));
  }
  LayerSpec l;
  l.type = "add";
  l.name = LayerName(n, "", "add");
  l.inputs = {b.layer};
  Act act = Emit(std::move(l), a, a.dims, a.flat);
  act.chw = a.chw;
  SetAct(n, act);
  return absl::OkStatus();
}

absl::Status Importer::ConvertConcat(const onnx::NodeProto& n) {
  PSTRAIN_RETURN_IF_ERROR(CheckAttributes(n, {"axis"}));
  if (n.input_size() < 1) return NodeError(n, "has no inputs");
  ASSIGN_OR_NODE_ERROR(int64_t axis, IntAttr(n, "axis", 1));
  bool all_ints = true;
  for (const std::string& in : n.input()) {
    auto it = values_.find(in);
    if (it == values_.end() || it->second.kind == Value::kAct) all_ints = false;
  }
  if (all_ints) {  // shape arithmetic: [N] and [-1] -> [N, -1]
    Value v = Value::OfInts({}, false);
    for (int k = 0; k < n.input_size(); ++k) {
      bool scalar = false;
      ASSIGN_OR_RETURN_ONNX(std::vector<int64_t> part, IntsInput(n, k, &scalar, true));
      if (scalar || (axis != 0 && axis != -1)) {
        return NodeError(n, "joins integers other than 1-D ones along axis 0");
      }
      v.ints.insert(v.ints.end(), part.begin(), part.end());
    }
    if (static_cast<int64_t>(v.ints.size()) > kMaxShapeInts) {
      return NodeError(n, "gives too many integers for a shape");
    }
    values_[n.output(0)] = v;
    return absl::OkStatus();
  }
  std::vector<Act> ins;
  for (int k = 0; k < n.input_size(); ++k) {
    ASSIGN_OR_RETURN_ONNX(Act a, ActInput(n, k));
    ins.push_back(std::move(a));
  }
  const Act& first = ins[0];
  if (axis < 0) axis += static_cast<int64_t>(first.dims.size()) + 1;
  if (axis != 1) {
    return NodeError(
        n, absl::StrCat("joins along axis ", axis, "; pstrain's concat joins channels (axis 1)"));
  }
  if (ins.size() == 1) {
    SetAct(n, first);
    return absl::OkStatus();
  }
  std::vector<int64_t> dims = first.dims;
  dims[0] = 0;
  for (const Act& a : ins) {
    const bool fits = a.dims.size() == first.dims.size() && a.flat == first.flat && a.chw.empty() &&
                      std::equal(a.dims.begin() + 1, a.dims.end(), first.dims.begin() + 1);
    if (!fits) {
      return NodeError(n, absl::StrCat("joins [N, ", absl::StrJoin(a.dims, ", "), "] to [N, ",
                                       absl::StrJoin(first.dims, ", "),
                                       "]; pstrain's concat joins channels, the other sizes "
                                       "equal (and not after an NCHW flatten)"));
    }
    // Checked before the sum: a chain of Concat(x, x) doubles it each time.
    const int64_t cap = first.flat ? kMaxTensorElements : kMaxSize;
    if (a.dims[0] > cap - dims[0]) {
      return NodeError(n, absl::StrCat("joins over ", cap, first.flat ? " features" : " channels",
                                       "; pstrain's concat gives at most ", cap));
    }
    dims[0] += a.dims[0];
  }
  LayerSpec l;
  l.type = "concat";
  l.name = LayerName(n, "", "concat");
  for (size_t i = 1; i < ins.size(); ++i) l.inputs.push_back(ins[i].layer);
  SetAct(n, Emit(std::move(l), first, dims, first.flat));
  return absl::OkStatus();
}

absl::Status Importer::ConvertPad(const onnx::NodeProto& n) {
  PSTRAIN_RETURN_IF_ERROR(CheckAttributes(n, {"mode", "pads", "value"}));
  ASSIGN_OR_RETURN_ONNX(Act in, ActInput(n, 0));
  ASSIGN_OR_NODE_ERROR(std::string mode, StringAttr(n, "mode", "constant"));
  std::vector<int64_t> pads;
  float value = 0.0f;
  if (opset_ < 11) {
    ASSIGN_OR_NODE_ERROR(pads, IntsAttr(n, "pads"));
    ASSIGN_OR_NODE_ERROR(value, FloatAttr(n, "value", 0.0f));
  } else {
    bool scalar = false;
    ASSIGN_OR_RETURN_ONNX(pads, IntsInput(n, 1, &scalar, false));
    if (HasInput(n, 2)) {
      ASSIGN_OR_RETURN_ONNX(const onnx::TensorProto* t, TensorInput(n, 2, "constant_value"));
      ASSIGN_OR_RETURN_ONNX(std::vector<float> v, Floats(n, n.input(2), *t, "constant_value"));
      if (v.size() != 1) return NodeError(n, "has a constant_value that is not one number");
      value = v[0];
    }
    if (HasInput(n, 3)) return NodeError(n, "has axes; pstrain takes Pad of every axis");
  }
  // pstrain's pad_channels, as its exporter writes it: Pad on axis 1 of
  // [N, C, H, W] or of a flat [N, F], half of the new channels before and half
  // after (the layer takes only an even number), zeros.
  const size_t rank = in.dims.size() + 1;  // with the batch
  const bool shaped = rank == 4 || (in.flat && rank == 2);
  if (!shaped || pads.size() != 2 * rank || mode != "constant" || value != 0.0f ||
      !in.chw.empty()) {
    return NodeError(n, absl::StrCat("pads ", IntsText(pads), " (mode ", mode, ", value ", value,
                                     "); pstrain takes Pad only as zero channels on both sides "
                                     "of [N, C, H, W] or [N, F] (pad_channels)"));
  }
  for (size_t i = 0; i < pads.size(); ++i) {
    if (pads[i] != 0 && i != 1 && i != rank + 1) {
      return NodeError(
          n, absl::StrCat("pads height or width ", IntsText(pads),
                          "; pstrain pads only inside conv2d and the pools. PyTorch writes "
                          "AvgPool2d(padding=p) as Pad + AveragePool: export it with "
                          "count_include_pad=False, which keeps the padding in the AveragePool"));
    }
  }
  const int64_t before = pads[1], after = pads[rank + 1];
  // Bounded before any sum: the pads come from the file.
  if (before != after || before < 0 || before > kMaxSize || in.dims[0] > kMaxSize - 2 * before) {
    return NodeError(n, absl::StrCat("pads channels by ", before, " before and ", after,
                                     " after; pstrain's pad_channels pads both sides equally, to "
                                     "at most ",
                                     kMaxSize, " channels"));
  }
  LayerSpec l;
  l.type = "pad_channels";
  l.name = LayerName(n, "", "pad_channels");
  std::vector<int64_t> dims = in.dims;
  dims[0] += 2 * before;
  l.filters = static_cast<int>(dims[0]);
  SetAct(n, Emit(std::move(l), in, dims, in.flat));
  return absl::OkStatus();
}

absl::Status Importer::ConvertTranspose(const onnx::NodeProto& n) {
  PSTRAIN_RETURN_IF_ERROR(CheckAttributes(n, {"perm"}));
  ASSIGN_OR_RETURN_ONNX(Act in, ActInput(n, 0));
  ASSIGN_OR_NODE_ERROR(std::vector<int64_t> perm, IntsAttr(n, "perm"));
  if (perm != std::vector<int64_t>{0, 2, 3, 1} || in.flat || in.dims.size() != 3) {
    return NodeError(n, absl::StrCat("transposes with perm ", IntsText(perm),
                                     "; pstrain takes Transpose only as [0, 3, 1, 2] on the "
                                     "images of its own exports, or [0, 2, 3, 1] right before "
                                     "a Flatten"));
  }
  in.nhwc = true;
  SetAct(n, in);
  return absl::OkStatus();
}

absl::Status Importer::ConvertSoftmax(const onnx::NodeProto& n) {
  PSTRAIN_RETURN_IF_ERROR(CheckAttributes(n, {"axis"}));
  ASSIGN_OR_RETURN_ONNX(Act in, ActInput(n, 0));
  ASSIGN_OR_NODE_ERROR(int64_t axis, IntAttr(n, "axis", opset_ < 13 ? 1 : -1));
  if (in.dims.size() != 1 || (axis != 1 && axis != -1)) {
    return NodeError(n, "is not over the classes of [N, classes]");
  }
  in.softmax = true;
  SetAct(n, in);
  out_.notes.push_back(absl::StrCat("dropped ", NodeWhere(n),
                                    " at the end: pstrain's model gives logits and its loss "
                                    "applies the softmax"));
  return absl::OkStatus();
}

absl::Status Importer::ConvertConstant(const onnx::NodeProto& n) {
  if (n.attribute_size() != 1) return NodeError(n, "does not have exactly one attribute");
  const onnx::AttributeProto& a = n.attribute(0);
  Value v;
  if (a.name() == "value") {
    v.kind = Value::kTensor;
    v.tensor = &a.t();
  } else if (a.name() == "value_float" || a.name() == "value_floats") {
    onnx::TensorProto& t = owned_.emplace_back();
    t.set_name(n.output(0));
    t.set_data_type(onnx::TensorProto_DataType_FLOAT);
    if (a.name() == "value_float") {
      t.add_float_data(a.f());
    } else {
      t.add_dims(a.floats_size());
      for (float f : a.floats()) t.add_float_data(f);
    }
    v.kind = Value::kTensor;
    v.tensor = &t;
  } else if (a.name() == "value_int" || a.name() == "value_ints") {
    // A tensor like any other constant, so IntsInput checks its values
    // where they are used.
    if (a.ints_size() > kMaxShapeInts) return NodeError(n, "has too many value_ints");
    onnx::TensorProto& t = owned_.emplace_back();
    t.set_name(n.output(0));
    t.set_data_type(onnx::TensorProto_DataType_INT64);
    if (a.name() == "value_int") {
      t.add_int64_data(a.i());
    } else {
      t.add_dims(a.ints_size());
      for (int64_t i : a.ints()) t.add_int64_data(i);
    }
    v.kind = Value::kTensor;
    v.tensor = &t;
  } else {
    return NodeError(n, absl::StrCat("has attribute ", a.name(),
                                     "; pstrain takes Constant value, value_float(s) or "
                                     "value_int(s)"));
  }
  values_[n.output(0)] = v;
  return absl::OkStatus();
}

absl::Status Importer::ConvertShapeOp(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  Value v = Value::OfInts({}, false);
  if (op == "Shape") {
    PSTRAIN_RETURN_IF_ERROR(CheckAttributes(n, {}));
    auto it = values_.find(n.input_size() > 0 ? n.input(0) : "");
    if (it == values_.end()) return ActInput(n, 0).status();
    const Value& in = it->second;
    if (in.kind == Value::kAct) {
      std::vector<int64_t> dims = in.act.dims;
      if (in.act.nhwc) dims = {dims[1], dims[2], dims[0]};
      v.ints = {kBatchDim};
      v.ints.insert(v.ints.end(), dims.begin(), dims.end());
    } else if (in.kind == Value::kTensor) {
      v.ints = DimsOf(*in.tensor);
      if (static_cast<int64_t>(v.ints.size()) > kMaxShapeInts) {
        return NodeError(n, absl::StrCat("takes the shape of ", n.input(0), ", of ", v.ints.size(),
                                         " dimensions; at most ", kMaxShapeInts));
      }
      absl::StatusOr<int64_t> elements =
          CheckedElements(v.ints, absl::StrCat("tensor ", n.input(0)));
      if (!elements.ok()) return NodeWrap(n, elements.status());
    } else {
      if (!in.scalar) v.ints = {static_cast<int64_t>(in.ints.size())};
    }
  } else if (op == "Gather") {
    PSTRAIN_RETURN_IF_ERROR(CheckAttributes(n, {"axis"}));
    ASSIGN_OR_NODE_ERROR(int64_t axis, IntAttr(n, "axis", 0));
    bool data_scalar = false, index_scalar = false;
    ASSIGN_OR_RETURN_ONNX(std::vector<int64_t> data, IntsInput(n, 0, &data_scalar, true));
    ASSIGN_OR_RETURN_ONNX(std::vector<int64_t> indices, IntsInput(n, 1, &index_scalar, false));
    if (data_scalar || (axis != 0 && axis != -1)) {
      return NodeError(n, "gathers from integers other than a 1-D shape");
    }
    const int64_t size = static_cast<int64_t>(data.size());
    for (int64_t i : indices) {
      if (i < -size || i >= size) {
        return NodeError(n, absl::StrCat("gathers index ", i, " from ", size, " values"));
      }
      v.ints.push_back(data[i < 0 ? i + size : i]);
    }
    v.scalar = index_scalar;
  } else {  // Unsqueeze: a scalar into [1]
    PSTRAIN_RETURN_IF_ERROR(CheckAttributes(
        n, opset_ < 13 ? std::vector<std::string>{"axes"} : std::vector<std::string>{}));
    std::vector<int64_t> axes;
    if (opset_ < 13) {
      ASSIGN_OR_NODE_ERROR(axes, IntsAttr(n, "axes"));
    } else {
      bool scalar = false;
      ASSIGN_OR_RETURN_ONNX(axes, IntsInput(n, 1, &scalar, false));
    }
    bool scalar = false;
    ASSIGN_OR_RETURN_ONNX(v.ints, IntsInput(n, 0, &scalar, true));
    if (!scalar || axes.size() != 1 || (axes[0] != 0 && axes[0] != -1)) {
      return NodeError(n,
                       "unsqueezes other than a scalar into [1]; pstrain evaluates only the "
                       "shape arithmetic of a flatten");
    }
  }
  values_[n.output(0)] = v;
  return absl::OkStatus();
}

}  // namespace onnx_import_internal
}  // namespace pstrain
