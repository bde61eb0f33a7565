#include "models/embedding.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {
namespace {

// The weight of each of an example's `n` values under `combiner`.
float CombinerWeight(Combiner combiner, int64_t n) {
  switch (combiner) {
    case Combiner::kSum:
      return 1.0f;
    case Combiner::kMean:
      return 1.0f / static_cast<float>(n);
    case Combiner::kSqrtn:
      return 1.0f / std::sqrt(static_cast<float>(n));
  }
  return 1.0f;
}

// A programmer's error (the model hands every sparse layer its step).
void RequireRows(const SparseStep* sparse, const std::string& layer) {
  if (sparse != nullptr) return;
  std::fprintf(stderr, "%s: a sparse layer's pass needs the batch's rows (SparseStep)\n",
               layer.c_str());
  std::abort();
}

// The input gradient of a sparse layer: its input is only a place in the
// graph, so zeros.
void ZeroInputGradient(const Tensor& in, Tensor* din) {
  if (din == nullptr) return;
  din->Resize(in.shape());
  din->SetZero();
}

}  // namespace

Embedding::Embedding(std::string name, const EmbeddingOptions& options)
    : Layer(std::move(name)), options_(options) {}

absl::StatusOr<Shape> Embedding::Build(const Shape& /*input*/) {
  if (options_.feature.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": embedding needs a feature"));
  }
  if (options_.dim <= 0 || options_.dim > kMaxEmbeddingDim || options_.buckets < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(), ": embedding needs dim in [1, ", kMaxEmbeddingDim, "] and buckets >= 0, got dim ",
        options_.dim, " and buckets ", options_.buckets));
  }
  if (options_.max_length < 0 || options_.max_length > kMaxSequenceLength) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": a sequence's max_length is 1 to ",
                                                   kMaxSequenceLength, ", got ",
                                                   options_.max_length));
  }
  if (options_.max_length == 0) return Shape{options_.dim};
  return Shape{options_.max_length, options_.dim};
}

std::vector<VariableSpec> Embedding::Variables() const {
  if (options_.max_length == 0 || options_.positions == Positions::kNone) return {};
  VariableSpec positions;
  positions.name = "positions";
  positions.shape = {options_.max_length, options_.dim};
  positions.initializer.kind = Initializer::kTruncatedNormal;
  positions.initializer.stddev = 0.02f;  // BERT's
  return {positions};
}

std::vector<SparseTableSpec> Embedding::SparseTables() const {
  return {{"embeddings",
           options_.feature,
           options_.dim,
           options_.buckets,
           options_.initializer,
           {},
           options_.table}};
}

void Embedding::BindSparse(std::vector<int> tables, std::vector<int> features) {
  table_ = tables[0];
  feature_ = features[0];
}

void Embedding::Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) {
  RequireRows(args.sparse, name());
  const int64_t batch = in.dim(0);
  const int64_t dim = options_.dim;
  const TableStep& table = args.sparse->tables[table_];
  const std::vector<int64_t>& offsets = args.sparse->offsets[feature_];
  // This feature's values among the table's (a shared table's are several features').
  const int32_t* slots = table.slots.data() + args.sparse->FirstSlot(table_, feature_);
  if (options_.max_length > 0) {
    const float* positions =
        options_.positions != Positions::kNone ? args.params + offset(0) : nullptr;
    SequenceForward(table, slots, offsets, batch, positions, out);
    return;
  }
  out->Resize({batch, dim});
  out->SetZero();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = offsets[b + 1] - offsets[b];
    if (n == 0) continue;
    const float w = CombinerWeight(options_.combiner, n);
    float* o = out->data() + b * dim;
    for (int64_t k = offsets[b]; k < offsets[b + 1]; ++k) {
      const float* row = table.rows.data() + int64_t{slots[k]} * dim;
      for (int64_t j = 0; j < dim; ++j) o[j] += row[j];
    }
    if (w != 1.0f) {
      for (int64_t j = 0; j < dim; ++j) o[j] *= w;
    }
  }
}

