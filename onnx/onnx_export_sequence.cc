// Sequences in the ONNX export (onnx_export_internal.h): sequence
// embeddings and their masks, multi_head_attention, sequence_pool and
// din_attention, computing what models/embedding.cc, attention.cc,
// sequence_pool.cc and din_attention.cc do at inference.
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "onnx/onnx_export_internal.h"

namespace pstrain {
namespace onnx_export_internal {
namespace {

// int64 [L]: 0, 1, ..., L - 1, made once per L.
std::string Range(GraphBuilder& b, int64_t length) {
  std::vector<int64_t> range(length);
  std::iota(range.begin(), range.end(), int64_t{0});
  return b.Int64Constant(absl::StrCat("range_", length), range);
}

std::string Out(onnx::NodeProto* node) { return node->output(0); }

// `m`'s mask shaped for attention's scores [N, heads, Lq, Lk]: [N, 1, 1, L].
std::string KeyMask(GraphBuilder& b, SequenceMask& m) {
  if (m.keys.empty()) {
    m.keys = Out(b.Node("Reshape", m.layer + "/key_mask",
                        {m.mask, b.Int64s(m.layer + "/key_mask_shape", {0, 1, 1, m.length})}));
  }
  return m.keys;
}

// x [N, L, in] times the variable "<layer>/<part>/kernel" [in, out] plus
// its bias: nodes "<name>/matmul" and `name`.
absl::StatusOr<std::string> Project(GraphBuilder& b, const std::string& variables,
                                    const std::string& name, const std::string& x, int64_t in,
                                    int64_t out) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::string kernel, b.Variable(variables + "/kernel", {in, out}));
  PSTRAIN_ASSIGN_OR_RETURN(const std::string bias, b.Variable(variables + "/bias", {out}));
  const std::string product = Out(b.Node("MatMul", name + "/matmul", {x, kernel}));
  return Out(b.Node("Add", name, {product, bias}));
}

// x [N, L, heads x per_head] as [N, heads, L, per_head] (`perm` {0, 2, 1,
// 3}) or, for keys, [N, heads, per_head, L] ({0, 2, 3, 1}).
std::string SplitHeads(GraphBuilder& b, const std::string& name, const std::string& x,
                       int64_t length, int64_t heads, int64_t per_head,
                       const std::vector<int64_t>& perm) {
  const std::string split =
      Out(b.Node("Reshape", name + "/split",
                 {x, b.Int64s(name + "/split_shape", {0, length, heads, per_head})}));
  onnx::NodeProto* transpose = b.Node("Transpose", name + "/heads", {split});
  SetInts(transpose, "perm", perm);
  return Out(transpose);
}

}  // namespace

