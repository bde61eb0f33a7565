#ifndef PSTRAIN_TESTING_REPLICATED_PS_UTIL_H_
#define PSTRAIN_TESTING_REPLICATED_PS_UTIL_H_

// What the replicated ps tests (issue 55) share: a small click model whose
// chunks and rows spread over every ps, and a table's rows as one value to
// compare a backup with its primary. Header-only.

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "models/dense.h"
#include "models/embedding.h"
#include "models/merge.h"
#include "models/model.h"
#include "ps/sparse_shard.h"

namespace pstrain {
namespace testing_util {

// An embedding of dim 4 under a dense layer, beside a linear table of 1000
// buckets, both over feature f; a binary head.
inline std::unique_ptr<Model> ReplicatedClickModel() {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Embedding>(
      "emb", EmbeddingOptions{"f", 4, 0, Combiner::kSum, {TableInitializer::kUniform, 0.05f}}));
  DenseOptions dense;
  dense.units = 1;
  layers.push_back(std::make_unique<Dense>("dense", dense));
  layers.push_back(std::make_unique<Linear>("lin", LinearOptions{{"f"}, 1000, false}));
  layers.push_back(std::make_unique<Add>("add"));
  return *Model::Create("click", {1}, 2, std::move(layers), {{0}, {1}, {0}, {2, 3}}, Head::kBinary);
}

// Every row of `shard`: (table, id) -> weights, slots and its count.
inline std::map<std::pair<int, int64_t>, std::vector<float>> AllRowsOf(const SparseShard& shard) {
  std::map<std::pair<int, int64_t>, std::vector<float>> rows;
  for (size_t t = 0; t < shard.tables().size(); ++t) {
    EXPECT_TRUE(shard.tables()[t]
                    ->ForEachRow([&](int64_t id, absl::Span<const float> w,
                                     absl::Span<const float> s, int64_t, int64_t count) {
                      std::vector<float> v(w.begin(), w.end());
                      v.insert(v.end(), s.begin(), s.end());
                      v.push_back(static_cast<float>(count));
                      rows[{static_cast<int>(t), id}] = v;
                      return absl::OkStatus();
                    })
                    .ok());
  }
  return rows;
}

}  // namespace testing_util
}  // namespace pstrain

#endif  // PSTRAIN_TESTING_REPLICATED_PS_UTIL_H_
