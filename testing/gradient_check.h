#ifndef PSTRAIN_TESTING_GRADIENT_CHECK_H_
#define PSTRAIN_TESTING_GRADIENT_CHECK_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "gtest/gtest.h"
#include "models/layer.h"

namespace pstrain {

// Test support: checks a layer's analytic gradients against central
// differences of L = sum(out .* R) for a fixed random R, the way tiny-dnn
// checks every layer.
struct GradientCheckOptions {
  float epsilon = 1e-2f;
  float tolerance = 1e-2f;  // Relative, with an absolute floor of `tolerance`.
  bool training = true;
  int max_checks = 200;  // Sampled input elements (and as many parameters).
  uint64_t seed = 1;
  // Fills the input; uniform in [-1, 1) when unset.
  std::function<void(Tensor*)> make_input;
  // Per input: the lengths of its mask (ForwardArgs::lengths), one per
  // example; empty for none.
  std::vector<std::vector<int32_t>> lengths;
  // When set and every check passes, receives the largest |analytic -
  // numeric| / max(1, |analytic|, |numeric|) of them (for a test to print).
  double* max_error = nullptr;
};

// Builds `layer` for `batched_input` (batch first), gives it random
// parameters, and compares d(L)/d(input) and d(L)/d(every trainable variable).
::testing::AssertionResult CheckGradients(Layer* layer, const Shape& batched_input,
                                          const GradientCheckOptions& options);
// The same for a layer of several inputs (a MultiInputLayer): d(L)/d(each
// input) too.
::testing::AssertionResult CheckInputsGradients(Layer* layer,
                                                const std::vector<Shape>& batched_inputs,
                                                const GradientCheckOptions& options);

// Variable vectors of a built layer, laid out as a Model would.
struct LayerVariables {
  std::vector<float> params;
  std::vector<float> state;
};
LayerVariables BindRandomVariables(Layer* layer, uint64_t seed);

}  // namespace pstrain

#endif  // PSTRAIN_TESTING_GRADIENT_CHECK_H_
