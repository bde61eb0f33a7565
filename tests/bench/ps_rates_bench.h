#ifndef PSTRAIN_TESTS_BENCH_PS_RATES_BENCH_H_
#define PSTRAIN_TESTS_BENCH_PS_RATES_BENCH_H_

#include <cstdint>

namespace pstrain {

// What a parameter server does per sync step for `num_params` values and
// `replicas` pushes, timed in this process (one thread, as a ps's request
// handling is per push): the optimizer's apply and a push's sum into the
// step's aggregate. Prints "ps apply rate: X values/sec" and "ps push sum
// rate: Y values/sec" (inputs of tests/bench/scaling_model.py). Returns the
// exit code.
int RunPsRatesBench(int64_t num_params, int replicas, int steps);

}  // namespace pstrain

#endif  // PSTRAIN_TESTS_BENCH_PS_RATES_BENCH_H_
