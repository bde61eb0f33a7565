// The sparse side of the ONNX export (onnx_export_internal.h): the sparse
// features' inputs, the tables' initializers, and the click models' layers
// (embedding, linear, dot_interaction).
#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "onnx/onnx_export_internal.h"

namespace pstrain {
namespace onnx_export_internal {

SparseGraph::SparseGraph(GraphBuilder& b, const Model& model) : b_(b), model_(model) {
  for (size_t i = 0; i < model.sparse_tables().size(); ++i) {
    table_of_[model.sparse_tables()[i].name] = static_cast<int>(i);
  }
  features_.resize(model.sparse_features().size());
}

void SparseGraph::AddInputs(onnx::GraphProto* graph) {
  for (const std::string& f : model_.sparse_features()) {
    SetTensorType(graph->add_input(), f, onnx::TensorProto::INT64, {-1, -1}, f + "_len");
    b_.Claim(f);
  }
}

absl::Status SparseGraph::AddTables(absl::Span<const TrainedTableRows> tables) {
  for (size_t i = 0; i < tables.size(); ++i) {
    const SparseTableInfo& info = model_.sparse_tables()[i];
    const TrainedTableRows& rows = tables[i];
    const std::string where = absl::StrCat("ONNX export of ", model_.name(), ": table ", info.name,
                                           " (", info.buckets, " buckets of dim ", info.dim, ")");
    if (rows.weights.size() != rows.ids.size() * static_cast<size_t>(info.dim)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", rows.ids.size(), " ids but ",
                                                     rows.weights.size(),
                                                     " weights; each id needs dim weights"));
    }
    std::string raw(static_cast<size_t>(info.buckets * info.dim) * sizeof(float), '\0');
    std::vector<bool> seen(info.buckets);
    const size_t row_bytes = static_cast<size_t>(info.dim) * sizeof(float);
    for (size_t k = 0; k < rows.ids.size(); ++k) {
      const int64_t id = rows.ids[k];
      if (id < 0 || id >= info.buckets || seen[id]) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": trained row id ", id,
            id < 0 || id >= info.buckets ? " is outside [0, buckets)" : " is given twice",
            "; the rows are not this table's"));
      }
      seen[id] = true;
      std::memcpy(raw.data() + id * row_bytes, rows.weights.data() + k * info.dim, row_bytes);
    }
    b_.RawInitializer(info.name, onnx::TensorProto::FLOAT, {info.buckets, info.dim},
                      std::move(raw));
  }
  return absl::OkStatus();
}

const SparseTableInfo* SparseGraph::Table(const std::string& name) {
  auto it = table_of_.find(name);
  if (it == table_of_.end()) return nullptr;
  used_.insert(it->second);
  return &model_.sparse_tables()[it->second];
}

absl::Status SparseGraph::CheckEveryTableUsed() const {
  for (size_t i = 0; i < model_.sparse_tables().size(); ++i) {
    if (used_.count(static_cast<int>(i))) continue;
    return absl::UnimplementedError(
        absl::StrCat("ONNX export of ", model_.name(), ": table ", model_.sparse_tables()[i].name,
                     " is no embedding's table nor a linear layer's table of one feature; "
                     "this build has no ONNX form for it"));
  }
  return absl::OkStatus();
}

std::string SparseGraph::Ids(int feature) {
  FeatureNodes& f = features_[feature];
  if (f.ids.empty()) {
    const std::string& name = model_.sparse_features()[feature];
    f.ids = b_.Node("Max", name + "/ids", {name, b_.Int64Constant("int64_zero", {0})})->output(0);
  }
  return f.ids;
}

std::string SparseGraph::Mask(int feature) {
  FeatureNodes& f = features_[feature];
  if (f.mask.empty()) {
    f.mask = b_.Node("Unsqueeze", model_.sparse_features()[feature] + "/mask",
                     {Valid(feature), b_.Int64Constant("axis_2", {2})})
                 ->output(0);
  }
  return f.mask;
}

std::string SparseGraph::Count(int feature) {
  FeatureNodes& f = features_[feature];
  if (f.count.empty()) {
    onnx::NodeProto* count = b_.Node("ReduceSum", model_.sparse_features()[feature] + "/count",
                                     {Valid(feature), b_.Int64Constant("axis_1", {1})});
    SetInt(count, "keepdims", 1);
    f.count = count->output(0);
  }
  return f.count;
}

std::string SparseGraph::Divisor(int feature, bool sqrt) {
  FeatureNodes& f = features_[feature];
  const std::string& name = model_.sparse_features()[feature];
  if (f.count_at_least_1.empty()) {
    f.count_at_least_1 =
        b_.Node("Max", name + "/count_at_least_1", {Count(feature), b_.FloatConstant("one", 1.0f)})
            ->output(0);
  }
  if (!sqrt) return f.count_at_least_1;
  if (f.sqrt_count.empty()) {
    f.sqrt_count = b_.Node("Sqrt", name + "/sqrt_count", {f.count_at_least_1})->output(0);
  }
  return f.sqrt_count;
}

int SparseGraph::FeatureIndex(const std::string& name) const {
  const std::vector<std::string>& features = model_.sparse_features();
  auto it = std::find(features.begin(), features.end(), name);
  return it == features.end() ? -1 : static_cast<int>(it - features.begin());
}

