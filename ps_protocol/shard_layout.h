#ifndef PSTRAIN_PS_PROTOCOL_SHARD_LAYOUT_H_
#define PSTRAIN_PS_PROTOCOL_SHARD_LAYOUT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "models/model.h"

namespace pstrain {

// One independently updated piece of the flat parameter vector (`chunk` on
// the wire; a ParameterShard holds one on its ps task): it has its own
// optimizer slots, step and sync aggregation, so a worker can push it as soon
// as its gradients are ready.
struct Chunk {
  int ps = 0;
  int64_t begin = 0;  // [begin, end) of the flat trainable vector
  int64_t end = 0;
  int64_t state = 0;  // Non-trainable state values it carries (chunk 0 only).
};

// How a model's flat vectors are spread over P parameter servers. Every role
// computes the same layout from the model and the cluster, so no placement
// RPC is needed.
//  - ps i owns a contiguous, element-balanced range of the trainable vector
//    (large variables are split, so no ps gets all the traffic);
//  - each range is cut into chunks at layer boundaries (small neighbouring
//    layers share a chunk, large ones are split to at most ~1M values), so
//    gradients can be pushed layer by layer while the backward pass goes on;
//  - chunk 0 (on ps 0) also carries the non-trainable state (batch-norm
//    moving statistics, small).
// A model's embedding table as the wire sees it: rows are not in the flat
// vector but spread over every ps by RowOwner.
struct TableLayout {
  std::string name;
  int64_t dim = 0;
  uint64_t key = 0;  // StableNameHash(name): the table's part of RowOwner's hash
};

struct ShardLayout {
  int64_t num_params = 0;
  int64_t num_state = 0;
  std::vector<std::pair<int64_t, int64_t>> ranges;  // ps i's [begin, end)
  std::vector<Chunk> chunks;                        // in flat order
  std::vector<TableLayout> tables;                  // Model::sparse_tables(), in order
};

// The ps task (of `num_ps`) that holds row `id` of the table with key
// `table_key` (TableLayout::key): MixBits64(table_key ^ MixBits64(id)) mod
// num_ps. A pure function of the table's name, the id and the ps count, so
// every role places rows alike with no placement RPC, rows of one table
// spread evenly, and a checkpoint restored onto another ps count re-places
// each row by this same rule.
int RowOwner(uint64_t table_key, int64_t id, int num_ps);

// A replicated ps (issue 55): the tasks that hold a copy of what task
// `owner` owns (its chunks, and its part of every table's rows), `owner`
// (the primary) first, then the next `replication` - 1 tasks of the ring.
// `replication` is clamped to [1, num_ps].
std::vector<int> ReplicaTasks(int owner, int num_ps, int replication);

ShardLayout ComputeShardLayout(const Model& model, int num_ps);

// The same from explicit layer boundaries (offsets where a layer's variables
// start), for tests.
ShardLayout ComputeShardLayout(int64_t num_params, int64_t num_state,
                               const std::vector<int64_t>& layer_starts, int num_ps);

// Splits [0, n) into `shards` contiguous ranges balanced by element count.
std::vector<std::pair<int64_t, int64_t>> BalancedRanges(int64_t n, int shards);

}  // namespace pstrain

#endif  // PSTRAIN_PS_PROTOCOL_SHARD_LAYOUT_H_
