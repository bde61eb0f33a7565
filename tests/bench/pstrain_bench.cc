// pstrain-bench: times training steps (forward, backward, optimizer update)
// and evaluation batches of a model on synthetic input, single process.
// The last two lines are "train examples/sec: X" and "eval examples/sec: Y".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "common/env.h"
#include "common/flags.h"
#include "common/malloc_tuning.h"
#include "common/trace.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "models/gemm.h"
#include "models/model_options.h"
#include "models/random.h"
#include "ps/in_process_client.h"
#include "role/model_source.h"
#include "tbb/global_control.h"
#include "tests/bench/distributed_bench.h"
#include "tests/bench/median.h"
#include "tests/bench/ps_rates_bench.h"

DEFINE_string(model, "mnist_cnn", "Model to time: a built-in's name or a model spec file.");
DEFINE_int32(batch_size, 100, "Examples per step.");
DEFINE_int32(num_layers, 44, "cifar10_resnet: depth, 6n + 2 (20, 32, 44, 56, 110).");
DEFINE_int32(steps, 100, "Timed steps (after the warm-up).");
DEFINE_int32(warmup, 10, "Untimed steps first.");
DEFINE_int32(threads, 0, "Compute threads; 0 uses every core.");
DEFINE_int32(repeats, 1, "Timed rounds; the median round is reported.");
DEFINE_string(optimizer, "adam", "Optimizer applied each step.");
DEFINE_bool(distributed, false,
            "Time real pstrain-ps and pstrain-worker processes on loopback instead.");
DEFINE_bool(tls, false,
            "--distributed: mutual TLS and a job token on every channel, as pstrain-launch "
            "runs a job (default: plaintext, as PyTorch DDP's gloo).");
DEFINE_string(wire_dtype, "float32",
              "--distributed: gradients and parameters on the wire, float32 or bf16.");
DEFINE_int32(ps, 1, "--distributed: parameter servers.");
DEFINE_int32(ps_replication, 1, "--distributed: copies of every chunk and table partition.");
DEFINE_int32(workers, 2, "--distributed: workers (the chief does not train).");
DEFINE_string(update, "sync", "--distributed: sync or async.");
DEFINE_string(data_dir, "", "--distributed: the workers' training data (default Fashion-MNIST).");
DEFINE_int32(threads_per_process, 1, "--distributed: compute threads of each process.");
DEFINE_bool(profile, false, "Print per-layer forward/backward time per training step.");
DEFINE_string(trace_file, "",
              "Write a Chrome trace of the first timed round's steps (every layer's forward and "
              "backward pass) to this file.");
DEFINE_bool(gemm_peak, false,
            "Print the GFLOP/s of a 1024^3 single-precision GEMM on one thread (the roofline "
            "the layers are measured against).");
DEFINE_int32(ps_rates, 0,
             "Time a parameter server's sync step for the model's parameters and this many "
             "pushes (apply and sum rates), instead of training.");

