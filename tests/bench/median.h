#ifndef PSTRAIN_TESTS_BENCH_MEDIAN_H_
#define PSTRAIN_TESTS_BENCH_MEDIAN_H_

#include <algorithm>
#include <vector>

namespace pstrain {

// The median of a benchmark's rounds (the upper one of an even count).
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace pstrain

#endif  // PSTRAIN_TESTS_BENCH_MEDIAN_H_
