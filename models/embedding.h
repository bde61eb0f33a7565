#ifndef PSTRAIN_MODELS_EMBEDDING_H_
#define PSTRAIN_MODELS_EMBEDDING_H_

// Layers over sparse features (models/sparse_input.h): their tables are not
// in the model's flat parameter vector; each pass reads the rows the batch
// touches from ForwardArgs::sparse and the backward pass writes their
// gradients to BackwardArgs::sparse. They take the model's input activation
// only to have a place in the graph; its values are not read and it gets no
// gradient.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/layer.h"
#include "models/sparse_input.h"
#include "models/tensor.h"

namespace pstrain {

// How an example's several values of one feature become one vector
// (tf.nn.embedding_lookup_sparse's combiner): their sum, their mean, or their
// sum divided by the square root of their count. An example with no value
// gives zeros.
enum class Combiner { kSum, kMean, kSqrtn };

// Learned positions of a sequence embedding: none, or a trainable
// "<name>/positions" [max_length, dim] added to each value's row, its
// position counted from the sequence's first kept value (text, as BERT) or
// from its last (a history: 0 is the most recent, as BST's).
enum class Positions { kNone, kFromStart, kFromEnd };

struct EmbeddingOptions {
  std::string feature;  // the sparse feature it looks up
  int64_t dim = 0;
  int64_t buckets = 0;  // > 0: rows [0, buckets); 0: a dynamic table
  Combiner combiner = Combiner::kMean;
  TableInitializer initializer = {TableInitializer::kUniform, 0.05f};
  // > 0: a sequence of at most max_length values (the combiner does not
  // apply).
  int64_t max_length = 0;
  Positions positions = Positions::kNone;  // a sequence's
  // Non-empty: the table is the model's table of this name, which other
  // embeddings may read too (SparseTableSpec::shared): a history and a
  // candidate looking up the same item rows.
  std::string table = {};
};

// The largest max_length of a sequence embedding.
inline constexpr int64_t kMaxSequenceLength = 1 << 14;

// An embedding table ("<name>/embeddings", dim floats per row) and its lookup
// of one feature: output [dim] per example, the combiner over the example's
// rows (tf.feature_column.embedding_column, Keras' Embedding).
// With max_length: the feature's values in order as a sequence [max_length,
// dim] with a mask (Layer::MakesMask): an example keeps its last max_length
// values, at positions 0 .. n - 1, and zeros pad the rest.
class Embedding : public Layer {
 public:
  Embedding(std::string name, const EmbeddingOptions& options);

  absl::StatusOr<Shape> Build(const Shape& input) override;
  std::vector<VariableSpec> Variables() const override;
  std::vector<SparseTableSpec> SparseTables() const override;
  void BindSparse(std::vector<int> tables, std::vector<int> features) override;
  bool MakesMask() const override { return options_.max_length > 0; }
  const std::vector<int32_t>* MadeLengths() const override { return &lengths_; }
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;

 private:
  // `slots`: the layer's feature's among the table's.
  void SequenceForward(const TableStep& table, const int32_t* slots,
                       const std::vector<int64_t>& offsets, int64_t batch, const float* positions,
                       Tensor* out);
  void SequenceBackward(TableStep* table, const int32_t* slots, const std::vector<int64_t>& offsets,
                        const Tensor& dout, float* positions_grad);
  // The position row of the k-th kept value of `n` kept.
  int64_t PositionOf(int64_t k, int64_t n) const {
    return options_.positions == Positions::kFromEnd ? n - 1 - k : k;
  }

  EmbeddingOptions options_;
  int table_ = -1;
  int feature_ = -1;
  std::vector<int32_t> lengths_;  // a sequence's, last forward pass
};

struct LinearOptions {
  std::vector<std::string> features;  // one weight table per feature
  int64_t buckets = 0;                // > 0: each table has rows [0, buckets); 0: dynamic
  bool use_bias = true;
  // Crossed features (tf.feature_column.crossed_column): one weight table per
  // cross, each a list of two or more distinct features (listed in
  // `features` or not), no two crossing the same set of features.
  std::vector<std::vector<std::string>> crosses = {};
};

// The table name of a cross of `features`: "a_X_b_X_c" (the layer's name
// comes before it: "wide/a_X_b_X_c").
std::string CrossTableName(const std::vector<std::string>& features);

// The "wide" part of Wide & Deep (tf.feature_column.linear_model): one weight
// per (feature, value), summed over every value of every listed feature, plus
// a bias; output [1] per example. Each feature has its own table of one float
// per row, "<name>/<feature>", starting at zero; the bias is "<name>/bias", a
// dense variable. Each cross adds a table "<name>/<a>_X_<b>..." of one weight
// per combination of the crossed features' values (SparseTableInfo::cross),
// summed in the same way.
class Linear : public Layer {
 public:
  Linear(std::string name, const LinearOptions& options);

  absl::StatusOr<Shape> Build(const Shape& input) override;
  std::vector<VariableSpec> Variables() const override;
  std::vector<SparseTableSpec> SparseTables() const override;
  void BindSparse(std::vector<int> tables, std::vector<int> features) override;
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;

 private:
  // Where the values of table f (of SparseTables()) are, per example.
  const std::vector<int64_t>& ValueOffsets(const SparseStep& step, size_t f) const;

  LinearOptions options_;
  std::vector<int> tables_;
  std::vector<int> features_;
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_EMBEDDING_H_