std::string SparseGraph::SumOfRows(const SparseTableInfo& table, int feature,
                                   const std::string& prefix, const std::string& sum) {
  onnx::NodeProto* rows = b_.Node("Gather", prefix + "/rows", {table.name, Ids(feature)});
  SetInt(rows, "axis", 0);
  onnx::NodeProto* masked = b_.Node("Mul", prefix + "/masked", {rows->output(0), Mask(feature)});
  onnx::NodeProto* reduced =
      b_.Node("ReduceSum", sum, {masked->output(0), b_.Int64Constant("axis_1", {1})});
  SetInt(reduced, "keepdims", 0);
  return reduced->output(0);
}

std::string SparseGraph::Valid(int feature) {
  FeatureNodes& f = features_[feature];
  if (f.valid.empty()) {
    const std::string& name = model_.sparse_features()[feature];
    onnx::NodeProto* valid =
        b_.Node("GreaterOrEqual", name + "/is_id", {name, b_.Int64Constant("int64_zero", {0})});
    onnx::NodeProto* cast = b_.Node("Cast", name + "/valid", {valid->output(0)});
    SetInt(cast, "to", onnx::TensorProto::FLOAT);
    f.valid = cast->output(0);
  }
  return f.valid;
}

// embedding: the combiner over the rows of the example's ids.
absl::StatusOr<Activation> AddEmbedding(GraphBuilder& b, SparseGraph& sparse, const LayerSpec& l) {
  // A shared table is named by `table:`; a layer's own is "<layer>/embeddings".
  const SparseTableInfo* table = sparse.Table(l.table.empty() ? l.name + "/embeddings" : l.table);
  if (table == nullptr) return LayerError(b, l, "has no table in the model");
  const int feature = sparse.FeatureIndex(l.feature);
  if (feature < 0) return LayerError(b, l, "reads a feature the model does not have");
  if (l.max_length > 0) return AddSequenceEmbedding(b, sparse, l, *table, feature);
  if (l.combiner == "sum") {
    return Activation{sparse.SumOfRows(*table, feature, l.name, l.name), {table->dim}};
  }
  const std::string sum = sparse.SumOfRows(*table, feature, l.name, l.name + "/sum");
  const std::string divisor = sparse.Divisor(feature, l.combiner == "sqrtn");
  return Activation{b.Node("Div", l.name, {sum, divisor})->output(0), {table->dim}};
}

// linear: per feature the sum of its weights at the example's ids, summed,
// plus the bias.
absl::StatusOr<Activation> AddLinear(GraphBuilder& b, SparseGraph& sparse, const LayerSpec& l) {
  std::vector<std::string> terms;
  if (l.use_bias) {
    PSTRAIN_ASSIGN_OR_RETURN(terms.emplace_back(), b.Variable(l.name + "/bias", {1}));
  }
  for (const std::string& feature : l.features) {
    const SparseTableInfo* table = sparse.Table(l.name + "/" + feature);
    if (table == nullptr) return LayerError(b, l, "has no table in the model for " + feature);
    const std::string prefix = l.name + "/" + feature;
    terms.push_back(sparse.SumOfRows(*table, table->feature, prefix, prefix + "/sum"));
  }
  return Activation{b.Node("Sum", l.name, terms)->output(0), {1}};
}

// dot_interaction: x_0 followed by x_i . x_j for i > j, in DLRM's order,
// from the [k, k] Gram matrix of the stacked inputs.
absl::StatusOr<Activation> AddDotInteraction(GraphBuilder& b, const LayerSpec& l,
                                             const std::vector<Activation>& in) {
  const int64_t k = static_cast<int64_t>(in.size());
  const int64_t d = in[0].shape.size() == 1 ? in[0].shape[0] : 0;
  for (const Activation& a : in) {
    if (a.shape != Shape{d} || d == 0) {
      return LayerError(b, l, "takes inputs that are not flat and of one size");
    }
  }
  std::vector<std::string> tensors;
  for (const Activation& a : in) tensors.push_back(a.tensor);
  onnx::NodeProto* concat = b.Node("Concat", l.name + "/concat", tensors);
  SetInt(concat, "axis", 1);
  onnx::NodeProto* stacked =
      b.Node("Reshape", l.name + "/stacked",
             {concat->output(0), b.Int64s(l.name + "/stacked_shape", {0, k, d})});
  onnx::NodeProto* transposed = b.Node("Transpose", l.name + "/transposed", {stacked->output(0)});
  SetInts(transposed, "perm", {0, 2, 1});
  onnx::NodeProto* dots =
      b.Node("MatMul", l.name + "/dots", {stacked->output(0), transposed->output(0)});
  onnx::NodeProto* flat = b.Node("Reshape", l.name + "/flat_dots",
                                 {dots->output(0), b.Int64s(l.name + "/flat_shape", {0, k * k})});
  std::vector<int64_t> pairs;
  for (int64_t i = 1; i < k; ++i) {
    for (int64_t j = 0; j < i; ++j) pairs.push_back(i * k + j);
  }
  onnx::NodeProto* gather = b.Node("Gather", l.name + "/pairs",
                                   {flat->output(0), b.Int64s(l.name + "/pair_indices", pairs)});
  SetInt(gather, "axis", 1);
  onnx::NodeProto* out = b.Node("Concat", l.name, {in[0].tensor, gather->output(0)});
  SetInt(out, "axis", 1);
  return Activation{out->output(0), {d + k * (k - 1) / 2}};
}

}  // namespace onnx_export_internal
}  // namespace pstrain
