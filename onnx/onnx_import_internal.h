#ifndef PSTRAIN_ONNX_ONNX_IMPORT_INTERNAL_H_
#define PSTRAIN_ONNX_ONNX_IMPORT_INTERNAL_H_

// Internal to onnx_import*.cc: the importer's state while it walks a graph.
// onnx_import.cc reads the model, orders and prunes the nodes, finds the
// input and the output; onnx_import_ops.cc and onnx_import_shape_ops.cc turn
// each node into spec layers, with onnx_import_nodes.cc's helpers.

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "onnx/onnx.pb.h"
#include "onnx/onnx_import.h"

// For the Convert* methods, where `n` is the node:
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

// In shape arithmetic (Shape, Gather, ...): the batch size, not known here.
inline constexpr int64_t kBatchDim = -2;

// The most pstrain imports.
inline constexpr int kMaxKernel = 64;         // conv2d's kernel and strides
inline constexpr int kMaxPool = 1024;         // pools' window and strides
inline constexpr int64_t kMaxSize = 1 << 20;  // filters, units
inline constexpr int64_t kMaxShapeInts = 64;  // shape arithmetic's values

// Attributes of `n` (onnx_import_nodes.cc). Absent, `name` gives `def`, an
// empty IntsAttr or a null FindAttr; of another type, an InvalidArgument
// whose message follows the node's name (NodeError).
const onnx::AttributeProto* FindAttr(const onnx::NodeProto& n, absl::string_view name);
absl::StatusOr<int64_t> IntAttr(const onnx::NodeProto& n, absl::string_view name, int64_t def);
absl::StatusOr<float> FloatAttr(const onnx::NodeProto& n, absl::string_view name, float def);
absl::StatusOr<std::vector<int64_t>> IntsAttr(const onnx::NodeProto& n, absl::string_view name);
absl::StatusOr<std::string> StringAttr(const onnx::NodeProto& n, absl::string_view name,
                                       std::string def);
// One value of a 2-element INTS attribute whose elements must be equal
// (strides, kernel_shape, dilations).
absl::StatusOr<int64_t> SquareAttr(const onnx::NodeProto& n, absl::string_view name, int64_t def);

// "[N, -1]": integers of shape arithmetic, kBatchDim as N.
std::string IntsText(const std::vector<int64_t>& v);
// The features per example of an activation of `dims`; refused over
// kMaxTensorElements.
absl::StatusOr<int64_t> Features(const std::vector<int64_t>& dims);
// The row of an NCHW-flattened [C, H, W] feature that pstrain's HWC flatten
// has at `row`; `row` itself when `chw` is empty.
int64_t OnnxRow(int64_t row, const std::vector<int64_t>& chw);
// pstrain's padding (valid, same, or with `allow_fixed` fixed) that places
// the windows of `n` (pads, auto_pad, ceil_mode) as ONNX does on an
// [in_h, in_w] input; the output's [h, w] in `out`.
absl::StatusOr<std::string> MatchPadding(const onnx::NodeProto& n, int64_t in_h, int64_t in_w,
                                         int64_t k, int64_t s, bool allow_fixed,
                                         std::vector<int64_t>* out);

// `name` as a spec name: letters, digits, _ - . and / (not leading,
// trailing or doubled), at most 100 characters; "" when nothing is left.
std::string SanitizeName(absl::string_view name);

// An activation: what a pstrain layer gives.
struct Act {
  std::string layer;          // the spec layer giving it; "input" for the model's input
  std::vector<int64_t> dims;  // per example, in ONNX's order: {C, H, W} or {F}
  bool flat = false;          // pstrain holds it as [F] (after flatten, dense, global pool)
  // Flat from an NCHW flatten: {C, H, W}, the order of its features (pstrain's
  // are in HWC order); empty when the orders agree.
  std::vector<int64_t> chw;
  bool nhwc = false;     // a Transpose perm [0, 2, 3, 1] of it: only Flatten takes it
  bool softmax = false;  // after the trailing Softmax: only the output takes it
  // Every ONNX value that holds this layer's output so far (the node's that
  // made it, then Identity, a flat Flatten, a one-input Concat ... passing it
  // on) feeds exactly one node and is not the graph's output: only then may
  // an activation fuse into the layer, as nothing else sees its output.
  bool sole_use = false;
};

// What a name in the graph holds.
struct Value {
  enum Kind { kAct, kTensor, kInts };
  Kind kind = kAct;
  Act act;                                    // kAct
  const onnx::TensorProto* tensor = nullptr;  // kTensor: an initializer or Constant
  std::vector<int64_t> ints;                  // kInts: shape arithmetic's values
  bool scalar = false;                        // kInts: rank 0

  static Value OfAct(Act a) {
    Value v;
    v.act = std::move(a);
    return v;
  }
  static Value OfTensor(const onnx::TensorProto* t) {
    Value v;
    v.kind = kTensor;
    v.tensor = t;
    return v;
  }
  static Value OfInts(std::vector<int64_t> ints, bool scalar) {
    Value v;
    v.kind = kInts;
    v.ints = std::move(ints);
    v.scalar = scalar;
    return v;
  }
};

class Importer {
 public:
  explicit Importer(std::string_view source) : source_(source) {}
  absl::StatusOr<ImportedOnnx> Run(std::string_view bytes);

