#ifndef PSTRAIN_MODELS_GEMM_H_
#define PSTRAIN_MODELS_GEMM_H_

#include <cstdint>

namespace pstrain {

// Row-major single-precision matrix multiply on the calling thread (Eigen's
// blocked, vectorized GEMM):
//   C[m, n] = op(A)[m, k] * op(B)[k, n] + (accumulate ? C : 0)
// op(X) is X or X^T as `trans_a` / `trans_b` say; lda/ldb/ldc are the row
// strides of A, B and C as stored. Kept in one translation unit so Eigen's GEMM
// is instantiated once for the whole project.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc);

// The same product, split over the oneTBB pool into column blocks (or row
// blocks when C is tall), each written by exactly one task: the result does not
// depend on the number of threads.
void ParallelGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                  int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc);

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_GEMM_H_