void Embedding::Backward(const Tensor& in, const Tensor& /*out*/, const Tensor& dout, Tensor* din,
                         const BackwardArgs& args) {
  RequireRows(args.sparse, name());
  const int64_t batch = in.dim(0);
  const int64_t dim = options_.dim;
  TableStep& table = args.sparse->tables[table_];
  const std::vector<int64_t>& offsets = args.sparse->offsets[feature_];
  const int32_t* slots = table.slots.data() + args.sparse->FirstSlot(table_, feature_);
  if (options_.max_length > 0) {
    float* positions_grad =
        options_.positions != Positions::kNone ? args.grads + offset(0) : nullptr;
    SequenceBackward(&table, slots, offsets, dout, positions_grad);
    ZeroInputGradient(in, din);
    return;
  }
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = offsets[b + 1] - offsets[b];
    if (n == 0) continue;
    const float w = CombinerWeight(options_.combiner, n);
    const float* g = dout.data() + b * dim;
    for (int64_t k = offsets[b]; k < offsets[b + 1]; ++k) {
      float* row = table.grads.data() + int64_t{slots[k]} * dim;
      for (int64_t j = 0; j < dim; ++j) row[j] += w * g[j];
    }
  }
  ZeroInputGradient(in, din);
}

void Embedding::SequenceForward(const TableStep& table, const int32_t* slots,
                                const std::vector<int64_t>& offsets, int64_t batch,
                                const float* positions, Tensor* out) {
  const int64_t dim = options_.dim;
  const int64_t length = options_.max_length;
  out->Resize({batch, length, dim});
  out->SetZero();
  lengths_.resize(batch);
  for (int64_t b = 0; b < batch; ++b) {
    // The last `length` values, oldest first.
    const int64_t n = std::min(offsets[b + 1] - offsets[b], length);
    const int64_t first = offsets[b + 1] - n;
    lengths_[b] = static_cast<int32_t>(n);
    for (int64_t k = 0; k < n; ++k) {
      float* o = out->data() + (b * length + k) * dim;
      const float* row = table.rows.data() + int64_t{slots[first + k]} * dim;
      std::copy(row, row + dim, o);
      if (positions == nullptr) continue;
      const float* p = positions + PositionOf(k, n) * dim;
      for (int64_t j = 0; j < dim; ++j) o[j] += p[j];
    }
  }
}

void Embedding::SequenceBackward(TableStep* table, const int32_t* slots,
                                 const std::vector<int64_t>& offsets, const Tensor& dout,
                                 float* positions_grad) {
  const int64_t dim = options_.dim;
  const int64_t length = options_.max_length;
  const int64_t batch = dout.dim(0);
  if (positions_grad != nullptr) std::fill(positions_grad, positions_grad + length * dim, 0.0f);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = lengths_[b];
    const int64_t first = offsets[b + 1] - n;
    for (int64_t k = 0; k < n; ++k) {
      const float* g = dout.data() + (b * length + k) * dim;
      float* row = table->grads.data() + int64_t{slots[first + k]} * dim;
      for (int64_t j = 0; j < dim; ++j) row[j] += g[j];
      if (positions_grad == nullptr) continue;
      float* p = positions_grad + PositionOf(k, n) * dim;
      for (int64_t j = 0; j < dim; ++j) p[j] += g[j];
    }
  }
}

std::string CrossTableName(const std::vector<std::string>& features) {
  return absl::StrJoin(features, "_X_");
}

Linear::Linear(std::string name, const LinearOptions& options)
    : Layer(std::move(name)), options_(options) {}

