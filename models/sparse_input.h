#ifndef PSTRAIN_MODELS_SPARSE_INPUT_H_
#define PSTRAIN_MODELS_SPARSE_INPUT_H_

// Sparse variables (embedding tables) as a model sees them: which tables a
// layer declares, and the rows of those tables one batch touches. The model
// never holds a table: before a step, Model::PrepareSparse turns the batch's
// feature values into each table's distinct row ids; whoever holds the rows
// (an in-process store, or the parameter servers that own them) fills in
// their values; the forward pass reads them and the backward pass writes one
// gradient row per distinct id, to be pushed back.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/sparse_features.h"

namespace pstrain {

// The starting value of a table's rows (the ps draws it when a row is first
// touched, as a function of the job's seed, the table's name and the id).
struct TableInitializer {
  enum Kind { kZeros, kUniform, kTruncatedNormal };
  Kind kind = kZeros;
  // kUniform: rows uniform in [-scale, scale) (Keras' Embedding default,
  // 0.05); kTruncatedNormal: normal(0, scale) redrawn beyond 2 scale.
  float scale = 0.05f;
  bool operator==(const TableInitializer&) const = default;
};

// A table a layer declares (Layer::SparseTables).
struct SparseTableSpec {
  std::string name;     // Relative to the layer ("embeddings"); the model prefixes the layer's.
  std::string feature;  // The sparse feature whose values address its rows (a cross: cross[0]).
  int64_t dim = 0;      // Floats per row.
  // > 0: a bucketed table with rows [0, buckets); 0: dynamic (any id >= 0,
  // rows created on first touch).
  int64_t buckets = 0;
  TableInitializer initializer;
  // A crossed table (tf.feature_column.crossed_column): the features, two or
  // more and distinct, whose values' combinations address its rows, in the
  // order they are combined (data/feature_hash.h CrossFingerprint). Empty for
  // a plain table.
  std::vector<std::string> cross = {};
  // Non-empty: a table other layers may read too, by this name (a spec's
  // `table: items`): the model's table of that name, not "<layer>/<name>".
  // Every layer that reads it declares the same dim, buckets and initializer.
  std::string shared = {};
};

// A table of a built model.
struct SparseTableInfo {
  std::string name;  // "layer/embeddings"
  // Index into Model::sparse_features(): the feature whose values are the
  // table's. For a crossed table, cross[0], the first crossed feature: its
  // values alone do not address the table's rows.
  int feature = 0;
  int64_t dim = 0;
  int64_t buckets = 0;
  TableInitializer initializer;
  // A crossed table: indices into Model::sparse_features() of the features
  // crossed, in the order they are combined. An example's values of the table
  // are one per combination of its values of these features (their Cartesian
  // product: none if one of them has none), each the CrossFingerprint of the
  // combination's 64-bit values (data/feature_hash.h), whatever their kinds
  // (any id, negative too, may be crossed); its row is that fingerprint
  // modulo buckets, or for a dynamic table its low 63 bits, as a token's.
  // Empty for a plain table.
  std::vector<int> cross = {};
  // A shared table (SparseTableSpec::shared) read by layers of other
  // features too: those features (indices into Model::sparse_features()),
  // after `feature`. Their values address the same rows.
  std::vector<int> shared_features = {};
};

// The largest row a table may have (floats per row).
inline constexpr int64_t kMaxEmbeddingDim = 1 << 16;

// The most values one example may have in one feature, or in one cross (the
// product of its crossed features' counts); an example with more is refused
// (naming the feature or cross, and the example) before anything is looked up.
inline constexpr int64_t kMaxValuesPerExample = 1 << 16;

// One table's part of a step.
struct TableStep {
  std::vector<int64_t> ids;  // Distinct row ids the batch touches, in first-seen order.
  // For every value of the table's feature in the batch (in the batch
  // column's order): the index of its row in `ids`. For a crossed table: for
  // every combination of values, example by example (the last crossed
  // feature's value varying fastest, as TensorFlow's SparseCross orders them).
  std::vector<int32_t> slots;
  // A crossed table's own offsets (examples + 1): example i's values are
  // slots[offsets[i], offsets[i + 1]). Empty for a plain table, whose values
  // are its feature's (SparseStep::offsets).
  std::vector<int64_t> offsets;
  // A table read by several features (SparseTableInfo::shared_features):
  // `slots` holds the values of `feature` and then of each shared feature,
  // and this is where each begins: (feature index, first slot). Empty for a
  // table of one feature, whose values begin at 0.
  std::vector<std::pair<int, int64_t>> feature_slots;
  std::vector<float> rows;   // ids.size() x dim: their values, filled by the row holder
  std::vector<float> grads;  // ids.size() x dim: d(batch-mean loss)/d(row), by the backward pass
};

// The trained rows of one table as an export holds them (io/export_format.h) and an
// ONNX graph or a predictor reads them: the ids a training created and their
// weights, ids.size() x dim floats, in no particular order, each id once. A
// row that is not here was never trained: it reads as zeros.
struct TrainedTableRows {
  std::vector<int64_t> ids;
  std::vector<float> weights;
};

// The rows of every table one batch touches (Model::PrepareSparse).
struct SparseStep {
  int64_t examples = 0;
  // Per sparse feature of the model: the batch column's offsets (examples +
  // 1), so a plain table's values of example i are slots[offsets[i],
  // offsets[i + 1]) (a crossed table has its own: TableStep::offsets).
  std::vector<std::vector<int64_t>> offsets;
  std::vector<TableStep> tables;  // Per table of the model.

  // Where feature `feature`'s values begin among table `table`'s slots.
  int64_t FirstSlot(int table, int feature) const {
    for (const auto& [f, first] : tables[table].feature_slots) {
      if (f == feature) return first;
    }
    return 0;
  }
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_SPARSE_INPUT_H_