absl::StatusOr<Activation> AddSequenceEmbedding(GraphBuilder& b, SparseGraph& sparse,
                                                const LayerSpec& l, const SparseTableInfo& table,
                                                int feature) {
  const int64_t length = l.max_length;
  const std::string& p = l.name;
  const std::string zero = b.Int64Constant("int64_zero", {0});
  const std::string one = b.Int64Constant("int64_one", {1});
  const std::string max_length = b.Int64Constant(absl::StrCat("int64_", length), {length});
  auto m = std::make_shared<SequenceMask>();
  m->layer = l.name;
  m->length = length;
  // The example's last L values: input columns first .. first + L - 1, with
  // first = max(values - L, 0), from the input padded with L more -1s.
  onnx::NodeProto* values = b.Node("Cast", p + "/values", {sparse.Count(feature)});
  SetInt(values, "to", onnx::TensorProto::INT64);
  const std::string excess = Out(b.Node("Sub", p + "/excess", {Out(values), max_length}));
  const std::string first = Out(b.Node("Max", p + "/first", {excess, zero}));
  const std::string take = Out(b.Node("Add", p + "/take", {first, Range(b, length)}));
  const std::string padded = Out(b.Node(
      "Pad", p + "/padded",
      {l.feature, b.Int64s(p + "/pads", {0, 0, 0, length}), b.Int64Scalar(p + "/pad_value", -1)}));
  onnx::NodeProto* ids = b.Node("GatherElements", p + "/ids", {padded, take});
  SetInt(ids, "axis", 1);
  // Positions k < count hold values: the mask and every count agree.
  m->count = Out(b.Node("Min", p + "/count", {Out(values), max_length}));
  const std::string is_value = Out(b.Node("Less", p + "/is_value", {Range(b, length), m->count}));
  onnx::NodeProto* valid = b.Node("Cast", p + "/valid", {is_value});
  SetInt(valid, "to", onnx::TensorProto::FLOAT);
  m->mask = Out(b.Node("Unsqueeze", p + "/mask", {Out(valid), b.Int64Constant("axis_2", {2})}));
  onnx::NodeProto* count_float = b.Node("Cast", p + "/count_float", {m->count});
  SetInt(count_float, "to", onnx::TensorProto::FLOAT);
  m->count_float = Out(count_float);

  const std::string row_ids = Out(b.Node("Max", p + "/row_ids", {Out(ids), zero}));
  onnx::NodeProto* rows = b.Node("Gather", p + "/rows", {table.name, row_ids});
  SetInt(rows, "axis", 0);
  std::string x = Out(rows);
  if (l.positions != "none") {
    PSTRAIN_ASSIGN_OR_RETURN(const std::string positions,
                             b.Variable(l.name + "/positions", {length, table.dim}));
    std::string added = positions;  // from_start: position k's row at k
    if (l.positions == "from_end") {
      // Position k of n values is n - 1 - k steps back (0 for padding).
      const std::string last = Out(b.Node("Sub", p + "/last", {m->count, one}));
      const std::string back = Out(b.Node("Sub", p + "/steps_back", {last, Range(b, length)}));
      const std::string at = Out(b.Node("Max", p + "/position_ids", {back, zero}));
      onnx::NodeProto* gathered = b.Node("Gather", p + "/position_rows", {positions, at});
      SetInt(gathered, "axis", 0);
      added = Out(gathered);
    }
    x = Out(b.Node("Add", p + "/with_positions", {x, added}));
  }
  return Activation{Out(b.Node("Mul", l.name, {x, m->mask})), {length, table.dim}, m};
}

