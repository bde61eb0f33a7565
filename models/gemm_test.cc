#include "models/gemm.h"

#include <vector>

#include "gtest/gtest.h"
#include "models/random.h"

namespace pstrain {
namespace {

struct GemmCase {
  bool ta, tb, acc;
  int64_t m, n, k;
};

class GemmTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmTest, MatchesNaiveProduct) {
  const GemmCase p = GetParam();
  SplitMix64 rng(1);
  // Stored shapes, with padded row strides to exercise lda/ldb/ldc.
  const int64_t a_rows = p.ta ? p.k : p.m, a_cols = p.ta ? p.m : p.k;
  const int64_t b_rows = p.tb ? p.n : p.k, b_cols = p.tb ? p.k : p.n;
  const int64_t lda = a_cols + 3, ldb = b_cols + 1, ldc = p.n + 2;
  std::vector<float> a(a_rows * lda), b(b_rows * ldb), c(p.m * ldc);
  for (float& x : a) x = rng.Uniform() - 0.5f;
  for (float& x : b) x = rng.Uniform() - 0.5f;
  for (float& x : c) x = rng.Uniform() - 0.5f;
  std::vector<float> want = c;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      double s = p.acc ? want[i * ldc + j] : 0.0;
      for (int64_t l = 0; l < p.k; ++l) {
        const float av = p.ta ? a[l * lda + i] : a[i * lda + l];
        const float bv = p.tb ? b[j * ldb + l] : b[l * ldb + j];
        s += static_cast<double>(av) * bv;
      }
      want[i * ldc + j] = static_cast<float>(s);
    }
  for (bool parallel : {false, true}) {
    std::vector<float> got = c;
    (parallel ? ParallelGemm : Gemm)(p.ta, p.tb, p.m, p.n, p.k, a.data(), lda, b.data(), ldb, p.acc,
                                     got.data(), ldc);
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        // Padding columns past n must be untouched.
        const float expect = j < p.n ? want[i * ldc + j] : c[i * ldc + j];
        ASSERT_NEAR(got[i * ldc + j], expect, 1e-3) << parallel << " " << i << "," << j;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmTest,
                         ::testing::Values(GemmCase{false, false, false, 5, 7, 3},
                                           GemmCase{true, false, false, 6, 4, 9},
                                           GemmCase{false, true, true, 3, 8, 5},
                                           GemmCase{true, true, true, 4, 4, 4},
                                           GemmCase{false, false, true, 300, 200, 64},
                                           GemmCase{true, false, false, 400, 130, 50},
                                           GemmCase{false, true, false, 70, 500, 40}));

}  // namespace
}  // namespace pstrain
