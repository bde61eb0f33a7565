#include "models/gemm.h"

#include <algorithm>

#include "Eigen/Core"
#include "tbb/blocked_range.h"
#include "tbb/parallel_for.h"

namespace pstrain {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMajor, Eigen::Unaligned, Eigen::OuterStride<>>;
using Map = Eigen::Map<RowMajor, Eigen::Unaligned, Eigen::OuterStride<>>;

template <typename L, typename R>
void Assign(Map& c, const L& l, const R& r, bool accumulate) {
  if (accumulate) {
    c.noalias() += l * r;
  } else {
    c.noalias() = l * r;
  }
}

}  // namespace

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  Map cm(c, m, n, Eigen::OuterStride<>(ldc));
  if (k == 0) {
    if (!accumulate) cm.setZero();
    return;
  }
  // A stored as [m, k] (or [k, m] when transposed); likewise B.
  ConstMap am(a, trans_a ? k : m, trans_a ? m : k, Eigen::OuterStride<>(lda));
  ConstMap bm(b, trans_b ? n : k, trans_b ? k : n, Eigen::OuterStride<>(ldb));
  if (trans_a && trans_b) {
    Assign(cm, am.transpose(), bm.transpose(), accumulate);
  } else if (trans_a) {
    Assign(cm, am.transpose(), bm, accumulate);
  } else if (trans_b) {
    Assign(cm, am, bm.transpose(), accumulate);
  } else {
    Assign(cm, am, bm, accumulate);
  }
}

void ParallelGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                  int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c,
                  int64_t ldc) {
  // Blocks big enough to keep Eigen's kernels efficient, small enough to
  // balance: at least 64 columns (or rows) and ~1 MFLOP-per-block work.
  constexpr int64_t kMinBlock = 64;
  const bool split_rows = m > n;
  const int64_t extent = split_rows ? m : n;
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(extent / kMinBlock, 16));
  if (blocks == 1 || m * n * k < (int64_t{1} << 20)) {
    Gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc);
    return;
  }
  // Round block edges to multiples of 16 floats (one AVX-512 register).
  const int64_t step = ((extent + blocks - 1) / blocks + 15) / 16 * 16;
  const int64_t num = (extent + step - 1) / step;
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, num, 1),
      [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t blk = r.begin(); blk < r.end(); ++blk) {
          const int64_t lo = blk * step;
          const int64_t len = std::min(step, extent - lo);
          if (split_rows) {
            const float* a_blk = trans_a ? a + lo : a + lo * lda;
            Gemm(trans_a, trans_b, len, n, k, a_blk, lda, b, ldb, accumulate, c + lo * ldc, ldc);
          } else {
            const float* b_blk = trans_b ? b + lo * ldb : b + lo;
            Gemm(trans_a, trans_b, m, len, k, a, lda, b_blk, ldb, accumulate, c + lo, ldc);
          }
        }
      },
      tbb::simple_partitioner());
}

}  // namespace pstrain
