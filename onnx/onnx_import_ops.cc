// The node-by-node half of the importer (onnx_import_internal.h): each op
// becomes spec layers, weights in pstrain's layout, or values for the shape
// arithmetic that feeds a Reshape.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "onnx/onnx_import_internal.h"
#include "onnx/onnx_import_tensors.h"

// Evaluates a StatusOr; on error returns it as `n`'s error.
#define ASSIGN_OR_NODE_ERROR(lhs, expr) ASSIGN_OR_NODE_ERROR_IMPL(ONNX_CAT(r_, __LINE__), lhs, expr)
#define ONNX_CAT_INNER(a, b) a##b
#define ONNX_CAT(a, b) ONNX_CAT_INNER(a, b)
#define ASSIGN_OR_NODE_ERROR_IMPL(r, lhs, expr)           \
  auto r = (expr);                                        \
  if (!r.ok()) return NodeError(n, r.status().message()); \
  lhs = std::move(r).value()
// Evaluates a StatusOr that is already a whole message.
#define ASSIGN_OR_RETURN_ONNX(lhs, expr) \
  ASSIGN_OR_RETURN_ONNX_IMPL(ONNX_CAT(s_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_ONNX_IMPL(r, lhs, expr) \
  auto r = (expr);                               \
  if (!r.ok()) return r.status();                \
  lhs = std::move(r).value()

namespace pstrain {
namespace onnx_import_internal {
namespace {

constexpr int kMaxKernel = 64;         // conv2d's kernel and strides
constexpr int kMaxPool = 1024;         // pools' window and strides
constexpr int64_t kMaxSize = 1 << 20;  // filters, units
constexpr int64_t kMaxShapeInts = 64;  // shape arithmetic's values

const onnx::AttributeProto* FindAttr(const onnx::NodeProto& n, absl::string_view name) {
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

absl::Status AttrTypeError(const onnx::AttributeProto& a, absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat("has attribute ", a.name(), " of type ",
                                                 onnx::AttributeProto_AttributeType_Name(a.type()),
                                                 "; it is ", want));
}

absl::StatusOr<int64_t> IntAttr(const onnx::NodeProto& n, absl::string_view name, int64_t def) {
  const onnx::AttributeProto* a = FindAttr(n, name);
  if (a == nullptr) return def;
  if (a->type() != onnx::AttributeProto::INT &&
      !(a->type() == onnx::AttributeProto::UNDEFINED && a->has_i())) {
    return AttrTypeError(*a, "an INT");
  }
  return a->i();
}

absl::StatusOr<float> FloatAttr(const onnx::NodeProto& n, absl::string_view name, float def) {
  const onnx::AttributeProto* a = FindAttr(n, name);
  if (a == nullptr) return def;
  if (a->type() != onnx::AttributeProto::FLOAT &&
      !(a->type() == onnx::AttributeProto::UNDEFINED && a->has_f())) {
    return AttrTypeError(*a, "a FLOAT");
  }
  return a->f();
}

absl::StatusOr<std::vector<int64_t>> IntsAttr(const onnx::NodeProto& n, absl::string_view name) {
  const onnx::AttributeProto* a = FindAttr(n, name);
  if (a == nullptr) return std::vector<int64_t>();
  if (a->type() != onnx::AttributeProto::INTS && a->type() != onnx::AttributeProto::UNDEFINED) {
    return AttrTypeError(*a, "INTS");
  }
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

absl::StatusOr<std::string> StringAttr(const onnx::NodeProto& n, absl::string_view name,
                                       std::string def) {
  const onnx::AttributeProto* a = FindAttr(n, name);
  if (a == nullptr) return def;
  if (a->type() != onnx::AttributeProto::STRING &&
      !(a->type() == onnx::AttributeProto::UNDEFINED && a->has_s())) {
    return AttrTypeError(*a, "a STRING");
  }
  return a->s();
}

std::string IntsText(const std::vector<int64_t>& v) {
  std::vector<std::string> parts;
  for (int64_t x : v) parts.push_back(x == kBatchDim ? "N" : absl::StrCat(x));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

// The features of an activation of `dims`, refused over kMaxTensorElements
// (checked before each multiplication: the dims come from the file).
absl::StatusOr<int64_t> Features(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) {
    if (d < 1 || d > kMaxTensorElements || p > kMaxTensorElements / d) {
      return absl::InvalidArgumentError(absl::StrCat("gives [N, ", absl::StrJoin(dims, ", "),
                                                     "]: over ", kMaxTensorElements,
                                                     " features per example"));
    }
    p *= d;
  }
  return p;
}

// The row of an NCHW-flattened [C, H, W] feature that pstrain's HWC flatten
// has at `row`.
int64_t OnnxRow(int64_t row, const std::vector<int64_t>& chw) {
  if (chw.empty()) return row;
  const int64_t c_n = chw[0], w_n = chw[2];
  const int64_t c = row % c_n, hw = row / c_n;
  const int64_t h = hw / w_n, w = hw % w_n;
  return c * chw[1] * w_n + h * w_n + w;
}

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

// Where a window of `k` moved by `s` goes over one dimension of `in`.
struct Placement {
  int64_t out = 0;
  int64_t before = 0;
};

Placement Pstrain(const std::string& padding, int64_t in, int64_t k, int64_t s) {
  Placement p;
  if (padding == "same") {
    p.out = (in + s - 1) / s;
    const int64_t total = std::max<int64_t>((p.out - 1) * s + k - in, 0);
    p.before = total / 2;
  } else if (padding == "fixed") {
    p.out = (in - 1) / s + 1;
    p.before = (k - 1) / 2;
  } else {
    p.out = in >= k ? (in - k) / s + 1 : 0;
  }
  return p;
}

// pstrain's padding (valid, same, or with `allow_fixed` fixed) that places
// the windows as ONNX's pads / auto_pad / ceil_mode do, for an [h, w] input;
// the output's [h, w] in `out`.
absl::StatusOr<std::string> MatchPadding(const onnx::NodeProto& n, int64_t in_h, int64_t in_w,
                                         int64_t k, int64_t s, bool allow_fixed,
                                         std::vector<int64_t>* out) {
  std::vector<int64_t> pads;
  if (absl::StatusOr<std::vector<int64_t>> p = IntsAttr(n, "pads"); p.ok()) {
    pads = *p;
  } else {
    return p.status();
  }
  if (pads.empty()) pads.assign(4, 0);
  if (pads.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "has pads ", IntsText(pads), "; a 2-D window has 4 (top, left, bottom, right)"));
  }
  for (int64_t p : pads) {
    if (p < 0 || p > kMaxPool) {
      return absl::InvalidArgumentError(
          absl::StrCat("has pads ", IntsText(pads), "; each must be in [0, ", kMaxPool, "]"));
    }
  }
  absl::StatusOr<std::string> auto_pad = StringAttr(n, "auto_pad", "NOTSET");
  if (!auto_pad.ok()) return auto_pad.status();
  absl::StatusOr<int64_t> ceil_mode = IntAttr(n, "ceil_mode", 0);
  if (!ceil_mode.ok()) return ceil_mode.status();
  const int64_t ins[2] = {in_h, in_w};
  Placement onnx_place[2];
  for (int d = 0; d < 2; ++d) {
    const int64_t in = ins[d];
    Placement& p = onnx_place[d];
    if (*auto_pad == "VALID") {
      p.out = in >= k ? (in - k) / s + 1 : 0;
    } else if (*auto_pad == "SAME_UPPER" || *auto_pad == "SAME_LOWER") {
      p.out = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>((p.out - 1) * s + k - in, 0);
      p.before = *auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (*auto_pad == "NOTSET" || auto_pad->empty()) {
      p.before = pads[d];
      const int64_t span = in + pads[d] + pads[d + 2] - k;
      if (span >= 0) {
        p.out = (*ceil_mode ? (span + s - 1) / s : span / s) + 1;
        if (*ceil_mode && (p.out - 1) * s >= in + pads[d]) --p.out;
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "has auto_pad ", *auto_pad, "; it is one of NOTSET, VALID, SAME_UPPER, SAME_LOWER"));
    }
    if (p.out < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "has a ", k, "x", k, " window that does not fit its input ", in_h, "x", in_w));
    }
  }
  std::vector<std::string> choices = {"valid", "same"};
  if (allow_fixed) choices.push_back("fixed");
  for (const std::string& c : choices) {
    bool all = true;
    for (int d = 0; d < 2; ++d) {
      const Placement p = Pstrain(c, ins[d], k, s);
      all = all && p.out == onnx_place[d].out && p.before == onnx_place[d].before;
    }
    if (all) {
      *out = {onnx_place[0].out, onnx_place[1].out};
      return c;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "pads ", *auto_pad == "NOTSET" ? IntsText(pads) : *auto_pad, " with a ", k, "x", k,
      " window and stride ", s, " on a ", in_h, "x", in_w,
      " input; pstrain pads valid (none), same (TensorFlow's: half before, the extra pixel "
      "after)",
      allow_fixed ? " or fixed ((kernel - 1) / 2 before, the rest after)" : "",
      "; pad the input differently or change the padding"));
}

// One value of a 2-element INTS attribute that must have equal elements
// (strides, kernel_shape, dilations), or `def` when absent.
absl::StatusOr<int64_t> SquareAttr(const onnx::NodeProto& n, absl::string_view name, int64_t def) {
  absl::StatusOr<std::vector<int64_t>> v = IntsAttr(n, name);
  if (!v.ok()) return v.status();
  if (v->empty()) return def;
  if (v->size() != 2 || (*v)[0] != (*v)[1]) {
    return absl::InvalidArgumentError(absl::StrCat("has ", name, " ", IntsText(*v),
                                                   "; pstrain takes 2-D windows with equal ", name,
                                                   " in height and width"));
  }
  return (*v)[0];
}

// "conv1.weight" -> "conv1", "conv2d/kernel" -> "conv2d"; "" for a name that
// does not look like a layer's variable.
std::string LayerOfWeight(absl::string_view weight) {
  static const char* const kSuffixes[] = {
      ".weight", ".bias",  ".running_mean", ".running_var", "/kernel",
      "/bias",   "/gamma", "/beta",         "/moving_mean", "/moving_variance",
      ".gamma",  ".beta",  "/weight",       "/weights",     "/scale"};
  for (const char* suffix : kSuffixes) {
    if (absl::EndsWith(weight, suffix) && weight.size() > std::strlen(suffix)) {
      return std::string(weight.substr(0, weight.size() - std::strlen(suffix)));
    }
  }
  return "";
}

}  // namespace

std::string SanitizeName(absl::string_view name) {
  std::string out;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.' &&
        c != '/') {
      c = '_';
    }
    if (c == '/' && (out.empty() || out.back() == '/')) continue;
    out.push_back(c);
  }
  while (!out.empty() && out.back() == '/') out.pop_back();
  if (out.size() > 100) out.resize(100);
  while (!out.empty() && out.back() == '/') out.pop_back();
  return out;
}

