#include "models/embedding.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

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
  return Shape{options_.dim};
}

std::vector<SparseTableSpec> Embedding::SparseTables() const {
  return {{"embeddings", options_.feature, options_.dim, options_.buckets, options_.initializer}};
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
  out->Resize({batch, dim});
  out->SetZero();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = offsets[b + 1] - offsets[b];
    if (n == 0) continue;
    const float w = CombinerWeight(options_.combiner, n);
    float* o = out->data() + b * dim;
    for (int64_t k = offsets[b]; k < offsets[b + 1]; ++k) {
      const float* row = table.rows.data() + int64_t{table.slots[k]} * dim;
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
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = offsets[b + 1] - offsets[b];
    if (n == 0) continue;
    const float w = CombinerWeight(options_.combiner, n);
    const float* g = dout.data() + b * dim;
    for (int64_t k = offsets[b]; k < offsets[b + 1]; ++k) {
      float* row = table.grads.data() + int64_t{table.slots[k]} * dim;
      for (int64_t j = 0; j < dim; ++j) row[j] += w * g[j];
    }
  }
  ZeroInputGradient(in, din);
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
  return tables;
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
    const std::vector<int64_t>& offsets = args.sparse->offsets[features_[f]];
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
    const std::vector<int64_t>& offsets = args.sparse->offsets[features_[f]];
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
