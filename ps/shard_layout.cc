#include "ps/shard_layout.h"

#include <algorithm>

#include "ps/parameter_shard.h"

namespace pstrain {

ShardLayout ComputeShardLayout(const Model& model, int num_ps) {
  ShardLayout layout;
  layout.num_params = model.num_params();
  layout.num_state = model.num_state();
  layout.ranges = BalancedRanges(model.num_params(), num_ps);
  return layout;
}

std::vector<Segment> SegmentsForRange(const Model& model, int64_t begin, int64_t end) {
  std::vector<Segment> segments;
  for (const VariableInfo& v : model.variables()) {
    if (!v.trainable) continue;
    const int64_t lo = std::max(begin, v.offset);
    const int64_t hi = std::min(end, v.offset + v.size);
    if (lo < hi) segments.push_back({v.name, lo - begin, hi - begin});
  }
  return segments;
}

}  // namespace pstrain
