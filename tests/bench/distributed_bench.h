#ifndef PSTRAIN_TESTS_BENCH_DISTRIBUTED_BENCH_H_
#define PSTRAIN_TESTS_BENCH_DISTRIBUTED_BENCH_H_

#include <string>

namespace pstrain {

struct DistributedBenchOptions {
  std::string model = "mnist_cnn";
  std::string data_dir;
  int num_ps = 1;
  int num_workers = 2;
  int batch_size = 100;
  int steps = 100;  // Timed global steps.
  int warmup = 10;  // Global steps before timing starts.
  std::string update = "sync";
  int threads_per_process = 1;
  std::string wire_format = "float32";
  bool tls = false;        // mutual TLS and a job token (as pstrain-launch), else insecure
  int ps_replication = 1;  // copies of every chunk (issue 55)
};

// Starts real pstrain-ps and pstrain-worker processes on loopback (found next
// to this binary), plays the chief itself without training (initializes,
// follows the global step, ends the job), and prints bytes per step, PushPull
// latency percentiles from every worker, each ps's peak resident memory,
// and, last, the aggregate
// "train examples/sec: X" between the warm-up and the end. Returns the exit
// code.
int RunDistributedBench(const DistributedBenchOptions& options);

}  // namespace pstrain

#endif  // PSTRAIN_TESTS_BENCH_DISTRIBUTED_BENCH_H_
