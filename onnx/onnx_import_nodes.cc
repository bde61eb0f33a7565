// The importer's plumbing (onnx_import_internal.h): ONNX attributes, the
// padding pstrain matches, errors that name the node, a node's inputs as
// activations, tensors or integers, and the layers and weights it appends.
#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "onnx/onnx_import_internal.h"
#include "onnx/onnx_import_tensors.h"

namespace pstrain {
namespace onnx_import_internal {
namespace {

absl::Status AttrTypeError(const onnx::AttributeProto& a, absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat("has attribute ", a.name(), " of type ",
                                                 onnx::AttributeProto_AttributeType_Name(a.type()),
                                                 "; it is ", want));
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

const onnx::AttributeProto* FindAttr(const onnx::NodeProto& n, absl::string_view name) {
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
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

}  // namespace onnx_import_internal
}  // namespace pstrain
