#ifndef PSTRAIN_MODELS_PARALLEL_H_
#define PSTRAIN_MODELS_PARALLEL_H_

#include <algorithm>
#include <cstdint>

#include "tbb/blocked_range.h"
#include "tbb/parallel_for.h"

namespace pstrain {

// Calls fn(begin, end) over [0, n) in fixed-size pieces of at least `grain`
// items on the oneTBB pool. Piece boundaries do not depend on the number of
// threads, so per-piece partial results summed in piece order are
// deterministic.
template <typename Fn>
void ParallelFor(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (n <= grain) {
    fn(int64_t{0}, n);
    return;
  }
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, (n + grain - 1) / grain, 1),
      [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t p = r.begin(); p < r.end(); ++p) {
          fn(p * grain, std::min(n, (p + 1) * grain));
        }
      },
      tbb::simple_partitioner());
}

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_PARALLEL_H_