 private:
  // onnx_import.cc
  absl::Status CheckVersions();
  absl::Status IndexGraph();
  absl::Status ChooseOutput();
  absl::Status MarkLive();
  absl::Status SetUpInput();
  absl::Status Finish();

  // onnx_import_ops.cc
  absl::Status Convert(int index);
  absl::Status ConvertConv(const onnx::NodeProto& n);
  absl::Status ConvertGemm(const onnx::NodeProto& n);
  absl::Status ConvertMatMul(const onnx::NodeProto& n);
  absl::Status ConvertActivation(const onnx::NodeProto& n);
  absl::Status ConvertPool(const onnx::NodeProto& n);
  absl::Status ConvertGlobalPool(const onnx::NodeProto& n);
  absl::Status ConvertBatchNorm(const onnx::NodeProto& n);
  absl::Status ConvertDropout(const onnx::NodeProto& n);
  // onnx_import_shape_ops.cc
  absl::Status ConvertFlatten(const onnx::NodeProto& n, const Act& in);
  absl::Status ConvertReshape(const onnx::NodeProto& n);
  absl::Status ConvertAdd(const onnx::NodeProto& n);
  absl::Status ConvertConcat(const onnx::NodeProto& n);
  absl::Status ConvertPad(const onnx::NodeProto& n);
  absl::Status ConvertTranspose(const onnx::NodeProto& n);
  absl::Status ConvertSoftmax(const onnx::NodeProto& n);
  absl::Status ConvertConstant(const onnx::NodeProto& n);
  absl::Status ConvertShapeOp(const onnx::NodeProto& n);

  // Helpers (onnx_import_nodes.cc).
  absl::Status Error(absl::string_view message) const;  // InvalidArgument, source first
  absl::Status Wrap(const absl::Status& s) const;       // the same code, source first
  // The same code, the source and the node first.
  absl::Status NodeWrap(const onnx::NodeProto& n, const absl::Status& s) const;
  absl::Status NodeError(const onnx::NodeProto& n, absl::string_view message) const;
  std::string NodeWhere(const onnx::NodeProto& n) const;
  // Refuses an attribute not in `allowed`.
  absl::Status CheckAttributes(const onnx::NodeProto& n,
                               const std::vector<std::string>& allowed) const;
  absl::StatusOr<Act> ActInput(const onnx::NodeProto& n, int k) const;
  absl::StatusOr<const onnx::TensorProto*> TensorInput(const onnx::NodeProto& n, int k,
                                                       absl::string_view role) const;
  // `t`'s floats, `n`'s `input` as its `role`; errors name the node and the
  // tensor and keep FloatValues' code.
  absl::StatusOr<std::vector<float>> Floats(const onnx::NodeProto& n, const std::string& input,
                                            const onnx::TensorProto& t,
                                            absl::string_view role) const;
  // Input k's integers. When they are `shape_values` (what flows into a
  // Reshape's shape: not indices, axes or pads) a constant's must be >= -1,
  // so no file's number passes as the batch size (kBatchDim).
  absl::StatusOr<std::vector<int64_t>> IntsInput(const onnx::NodeProto& n, int k, bool* scalar,
                                                 bool shape_values) const;
  bool HasInput(const onnx::NodeProto& n, int k) const {
    return k < n.input_size() && !n.input(k).empty();
  }
  // The layer's name: from its weight's name, or else the node's.
  std::string LayerName(const onnx::NodeProto& n, absl::string_view weight, absl::string_view type);
  // Appends `layer` taking `in` (sets its input when that is not the
  // previous layer's output) and returns the act it gives.
  Act Emit(LayerSpec layer, const Act& in, std::vector<int64_t> dims, bool flat);
  void AddWeight(const std::string& layer, const std::string& variable, std::vector<int64_t> shape,
                 std::vector<float> values);
  // `n` gives `act` (a new layer's, or one it passes on unchanged).
  void SetAct(const onnx::NodeProto& n, Act act) {
    act.sole_use = act.sole_use && SingleUse(n.output(0));
    values_[n.output(0)] = Value::OfAct(std::move(act));
  }
  // Whether `value` feeds only one node and is not a graph output.
  bool SingleUse(const std::string& value) const;

  const std::string source_;
  onnx::ModelProto model_;
  int64_t opset_ = 0;
  std::map<std::string, const onnx::TensorProto*> initializers_;
  std::map<std::string, Value> values_;
  std::map<std::string, int> producer_;                // value -> node index
  std::map<std::string, std::vector<int>> consumers_;  // value -> live node indices
  std::vector<int> order_;                             // every node, in an order of evaluation
  std::vector<bool> live_;                             // leads to the output
  std::vector<bool> done_;                             // handled already (input, folded Add)
  std::string input_name_;                             // the graph input
  std::string output_name_;                            // the graph output taken
  std::set<std::string> layer_names_;
  std::map<std::string, int> next_suffix_;  // base name -> the next _<i> to try
  std::deque<onnx::TensorProto> owned_;     // Constant values made from value_float(s) etc.
  ImportedOnnx out_;
};

}  // namespace onnx_import_internal
}  // namespace pstrain

#endif  // PSTRAIN_ONNX_ONNX_IMPORT_INTERNAL_H_