absl::StatusOr<Activation> AddAttention(GraphBuilder& b, const LayerSpec& l,
                                        const std::vector<Activation>& in) {
  const Activation& keys = in[0];
  const Activation& query = in.size() > 1 ? in[1] : in[0];
  if (keys.shape.size() != 2 || query.shape.empty() || query.shape.size() > 2) {
    return LayerError(b, l, "takes inputs that are not a sequence [L, d] and a query");
  }
  const int64_t heads = l.heads, key_dim = l.key_dim;
  const int64_t value_dim = l.value_dim > 0 ? l.value_dim : l.key_dim;
  const int64_t k_len = keys.shape[0], k_dim = keys.shape[1];
  const bool flat_query = query.shape.size() == 1;
  const int64_t q_len = flat_query ? 1 : query.shape[0], q_dim = query.shape.back();
  const std::string& n = l.name;
  // A query [N, dq] is a sequence of one.
  const std::string xq = flat_query ? Out(b.Node("Unsqueeze", n + "/query_sequence",
                                                 {query.tensor, b.Int64Constant("axis_1", {1})}))
                                    : query.tensor;
  PSTRAIN_ASSIGN_OR_RETURN(const std::string q,
                           Project(b, n + "/query", n + "/query", xq, q_dim, heads * key_dim));
  PSTRAIN_ASSIGN_OR_RETURN(const std::string k,
                           Project(b, n + "/key", n + "/key", keys.tensor, k_dim, heads * key_dim));
  PSTRAIN_ASSIGN_OR_RETURN(const std::string v, Project(b, n + "/value", n + "/value", keys.tensor,
                                                        k_dim, heads * value_dim));
  const std::string qh = SplitHeads(b, n + "/query", q, q_len, heads, key_dim, {0, 2, 1, 3});
  const std::string kh = SplitHeads(b, n + "/key", k, k_len, heads, key_dim, {0, 2, 3, 1});
  const std::string vh = SplitHeads(b, n + "/value", v, k_len, heads, value_dim, {0, 2, 1, 3});
  const std::string scores = Out(b.Node("MatMul", n + "/scores", {qh, kh}));
  const float scale = 1.0f / std::sqrt(static_cast<float>(key_dim));
  const std::string scaled =
      Out(b.Node("Mul", n + "/scaled", {scores, b.FloatScalar(n + "/scale", scale)}));

  // Which keys a query may attend to: those of the keys' valid positions
  // and, when causal, at or before its own.
  std::string allowed;
  if (keys.mask != nullptr) allowed = KeyMask(b, *keys.mask);
  if (l.causal) {
    // [Lq, Lk]: key j at or before query i, made in the graph (a constant
    // would be Lq x Lk floats).
    const std::string keys_at = Out(b.Node("Unsqueeze", n + "/key_positions",
                                           {Range(b, k_len), b.Int64Constant("axis_0", {0})}));
    const std::string queries_at = Out(b.Node("Unsqueeze", n + "/query_positions",
                                              {Range(b, q_len), b.Int64Constant("axis_1", {1})}));
    const std::string before =
        Out(b.Node("LessOrEqual", n + "/at_or_before", {keys_at, queries_at}));
    onnx::NodeProto* causal = b.Node("Cast", n + "/causal", {before});
    SetInt(causal, "to", onnx::TensorProto::FLOAT);
    allowed =
        allowed.empty() ? Out(causal) : Out(b.Node("Mul", n + "/allowed", {allowed, Out(causal)}));
  }
  std::string weights;
  if (allowed.empty()) {
    onnx::NodeProto* softmax = b.Node("Softmax", n + "/weights", {scaled});
    SetInt(softmax, "axis", -1);
    weights = Out(softmax);
  } else {
    // The others' scores far below (exp gives 0), and their weights zeroed:
    // a query with no key to attend to gets no value, as in pstrain.
    onnx::NodeProto* is_allowed = b.Node("Cast", n + "/is_allowed", {allowed});
    SetInt(is_allowed, "to", onnx::TensorProto::BOOL);
    const std::string masked =
        Out(b.Node("Where", n + "/masked_scores",
                   {Out(is_allowed), scaled, b.FloatConstant("minus_1e9", -1e9f)}));
    onnx::NodeProto* softmax = b.Node("Softmax", n + "/softmax", {masked});
    SetInt(softmax, "axis", -1);
    weights = Out(b.Node("Mul", n + "/weights", {Out(softmax), allowed}));
  }
  const std::string context = Out(b.Node("MatMul", n + "/context", {weights, vh}));
  onnx::NodeProto* by_position = b.Node("Transpose", n + "/context_positions", {context});
  SetInts(by_position, "perm", {0, 2, 1, 3});
  const std::string joined =
      Out(b.Node("Reshape", n + "/context_joined",
                 {Out(by_position), b.Int64s(n + "/joined_shape", {0, q_len, heads * value_dim})}));
  PSTRAIN_ASSIGN_OR_RETURN(std::string y, Project(b, n + "/output", flat_query ? n + "/output" : n,
                                                  joined, heads * value_dim, q_dim));
  if (flat_query) {
    y = Out(b.Node("Squeeze", n, {y, b.Int64Constant("axis_1", {1})}));
  }
  return Activation{y, query.shape};
}

