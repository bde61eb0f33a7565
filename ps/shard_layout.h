#ifndef PSTRAIN_PS_SHARD_LAYOUT_H_
#define PSTRAIN_PS_SHARD_LAYOUT_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "models/model.h"
#include "ps/optimizer.h"

namespace pstrain {

// How a model's flat vectors are spread over P parameter servers. Every role
// computes the same layout from the model and the cluster, so no placement
// RPC is needed: ps i owns a contiguous, element-balanced range of the
// trainable vector (large variables are split); ps 0 also holds the
// non-trainable state (batch-norm moving statistics, small).
struct ShardLayout {
  int64_t num_params = 0;
  int64_t num_state = 0;
  std::vector<std::pair<int64_t, int64_t>> ranges;  // ps i's [begin, end)
  int64_t state_size(int ps) const { return ps == 0 ? num_state : 0; }
};

ShardLayout ComputeShardLayout(const Model& model, int num_ps);

// The variables (or parts of them) in [begin, end), relative to `begin`: the
// segment table a ps uses for per-variable rules (no weight decay on biases).
std::vector<Segment> SegmentsForRange(const Model& model, int64_t begin, int64_t end);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SHARD_LAYOUT_H_
