#include "ps_protocol/shard_layout.h"

#include <algorithm>
#include <set>

#include "common/hash.h"

namespace pstrain {
namespace {

// Neighbouring pieces are merged up to this many values, so a deep model of
// small layers does not become hundreds of RPCs a step...
constexpr int64_t kMinChunk = 1 << 18;
// ...and large pieces are split to at most this many, so the ps can work on
// one part while the next is still on the wire.
constexpr int64_t kMaxChunk = 1 << 20;

}  // namespace

std::vector<std::pair<int64_t, int64_t>> BalancedRanges(int64_t n, int shards) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int i = 0; i < shards; ++i) ranges.emplace_back(n * i / shards, n * (i + 1) / shards);
  return ranges;
}

ShardLayout ComputeShardLayout(int64_t num_params, int64_t num_state,
                               const std::vector<int64_t>& layer_starts, int num_ps) {
  ShardLayout layout;
  layout.num_params = num_params;
  layout.num_state = num_state;
  layout.ranges = BalancedRanges(num_params, num_ps);
  for (int ps = 0; ps < num_ps; ++ps) {
    const auto [begin, end] = layout.ranges[ps];
    // Pieces: the range cut at layer starts.
    std::set<int64_t> cuts = {begin, end};
    for (int64_t s : layer_starts) {
      if (s > begin && s < end) cuts.insert(s);
    }
    std::vector<int64_t> points(cuts.begin(), cuts.end());
    int64_t open = -1;  // Start of the chunk being merged, -1 if none.
    auto close = [&](int64_t at) {
      if (open < 0 || at <= open) return;
      layout.chunks.push_back({ps, open, at, 0});
      open = -1;
    };
    for (size_t k = 0; k + 1 < points.size(); ++k) {
      const int64_t lo = points[k], hi = points[k + 1];
      const int64_t size = hi - lo;
      if (open >= 0 && (lo - open) + size > kMinChunk) close(lo);
      if (size > kMaxChunk) {
        const int64_t parts = (size + kMaxChunk - 1) / kMaxChunk;
        for (int64_t p = 0; p < parts; ++p) {
          layout.chunks.push_back({ps, lo + size * p / parts, lo + size * (p + 1) / parts, 0});
        }
        continue;
      }
      if (open < 0) open = lo;
    }
    close(end);
    if (begin == end) layout.chunks.push_back({ps, begin, end, 0});
  }
  layout.chunks[0].state = num_state;
  return layout;
}

ShardLayout ComputeShardLayout(const Model& model, int num_ps) {
  std::vector<int64_t> starts;
  std::string last_layer;
  for (const VariableInfo& v : model.variables()) {
    if (!v.trainable) continue;
    const std::string layer = v.name.substr(0, v.name.rfind('/'));
    if (layer != last_layer) starts.push_back(v.offset);
    last_layer = layer;
  }
  ShardLayout layout = ComputeShardLayout(model.num_params(), model.num_state(), starts, num_ps);
  for (const SparseTableInfo& table : model.sparse_tables()) {
    layout.tables.push_back({table.name, table.dim, StableNameHash(table.name)});
  }
  return layout;
}

std::vector<int> ReplicaTasks(int owner, int num_ps, int replication) {
  const int k = std::clamp(replication, 1, std::max(1, num_ps));
  std::vector<int> tasks;
  for (int i = 0; i < k; ++i) tasks.push_back((owner + i) % num_ps);
  return tasks;
}

int RowOwner(uint64_t table_key, int64_t id, int num_ps) {
  const uint64_t h = MixBits64(table_key ^ MixBits64(static_cast<uint64_t>(id)));
  return static_cast<int>(h % static_cast<uint64_t>(num_ps));
}

}  // namespace pstrain