absl::StatusOr<Activation> AddSequencePool(GraphBuilder& b, const LayerSpec& l,
                                           const Activation& x) {
  if (x.shape.size() != 2) return LayerError(b, l, "takes an input that is not a sequence");
  const int64_t length = x.shape[0];
  const Shape shape = {x.shape[1]};
  const std::string& n = l.name;
  const std::string axis_1 = b.Int64Constant("axis_1", {1});
  const SequenceMask* m = x.mask.get();
  // Padded positions hold zeros (every masked output is zeroed), so sums
  // need no mask.
  if (l.mode == "sum" || l.mode == "mean") {
    onnx::NodeProto* sum =
        b.Node("ReduceSum", l.mode == "sum" ? n : n + "/sum", {x.tensor, axis_1});
    SetInt(sum, "keepdims", 0);
    if (l.mode == "sum") return Activation{Out(sum), shape};
    // Divided by the valid positions, at least 1 (none gives zeros).
    const std::string divisor = m != nullptr
                                    ? Out(b.Node("Max", n + "/count_at_least_1",
                                                 {m->count_float, b.FloatConstant("one", 1.0f)}))
                                    : b.FloatScalar(n + "/length", static_cast<float>(length));
    return Activation{Out(b.Node("Div", n, {Out(sum), divisor})), shape};
  }
  if (l.mode == "max") {
    std::string from = x.tensor;
    if (m != nullptr) {
      onnx::NodeProto* valid = b.Node("Cast", n + "/is_valid", {m->mask});
      SetInt(valid, "to", onnx::TensorProto::BOOL);
      from = Out(b.Node(
          "Where", n + "/masked",
          {Out(valid), x.tensor, b.FloatConstant("lowest", std::numeric_limits<float>::lowest())}));
    }
    onnx::NodeProto* max = b.Node("ReduceMax", m != nullptr ? n + "/max" : n, {from});
    SetInts(max, "axes", {1});
    SetInt(max, "keepdims", 0);
    if (m == nullptr) return Activation{Out(max), shape};
    // An example without values gives zeros.
    const std::string any =
        Out(b.Node("Min", n + "/any", {m->count_float, b.FloatConstant("one", 1.0f)}));
    return Activation{Out(b.Node("Mul", n, {Out(max), any})), shape};
  }
  if (l.mode == "last") {
    if (m == nullptr) {
      onnx::NodeProto* last =
          b.Node("Gather", n, {x.tensor, b.Int64Scalar(n + "/last", length - 1)});
      SetInt(last, "axis", 1);
      return Activation{Out(last), shape};
    }
    // The position count - 1 (none for an example without values).
    const std::string last =
        Out(b.Node("Sub", n + "/last", {m->count, b.Int64Constant("int64_one", {1})}));
    const std::string is_last = Out(b.Node("Equal", n + "/is_last", {Range(b, length), last}));
    onnx::NodeProto* at_last = b.Node("Cast", n + "/at_last", {is_last});
    SetInt(at_last, "to", onnx::TensorProto::FLOAT);
    const std::string select =
        Out(b.Node("Unsqueeze", n + "/select", {Out(at_last), b.Int64Constant("axis_2", {2})}));
    const std::string picked = Out(b.Node("Mul", n + "/picked", {x.tensor, select}));
    onnx::NodeProto* sum = b.Node("ReduceSum", n, {picked, axis_1});
    SetInt(sum, "keepdims", 0);
    return Activation{Out(sum), shape};
  }
  return LayerError(b, l, "has a mode the ONNX export does not know");
}

absl::StatusOr<Activation> AddDinAttention(GraphBuilder& b, const LayerSpec& l,
                                           const std::vector<Activation>& in) {
  if (in.size() != 2 || in[0].shape.size() != 2 || in[1].shape != Shape{in[0].shape[1]}) {
    return LayerError(b, l, "takes inputs that are not a history [L, d] and a candidate [d]");
  }
  const Activation& history = in[0];
  const int64_t length = history.shape[0], d = history.shape[1];
  const std::string& n = l.name;
  const std::string candidate =
      Out(b.Node("Unsqueeze", n + "/candidate", {in[1].tensor, b.Int64Constant("axis_1", {1})}));
  const std::string tiled = Out(b.Node("Expand", n + "/candidates",
                                       {candidate, b.Int64s(n + "/expand_shape", {1, length, 1})}));
  const std::string difference = Out(b.Node("Sub", n + "/difference", {history.tensor, tiled}));
  const std::string product = Out(b.Node("Mul", n + "/product", {history.tensor, tiled}));
  onnx::NodeProto* unit_input =
      b.Node("Concat", n + "/unit_input", {history.tensor, tiled, difference, product});
  SetInt(unit_input, "axis", 2);
  PSTRAIN_ASSIGN_OR_RETURN(const std::string hidden, Project(b, n + "/hidden", n + "/hidden",
                                                             Out(unit_input), 4 * d, l.units));
  PSTRAIN_ASSIGN_OR_RETURN(const Activation activated,
                           AddActivation(b, l, Activation{hidden, {length, l.units}}));
  PSTRAIN_ASSIGN_OR_RETURN(std::string scores,
                           Project(b, n + "/score", n + "/score", activated.tensor, l.units, 1));
  // Padding weighs nothing.
  if (history.mask != nullptr) {
    scores = Out(b.Node("Mul", n + "/weights", {scores, history.mask->mask}));
  }
  const std::string weighted = Out(b.Node("Mul", n + "/weighted", {history.tensor, scores}));
  onnx::NodeProto* sum = b.Node("ReduceSum", n, {weighted, b.Int64Constant("axis_1", {1})});
  SetInt(sum, "keepdims", 0);
  return Activation{Out(sum), {d}};
}

}  // namespace onnx_export_internal
}  // namespace pstrain
