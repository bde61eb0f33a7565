#ifndef PSTRAIN_DATA_SPARSE_FEATURES_H_
#define PSTRAIN_DATA_SPARSE_FEATURES_H_

// Sparse (id) features of examples as the input pipeline hands them to a
// model: one ragged column per feature. Plain data, header only, so both the
// data readers and the model code use it without linking each other.

#include <cstdint>
#include <string>
#include <vector>

namespace pstrain {

// What a feature's values are, which decides how a table turns them into row
// ids (models/sparse_input.h):
enum class SparseValueKind {
  // Integer ids (tf.train.Example int64_list). A bucketed table uses the id
  // as its row (TensorFlow's categorical_column_with_identity): it must be in
  // [0, buckets). A dynamic table uses the id; it must be >= 0.
  kIds,
  // Strings (Example bytes_list, Criteo's hexadecimal categories), stored as
  // their FarmHash Fingerprint64 (data/feature_hash.h). A bucketed table uses
  // fingerprint mod buckets, exactly tf.strings.to_hash_bucket_fast; a
  // dynamic table uses the fingerprint's low 63 bits.
  kTokens,
};

// One feature's values for a run of examples: example i has values
// [offsets[i], offsets[i + 1]) (possibly none: a missing feature).
// offsets.size() is examples + 1 and offsets[0] is 0.
struct SparseFeatureColumn {
  std::string name;
  SparseValueKind kind = SparseValueKind::kIds;
  std::vector<int64_t> offsets = {0};
  std::vector<uint64_t> values;  // kIds: the int64 id's bits; kTokens: the fingerprint

  int64_t examples() const { return static_cast<int64_t>(offsets.size()) - 1; }
  void Clear() {
    offsets.assign(1, 0);
    values.clear();
  }
  // Appends example `i` of `other` (same name and kind).
  void AppendExample(const SparseFeatureColumn& other, int64_t i) {
    values.insert(values.end(), other.values.begin() + other.offsets[i],
                  other.values.begin() + other.offsets[i + 1]);
    offsets.push_back(static_cast<int64_t>(values.size()));
  }
};

// A batch's sparse features, one column per feature, each with the same
// number of examples.
struct SparseBatch {
  std::vector<SparseFeatureColumn> features;
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_SPARSE_FEATURES_H_
