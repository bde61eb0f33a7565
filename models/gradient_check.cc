#include "models/gradient_check.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "models/random.h"

namespace pstrain {
namespace {

double Objective(Layer* layer, const Tensor& in, const std::vector<float>& r,
                 const LayerVariables& vars, const GradientCheckOptions& options,
                 std::vector<float>* stats) {
  Tensor out;
  ForwardArgs args;
  args.training = options.training;
  args.seed = options.seed;
  args.params = vars.params.data();
  args.state = vars.state.data();
  args.batch_stats = stats->data();
  layer->Forward(in, &out, args);
  double sum = 0.0;
  for (int64_t i = 0; i < out.size(); ++i) sum += static_cast<double>(out[i]) * r[i];
  return sum;
}

bool Close(double analytic, double numeric, double tol) {
  return std::abs(analytic - numeric) <=
         tol * std::max({1.0, std::abs(analytic), std::abs(numeric)});
}

std::vector<int64_t> Sample(int64_t n, int max, SplitMix64& rng) {
  std::vector<int64_t> idx;
  if (n <= max) {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
  } else {
    for (int i = 0; i < max; ++i) idx.push_back(static_cast<int64_t>(rng.Next() % n));
  }
  return idx;
}

}  // namespace

LayerVariables BindRandomVariables(Layer* layer, uint64_t seed) {
  SplitMix64 rng(seed);
  LayerVariables vars;
  std::vector<int64_t> offsets;
  for (const VariableSpec& spec : layer->Variables()) {
    std::vector<float>& v = spec.trainable ? vars.params : vars.state;
    offsets.push_back(static_cast<int64_t>(v.size()));
    for (int64_t i = 0; i < NumElements(spec.shape); ++i) {
      // Moving variances must stay positive; everything else centred.
      v.push_back(spec.trainable ? rng.Uniform() - 0.5f : 0.5f + rng.Uniform());
    }
  }
  layer->BindOffsets(offsets);
  return vars;
}

::testing::AssertionResult CheckGradients(Layer* layer, const Shape& batched_input,
                                          const GradientCheckOptions& options) {
  Shape example(batched_input.begin() + 1, batched_input.end());
  absl::StatusOr<Shape> out_shape = layer->Build(example);
  if (!out_shape.ok()) return ::testing::AssertionFailure() << out_shape.status();
  LayerVariables vars = BindRandomVariables(layer, options.seed);
  std::vector<float> stats(vars.state.size());

  SplitMix64 rng(options.seed * 7919 + 3);
  Tensor in(batched_input);
  if (options.make_input) {
    options.make_input(&in);
  } else {
    for (int64_t i = 0; i < in.size(); ++i) in[i] = 2.0f * rng.Uniform() - 1.0f;
  }
  const int64_t out_size = NumElements(Batched(batched_input[0], *out_shape));
  std::vector<float> r(out_size);
  for (float& x : r) x = 2.0f * rng.Uniform() - 1.0f;

  // Analytic gradients.
  Tensor out, din;
  ForwardArgs fargs;
  fargs.training = options.training;
  fargs.seed = options.seed;
  fargs.params = vars.params.data();
  fargs.state = vars.state.data();
  fargs.batch_stats = stats.data();
  layer->Forward(in, &out, fargs);
  if (out.size() != out_size) {
    return ::testing::AssertionFailure()
           << "output has " << out.size() << " elements, Build said " << out_size;
  }
  Tensor dout(out.shape());
  std::copy(r.begin(), r.end(), dout.data());
  std::vector<float> grads(vars.params.size(), std::nanf(""));
  BackwardArgs bargs;
  bargs.params = vars.params.data();
  bargs.grads = grads.data();
  layer->Backward(in, out, dout, &din, bargs);
  if (din.shape() != in.shape()) {
    return ::testing::AssertionFailure() << "input gradient shape " << ShapeToString(din.shape());
  }

  const float eps = options.epsilon;
  for (int64_t i : Sample(in.size(), options.max_checks, rng)) {
    const float saved = in[i];
    in[i] = saved + eps;
    const double plus = Objective(layer, in, r, vars, options, &stats);
    in[i] = saved - eps;
    const double minus = Objective(layer, in, r, vars, options, &stats);
    in[i] = saved;
    const double numeric = (plus - minus) / (2.0 * eps);
    if (!Close(din[i], numeric, options.tolerance)) {
      return ::testing::AssertionFailure() << layer->name() << ": d/d(input[" << i << "]) analytic "
                                           << din[i] << " numeric " << numeric;
    }
  }
  for (int64_t i : Sample(static_cast<int64_t>(vars.params.size()), options.max_checks, rng)) {
    const float saved = vars.params[i];
    vars.params[i] = saved + eps;
    const double plus = Objective(layer, in, r, vars, options, &stats);
    vars.params[i] = saved - eps;
    const double minus = Objective(layer, in, r, vars, options, &stats);
    vars.params[i] = saved;
    const double numeric = (plus - minus) / (2.0 * eps);
    if (!Close(grads[i], numeric, options.tolerance)) {
      return ::testing::AssertionFailure() << layer->name() << ": d/d(param[" << i << "]) analytic "
                                           << grads[i] << " numeric " << numeric;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace pstrain
