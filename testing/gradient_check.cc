#include "testing/gradient_check.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "models/random.h"

namespace pstrain {
namespace {

std::vector<const int32_t*> Lengths(const GradientCheckOptions& options) {
  std::vector<const int32_t*> lengths;
  for (const std::vector<int32_t>& l : options.lengths) {
    lengths.push_back(l.empty() ? nullptr : l.data());
  }
  return lengths;
}

void RunForward(Layer* layer, const std::vector<Tensor>& in, Tensor* out, const ForwardArgs& args) {
  if (in.size() == 1) {
    layer->Forward(in[0], out, args);
    return;
  }
  std::vector<const Tensor*> ins;
  for (const Tensor& t : in) ins.push_back(&t);
  static_cast<MultiInputLayer*>(layer)->ForwardInputs(ins, out, args);
}

double Objective(Layer* layer, const std::vector<Tensor>& in, const std::vector<float>& r,
                 const LayerVariables& vars, const GradientCheckOptions& options,
                 std::vector<float>* stats) {
  Tensor out;
  ForwardArgs args;
  args.training = options.training;
  args.seed = options.seed;
  args.params = vars.params.data();
  args.state = vars.state.data();
  args.batch_stats = stats->data();
  args.lengths = Lengths(options);
  RunForward(layer, in, &out, args);
  double sum = 0.0;
  for (int64_t i = 0; i < out.size(); ++i) sum += static_cast<double>(out[i]) * r[i];
  return sum;
}

double Error(double analytic, double numeric) {
  return std::abs(analytic - numeric) / std::max({1.0, std::abs(analytic), std::abs(numeric)});
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
  return CheckInputsGradients(layer, {batched_input}, options);
}

::testing::AssertionResult CheckInputsGradients(Layer* layer,
                                                const std::vector<Shape>& batched_inputs,
                                                const GradientCheckOptions& options) {
  std::vector<Shape> examples;
  for (const Shape& s : batched_inputs) examples.emplace_back(s.begin() + 1, s.end());
  absl::StatusOr<Shape> out_shape = BuildLayer(layer, examples);
  if (!out_shape.ok()) return ::testing::AssertionFailure() << out_shape.status();
  if (batched_inputs.size() > 1 && dynamic_cast<MultiInputLayer*>(layer) == nullptr) {
    return ::testing::AssertionFailure() << layer->name() << " is no MultiInputLayer";
  }
  LayerVariables vars = BindRandomVariables(layer, options.seed);
  std::vector<float> stats(vars.state.size());

  SplitMix64 rng(options.seed * 7919 + 3);
  std::vector<Tensor> in;
  for (const Shape& s : batched_inputs) {
    in.emplace_back(s);
    if (options.make_input) {
      options.make_input(&in.back());
    } else {
      for (int64_t i = 0; i < in.back().size(); ++i) in.back()[i] = 2.0f * rng.Uniform() - 1.0f;
    }
  }
  const int64_t out_size = NumElements(Batched(batched_inputs[0][0], *out_shape));
  std::vector<float> r(out_size);
  for (float& x : r) x = 2.0f * rng.Uniform() - 1.0f;

  // Analytic gradients.
  Tensor out;
  std::vector<Tensor> din(in.size());
  ForwardArgs fargs;
  fargs.training = options.training;
  fargs.seed = options.seed;
  fargs.params = vars.params.data();
  fargs.state = vars.state.data();
  fargs.batch_stats = stats.data();
  fargs.lengths = Lengths(options);
  RunForward(layer, in, &out, fargs);
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
  bargs.lengths = Lengths(options);
  if (in.size() == 1) {
    layer->Backward(in[0], out, dout, &din[0], bargs);
  } else {
    std::vector<const Tensor*> ins;
    std::vector<Tensor*> dins;
    for (size_t k = 0; k < in.size(); ++k) {
      ins.push_back(&in[k]);
      dins.push_back(&din[k]);
    }
    static_cast<MultiInputLayer*>(layer)->BackwardInputs(ins, out, dout, dins, bargs);
  }
  for (size_t k = 0; k < in.size(); ++k) {
    if (din[k].shape() != in[k].shape()) {
      return ::testing::AssertionFailure()
             << "input " << k << "'s gradient shape " << ShapeToString(din[k].shape());
    }
  }

  const float eps = options.epsilon;
  double worst = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    for (int64_t i : Sample(in[k].size(), options.max_checks, rng)) {
      const float saved = in[k][i];
      in[k][i] = saved + eps;
      const double plus = Objective(layer, in, r, vars, options, &stats);
      in[k][i] = saved - eps;
      const double minus = Objective(layer, in, r, vars, options, &stats);
      in[k][i] = saved;
      const double numeric = (plus - minus) / (2.0 * eps);
      const double error = Error(din[k][i], numeric);
      worst = std::max(worst, error);
      if (!(error <= options.tolerance)) {
        return ::testing::AssertionFailure()
               << layer->name() << ": d/d(input " << k << "[" << i << "]) analytic " << din[k][i]
               << " numeric " << numeric;
      }
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
    const double error = Error(grads[i], numeric);
    worst = std::max(worst, error);
    if (!(error <= options.tolerance)) {
      return ::testing::AssertionFailure() << layer->name() << ": d/d(param[" << i << "]) analytic "
                                           << grads[i] << " numeric " << numeric;
    }
  }
  if (options.max_error != nullptr) *options.max_error = worst;
  return ::testing::AssertionSuccess();
}

}  // namespace pstrain
