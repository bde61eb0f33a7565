#include "tests/bench/ps_rates_bench.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/time/clock.h"
#include "ps/parameter_shard.h"
#include "tests/bench/median.h"

namespace pstrain {
namespace {

std::unique_ptr<ParameterShard> MakeShard(int64_t n, bool sync, int replicas) {
  ShardOptions o;
  o.begin = 0;
  o.end = n;
  o.segments = {{"all", 0, n}};
  o.optimizer.type = OptimizerType::kAdam;
  o.rule.sync = sync;
  o.rule.replicas_to_aggregate = replicas;
  o.rule.total_replicas = replicas;
  absl::StatusOr<std::unique_ptr<ParameterShard>> shard = ParameterShard::Create(o);
  if (!shard.ok()) return nullptr;
  std::vector<float> params(n, 0.5f);
  if (!(*shard)->Initialize(params, {}, 0).ok()) return nullptr;
  return std::move(*shard);
}

}  // namespace

int RunPsRatesBench(int64_t n, int replicas, int steps) {
  std::unique_ptr<ParameterShard> async = MakeShard(n, false, 1);
  std::unique_ptr<ParameterShard> sync = MakeShard(n, true, replicas);
  if (async == nullptr || sync == nullptr || replicas < 1 || steps < 1) {
    std::fprintf(stderr, "ps rates bench: bad arguments\n");
    return 2;
  }
  std::vector<float> grads(n, 1e-3f);
  std::vector<double> apply, step;
  for (int s = 0; s < steps + 2; ++s) {
    absl::Time start = absl::Now();
    async->Push(0, s, grads, {}, [](absl::Status, PushResult) {});
    if (s >= 2) apply.push_back(absl::ToDoubleSeconds(absl::Now() - start));
    start = absl::Now();
    for (int r = 0; r < replicas; ++r) sync->Push(r, s, grads, {}, [](absl::Status, PushResult) {});
    if (s >= 2) step.push_back(absl::ToDoubleSeconds(absl::Now() - start));
  }
  const double apply_secs = Median(apply);
  const double sum_secs = std::max(1e-9, (Median(step) - apply_secs) / replicas);
  std::printf("ps step of %lld values and %d pushes: apply %.2f ms, each push's sum %.2f ms\n",
              static_cast<long long>(n), replicas, 1e3 * apply_secs, 1e3 * sum_secs);
  std::printf("ps apply rate: %.0f values/sec\n", n / apply_secs);
  std::printf("ps push sum rate: %.0f values/sec\n", n / sum_secs);
  return 0;
}

}  // namespace pstrain