namespace pstrain {
namespace {

using Clock = std::chrono::steady_clock;

// The median GFLOP/s of a 1024^3 GEMM on the calling thread.
double MeasureGemmPeak() {
  constexpr int64_t n = 1024;
  std::vector<float> a(n * n), b(n * n), c(n * n);
  SplitMix64 rng(3);
  for (float& x : a) x = rng.Uniform();
  for (float& x : b) x = rng.Uniform();
  std::vector<double> rates;
  for (int r = 0; r < 7; ++r) {
    auto start = Clock::now();
    Gemm(false, false, n, n, n, a.data(), n, b.data(), n, false, c.data(), n);
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    rates.push_back(2.0 * n * n * n / secs / 1e9);
  }
  return Median(rates);
}

int GemmPeak() {
  std::printf("gemm 1024^3, 1 thread: %.1f GFLOP/s (median of 7)\n", MeasureGemmPeak());
  return 0;
}

int Run() {
  if (FLAGS_gemm_peak) return GemmPeak();
  // A built-in's name or a model spec file, as a job's training.model.
  TrainingSpec t;
  t.model = FLAGS_model;
  t.num_layers = FLAGS_num_layers;
  absl::Status loaded = LoadModelSpecFile(Env::Default(), &t);
  absl::StatusOr<std::unique_ptr<Model>> model_or =
      loaded.ok() ? BuildJobModel(t) : absl::StatusOr<std::unique_ptr<Model>>(loaded);
  if (!model_or.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model_or.status().message()).c_str());
    return 2;
  }
  std::unique_ptr<Model> model = std::move(*model_or);
  OptimizerConfig config;
  auto type = ParseOptimizerType(FLAGS_optimizer);
  if (!type.ok() || FLAGS_batch_size <= 0 || FLAGS_steps <= 0 || FLAGS_repeats <= 0) {
    std::fprintf(stderr,
                 "bad flags: --optimizer sgd|momentum|adam, positive --batch_size, "
                 "--steps, --repeats\n");
    return 2;
  }
  config.type = *type;
  auto client_or = InProcessClient::Create(*model, config, 0.99f, 1);
  if (!client_or.ok()) {
    std::fprintf(stderr, "%s\n", std::string(client_or.status().message()).c_str());
    return 1;
  }
  InProcessClient& client = **client_or;

  const int64_t batch = FLAGS_batch_size;
  const int64_t example = NumElements(model->input_shape());
  // A few distinct synthetic batches, cycled.
  constexpr int kBatches = 4;
  std::vector<float> images(kBatches * batch * example);
  std::vector<float> labels(kBatches * batch);
  SplitMix64 rng(7);
  for (float& x : images) x = rng.Uniform();
  for (float& y : labels) y = static_cast<float>(rng.Next() % model->num_classes());
  std::vector<float> grads(model->num_params()), stats(model->num_state());

  auto train_step = [&](int i) {
    const int b = i % kBatches;
    ParameterView view = *client.Pull();
    model->TrainStep(view.params, view.state, images.data() + b * batch * example,
                     labels.data() + b * batch, batch, i, grads.data(), stats.data());
    CHECK(client.Push(view.global_step, grads.data(), stats.data()).ok());
  };
  auto eval_step = [&](int i) {
    const int b = i % kBatches;
    ParameterView view = *client.Pull();
    model->Evaluate(view.params, view.state, images.data() + b * batch * example,
                    labels.data() + b * batch, batch);
  };

