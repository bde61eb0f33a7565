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

struct EmbeddingOptions {
  std::string feature;  // the sparse feature it looks up
  int64_t dim = 0;
  int64_t buckets = 0;  // > 0: rows [0, buckets); 0: a dynamic table
  Combiner combiner = Combiner::kMean;
  TableInitializer initializer = {TableInitializer::kUniform, 0.05f};
};

// An embedding table ("<name>/embeddings", dim floats per row) and its lookup
// of one feature: output [dim] per example, the combiner over the example's
// rows (tf.feature_column.embedding_column, Keras' Embedding).
class Embedding : public Layer {
 public:
  Embedding(std::string name, const EmbeddingOptions& options);

  absl::StatusOr<Shape> Build(const Shape& input) override;
  std::vector<SparseTableSpec> SparseTables() const override;
  void BindSparse(std::vector<int> tables, std::vector<int> features) override;
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;

 private:
  EmbeddingOptions options_;
  int table_ = -1;
  int feature_ = -1;
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