absl::StatusOr<Shape> Linear::Build(const Shape& /*input*/) {
  if (options_.features.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": linear needs features"));
  }
  if (options_.buckets < 0) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": buckets must be >= 0"));
  }
  // Every table's name is its own (a feature "a_X_b" and a cross [a, b]
  // would share one), and no two crosses cross the same features.
  std::set<std::string> tables(options_.features.begin(), options_.features.end());
  std::set<std::set<std::string>> crossed;
  for (const std::vector<std::string>& cross : options_.crosses) {
    const std::set<std::string> features(cross.begin(), cross.end());
    const std::string text = absl::StrCat("[", absl::StrJoin(cross, ", "), "]");
    if (cross.size() < 2 || features.size() != cross.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name(), ": cross ", text, " is not two or more distinct features"));
    }
    if (!crossed.insert(features).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(name(), ": cross ", text, " crosses the same features as another"));
    }
    if (!tables.insert(CrossTableName(cross)).second) {
      return absl::InvalidArgumentError(absl::StrCat(name(), ": cross ", text, "'s table ", name(),
                                                     "/", CrossTableName(cross),
                                                     " has the name of another of its tables"));
    }
  }
  return Shape{1};
}

std::vector<VariableSpec> Linear::Variables() const {
  if (!options_.use_bias) return {};
  VariableSpec bias;
  bias.name = "bias";
  bias.shape = {1};
  bias.initializer = Initializer::kZeros;
  return {bias};
}

std::vector<SparseTableSpec> Linear::SparseTables() const {
  std::vector<SparseTableSpec> tables;
  for (const std::string& feature : options_.features) {
    tables.push_back({feature, feature, 1, options_.buckets, {TableInitializer::kZeros, 0.0f}});
  }
  for (const std::vector<std::string>& cross : options_.crosses) {
    tables.push_back({CrossTableName(cross),
                      cross[0],
                      1,
                      options_.buckets,
                      {TableInitializer::kZeros, 0.0f},
                      cross});
  }
  return tables;
}

const std::vector<int64_t>& Linear::ValueOffsets(const SparseStep& step, size_t f) const {
  if (f < options_.features.size()) return step.offsets[features_[f]];
  return step.tables[tables_[f]].offsets;  // a cross's
}

void Linear::BindSparse(std::vector<int> tables, std::vector<int> features) {
  tables_ = std::move(tables);
  features_ = std::move(features);
}

void Linear::Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) {
  RequireRows(args.sparse, name());
  const int64_t batch = in.dim(0);
  out->Resize({batch, 1});
  const float bias = options_.use_bias ? args.params[offset(0)] : 0.0f;
  for (int64_t b = 0; b < batch; ++b) (*out)[b] = bias;
  for (size_t f = 0; f < tables_.size(); ++f) {
    const TableStep& table = args.sparse->tables[tables_[f]];
    const std::vector<int64_t>& offsets = ValueOffsets(*args.sparse, f);
    for (int64_t b = 0; b < batch; ++b) {
      float sum = 0.0f;
      for (int64_t k = offsets[b]; k < offsets[b + 1]; ++k) sum += table.rows[table.slots[k]];
      (*out)[b] += sum;
    }
  }
}

void Linear::Backward(const Tensor& in, const Tensor& /*out*/, const Tensor& dout, Tensor* din,
                      const BackwardArgs& args) {
  RequireRows(args.sparse, name());
  const int64_t batch = in.dim(0);
  for (size_t f = 0; f < tables_.size(); ++f) {
    TableStep& table = args.sparse->tables[tables_[f]];
    const std::vector<int64_t>& offsets = ValueOffsets(*args.sparse, f);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t k = offsets[b]; k < offsets[b + 1]; ++k) table.grads[table.slots[k]] += dout[b];
    }
  }
  if (options_.use_bias) {
    double sum = 0.0;
    for (int64_t b = 0; b < batch; ++b) sum += dout[b];
    args.grads[offset(0)] = static_cast<float>(sum);
  }
  ZeroInputGradient(in, din);
}

}  // namespace pstrain