  if (FLAGS_ps_rates > 0) return RunPsRatesBench(model->num_params(), FLAGS_ps_rates, FLAGS_steps);
  std::printf("model %s: %lld parameters, batch %lld, %d threads, %d steps x %d rounds\n",
              FLAGS_model.c_str(), static_cast<long long>(model->num_params()),
              static_cast<long long>(batch), FLAGS_threads, FLAGS_steps, FLAGS_repeats);
  for (int i = 0; i < FLAGS_warmup; ++i) train_step(i);
  if (FLAGS_profile) {
    model->EnableProfiling(true);
    double update_secs = 0.0;
    for (int i = 0; i < FLAGS_steps; ++i) {
      const int b = i % kBatches;
      ParameterView view = *client.Pull();
      model->TrainStep(view.params, view.state, images.data() + b * batch * example,
                       labels.data() + b * batch, batch, i, grads.data(), stats.data());
      auto start = Clock::now();
      CHECK(client.Push(view.global_step, grads.data(), stats.data()).ok());
      update_secs += std::chrono::duration<double>(Clock::now() - start).count();
    }
    std::printf("%-18s %10s %10s  (ms per training step)\n", "layer", "forward", "backward");
    for (const LayerTiming& t : model->timings()) {
      std::printf("%-18s %10.2f %10.2f\n", t.layer.c_str(), 1e3 * t.forward_secs / FLAGS_steps,
                  1e3 * t.backward_secs / FLAGS_steps);
    }
    std::printf("%-18s %10.2f\n", "optimizer update", 1e3 * update_secs / FLAGS_steps);
    model->EnableProfiling(false);
  }
  std::vector<double> train_rates, eval_rates;
  TraceRecorder trace(FLAGS_model, TraceSteps{0, FLAGS_trace_file.empty() ? -1 : FLAGS_steps - 1});
  if (!FLAGS_trace_file.empty()) model->set_trace(&trace);
  for (int r = 0; r < FLAGS_repeats; ++r) {
    auto start = Clock::now();
    for (int i = 0; i < FLAGS_steps; ++i) {
      trace.SetStep(r * FLAGS_steps + i);
      ScopedTraceEvent event(&trace, "compute", "train step");
      train_step(i);
    }
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    train_rates.push_back(FLAGS_steps * batch / secs);
    std::printf("round %d: train %.1f examples/sec (%.2f ms/step)\n", r, train_rates.back(),
                1e3 * secs / FLAGS_steps);
  }
  if (!FLAGS_trace_file.empty()) {
    model->set_trace(nullptr);
    const std::string path = FLAGS_trace_file;
    if (absl::Status s = trace.Write(Env::Default(), path); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
    std::printf("trace of %zu events written to %s\n", trace.size(), path.c_str());
  }
  for (int i = 0; i < std::max(1, FLAGS_warmup / 2); ++i) eval_step(i);
  for (int r = 0; r < FLAGS_repeats; ++r) {
    auto start = Clock::now();
    for (int i = 0; i < FLAGS_steps; ++i) eval_step(i);
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    eval_rates.push_back(FLAGS_steps * batch / secs);
  }
  std::printf("train examples/sec: %.1f\n", Median(train_rates));
  std::printf("eval examples/sec: %.1f\n", Median(eval_rates));
  // The share of the machine's GEMM rate the training step reaches: a step
  // is counted as 3 x 2 x the forward multiply-adds (forward pass, input and
  // kernel gradients; the first layer's unneeded input gradient included).
  const double macs = static_cast<double>(model->ForwardMultiplyAdds());
  const double train_gflops = 6.0 * macs * Median(train_rates) / 1e9;
  const double peak = MeasureGemmPeak();
  std::printf("forward multiply-adds per example: %.2f M\n", macs / 1e6);
  std::printf("train GFLOP/s: %.1f (6 x forward multiply-adds x examples/sec)\n", train_gflops);
  std::printf("share of the GEMM peak: %.0f%% of %d threads x %.1f GFLOP/s (1024^3, 1 thread)\n",
              100.0 * train_gflops / (FLAGS_threads * peak), FLAGS_threads, peak);
  return 0;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  // As every pstrain process does (role/role_process.cc): keep large buffers
  // mapped between steps instead of faulting fresh pages in each time.
  pstrain::TuneMallocForLargeBuffers();
  pstrain::NormalizeFlagSpellings(argc, argv);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  if (FLAGS_distributed) {
    pstrain::DistributedBenchOptions o;
    o.model = FLAGS_model;
    o.data_dir = FLAGS_data_dir;
    o.num_ps = FLAGS_ps;
    o.num_workers = FLAGS_workers;
    o.batch_size = FLAGS_batch_size;
    o.steps = FLAGS_steps;
    o.warmup = FLAGS_warmup;
    o.update = FLAGS_update;
    o.threads_per_process = FLAGS_threads_per_process;
    o.wire_format = FLAGS_wire_dtype;
    o.tls = FLAGS_tls;
    o.ps_replication = FLAGS_ps_replication;
    return pstrain::RunDistributedBench(o);
  }
  const int threads =
      FLAGS_threads > 0 ? FLAGS_threads : static_cast<int>(std::thread::hardware_concurrency());
  FLAGS_threads = threads;
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, threads);
  return pstrain::Run();
}
