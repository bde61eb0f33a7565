// pstrain-attention-bench: multi_head_attention's forward and backward
// passes (self-attention, every position valid) on random inputs, timed per
// step: what compare_attention.sh sets beside PyTorch's
// torch.nn.MultiheadAttention.
//
//   pstrain-attention-bench --length=50 --dim=64 --heads=4 --batch=256 --threads=2
//
// Prints "forward ms: X" and "forward+backward ms: Y", the medians of
// --steps timed steps after --warmup.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "gflags/gflags.h"
#include "models/attention.h"
#include "models/random.h"
#include "tbb/global_control.h"
#include "tests/bench/median.h"

DEFINE_int32(length, 50, "Sequence length L.");
DEFINE_int32(dim, 64, "Model dimension d (heads x key_dim).");
DEFINE_int32(heads, 4, "Heads.");
DEFINE_int32(batch, 256, "Examples per step.");
DEFINE_int32(threads, 2, "Compute threads.");
DEFINE_int32(steps, 20, "Timed steps.");
DEFINE_int32(warmup, 3, "Untimed steps first.");

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_heads < 1 || FLAGS_dim % FLAGS_heads != 0 || FLAGS_length < 1 || FLAGS_batch < 1 ||
      FLAGS_steps < 1) {
    std::fprintf(stderr, "pstrain-attention-bench: --dim must be a multiple of --heads\n");
    return 2;
  }
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism, FLAGS_threads);
  pstrain::MultiHeadAttentionOptions o;
  o.heads = FLAGS_heads;
  o.key_dim = FLAGS_dim / FLAGS_heads;
  pstrain::MultiHeadAttention layer("attention", o);
  if (!layer.Build({FLAGS_length, FLAGS_dim}).ok()) return 1;
  std::vector<float> params;
  std::vector<int64_t> offsets;
  pstrain::SplitMix64 rng(1);
  for (const pstrain::VariableSpec& v : layer.Variables()) {
    offsets.push_back(static_cast<int64_t>(params.size()));
    for (int64_t i = 0; i < pstrain::NumElements(v.shape); ++i) {
      params.push_back(0.2f * (rng.Uniform() - 0.5f));
    }
  }
  layer.BindOffsets(offsets);
  std::vector<float> grads(params.size());
  pstrain::Tensor in({FLAGS_batch, FLAGS_length, FLAGS_dim}), out, dout, din;
  for (int64_t i = 0; i < in.size(); ++i) in[i] = rng.Uniform() - 0.5f;
  dout.Resize(in.shape());
  for (int64_t i = 0; i < dout.size(); ++i) dout[i] = rng.Uniform() - 0.5f;
  pstrain::ForwardArgs forward;
  forward.training = true;
  forward.params = params.data();
  pstrain::BackwardArgs backward;
  backward.params = params.data();
  backward.grads = grads.data();
  std::vector<double> forward_ms, step_ms;
  using Clock = std::chrono::steady_clock;
  for (int s = 0; s < FLAGS_warmup + FLAGS_steps; ++s) {
    const auto start = Clock::now();
    layer.Forward(in, &out, forward);
    const auto middle = Clock::now();
    layer.Backward(in, out, dout, &din, backward);
    const auto end = Clock::now();
    if (s < FLAGS_warmup) continue;
    forward_ms.push_back(std::chrono::duration<double, std::milli>(middle - start).count());
    step_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }
  std::printf("attention L=%d d=%d heads=%d batch=%d threads=%d\n", FLAGS_length, FLAGS_dim,
              FLAGS_heads, FLAGS_batch, FLAGS_threads);
  std::printf("forward ms: %.2f\n", pstrain::Median(forward_ms));
  std::printf("forward+backward ms: %.2f\n", pstrain::Median(step_ms));
  return 0;
}