absl::Status Importer::Error(absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(source_, ": ", message));
}

absl::Status Importer::Wrap(const absl::Status& s) const {
  return absl::Status(s.code(), absl::StrCat(source_, ": ", s.message()));
}

std::string Importer::NodeWhere(const onnx::NodeProto& n) const {
  if (!n.name().empty()) return absl::StrCat("node ", n.name(), " (", n.op_type(), ")");
  return absl::StrCat("the ", n.op_type(), " node giving ",
                      n.output_size() > 0 ? n.output(0) : std::string("nothing"));
}

absl::Status Importer::NodeError(const onnx::NodeProto& n, absl::string_view message) const {
  return Error(absl::StrCat(NodeWhere(n), " ", message));
}

absl::Status Importer::NodeWrap(const onnx::NodeProto& n, const absl::Status& s) const {
  return absl::Status(s.code(), absl::StrCat(source_, ": ", NodeWhere(n), ": ", s.message()));
}

absl::Status Importer::CheckAttributes(const onnx::NodeProto& n,
                                       const std::vector<std::string>& allowed) const {
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (std::find(allowed.begin(), allowed.end(), a.name()) == allowed.end()) {
      return NodeError(
          n, absl::StrCat("has attribute ", a.name(),
                          ", which pstrain does not "
                          "support for ",
                          n.op_type(), allowed.empty() ? " (it takes none)" : "; it takes ",
                          absl::StrJoin(allowed, ", ")));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Act> Importer::ActInput(const onnx::NodeProto& n, int k) const {
  if (!HasInput(n, k)) return NodeError(n, absl::StrCat("has no input ", k));
  const std::string& name = n.input(k);
  auto it = values_.find(name);
  if (it == values_.end()) {
    auto p = producer_.find(name);
    return NodeError(n, absl::StrCat("takes ", name,
                                     p == producer_.end()
                                         ? ", which pstrain does not compute"
                                         : absl::StrCat(", an output of ",
                                                        NodeWhere(model_.graph().node(p->second)),
                                                        " that pstrain does not compute")));
  }
  if (it->second.kind != Value::kAct) {
    return NodeError(n, absl::StrCat("takes the constant ", name,
                                     " where pstrain needs an activation (computed from the "
                                     "images)"));
  }
  const Act& act = it->second.act;
  if (act.softmax && n.op_type() != "Identity") {
    return NodeError(n, absl::StrCat("takes ", name,
                                     " after Softmax; pstrain takes Softmax and LogSoftmax only "
                                     "at the end (it drops them: the loss has its own)"));
  }
  if (act.nhwc && n.op_type() != "Flatten" && n.op_type() != "Reshape") {
    return NodeError(n, absl::StrCat("takes ", name,
                                     ", a Transpose perm [0, 2, 3, 1]; pstrain takes that only "
                                     "into Flatten"));
  }
  return act;
}

absl::StatusOr<const onnx::TensorProto*> Importer::TensorInput(const onnx::NodeProto& n, int k,
                                                               absl::string_view role) const {
  if (!HasInput(n, k)) return NodeError(n, absl::StrCat("has no ", role, " (input ", k, ")"));
  auto it = values_.find(n.input(k));
  if (it == values_.end() || it->second.kind != Value::kTensor) {
    return NodeError(n, absl::StrCat("takes ", n.input(k), " as its ", role,
                                     ", which must be an initializer or a Constant (pstrain "
                                     "imports weights, not computed tensors)"));
  }
  const onnx::TensorProto* t = it->second.tensor;
  absl::StatusOr<int64_t> elements =
      CheckedElements(DimsOf(*t), absl::StrCat("tensor ", n.input(k), " (its ", role, ")"));
  if (!elements.ok()) return NodeWrap(n, elements.status());
  return t;
}

absl::StatusOr<std::vector<float>> Importer::Floats(const onnx::NodeProto& n,
                                                    const std::string& input,
                                                    const onnx::TensorProto& t,
                                                    absl::string_view role) const {
  absl::StatusOr<std::vector<float>> v =
      FloatValues(t, absl::StrCat("tensor ", input, " (its ", role, ")"));
  if (!v.ok()) return NodeWrap(n, v.status());
  return v;
}

absl::StatusOr<std::vector<int64_t>> Importer::IntsInput(const onnx::NodeProto& n, int k,
                                                         bool* scalar, bool shape_values) const {
  if (!HasInput(n, k)) return NodeError(n, absl::StrCat("has no input ", k));
  auto it = values_.find(n.input(k));
  if (it != values_.end() && it->second.kind == Value::kInts) {
    *scalar = it->second.scalar;
    return it->second.ints;
  }
  if (it != values_.end() && it->second.kind == Value::kTensor) {
    const onnx::TensorProto& t = *it->second.tensor;
    *scalar = t.dims_size() == 0;
    absl::StatusOr<std::vector<int64_t>> v =
        IntValues(t, absl::StrCat("tensor ", n.input(k)), kMaxShapeInts);
    if (!v.ok()) return NodeError(n, absl::StrCat("takes ", v.status().message()));
    for (int64_t x : *v) {
      if (shape_values && x < -1) {
        return NodeError(n, absl::StrCat("takes tensor ", n.input(k), " holding ", x,
                                         "; a shape's sizes are positive, 0 (copied) or -1 "
                                         "(inferred)"));
      }
    }
    return v;
  }
  return NodeError(n, absl::StrCat("takes ", n.input(k),
                                   ", which must be integers pstrain can compute when it reads "
                                   "the model (a Constant, an initializer, or Shape arithmetic)"));
}

std::string Importer::LayerName(const onnx::NodeProto& n, absl::string_view weight,
                                absl::string_view type) {
  std::string base = SanitizeName(LayerOfWeight(weight));
  if (base.empty()) {
    absl::string_view name = n.name();
    while (absl::StartsWith(name, "/")) name.remove_prefix(1);
    const size_t slash = name.rfind('/');
    if (slash != absl::string_view::npos) name = name.substr(0, slash);
    base = SanitizeName(name);
  }
  if (base.empty()) base = std::string(type);
  if (layer_names_.empty()) layer_names_.insert("input");
  std::string name = base;
  if (layer_names_.count(name)) {
    // The next number to try for `base`, so n layers of one base cost O(n log n).
    int& next = next_suffix_[base];
    if (next == 0) next = 1;
    do {
      name = absl::StrCat(base, "_", next++);
    } while (layer_names_.count(name));
  }
  layer_names_.insert(name);
  out_.origins[name] = NodeWhere(n);
  return name;
}

Act Importer::Emit(LayerSpec layer, const Act& in, std::vector<int64_t> dims, bool flat) {
  const std::string previous = out_.spec.layers.empty() ? "input" : out_.spec.layers.back().name;
  if (in.layer != previous) layer.input = in.layer;
  Act act;
  act.layer = layer.name;
  act.dims = std::move(dims);
  act.flat = flat;
  act.sole_use = true;  // SetAct clears it when the node's output has other consumers
  out_.spec.layers.push_back(std::move(layer));
  return act;
}

void Importer::AddWeight(const std::string& layer, const std::string& variable,
                         std::vector<int64_t> shape, std::vector<float> values) {
  out_.weights.push_back({absl::StrCat(layer, "/", variable), std::move(shape), std::move(values)});
}

bool Importer::SingleUse(const std::string& value) const {
  auto it = consumers_.find(value);
  return value != output_name_ && it != consumers_.end() && it->second.size() == 1;
}

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
