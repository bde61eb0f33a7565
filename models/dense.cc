#include "models/dense.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "models/gemm.h"
#include "models/parallel.h"

namespace pstrain {
namespace {

Eigen::Map<Eigen::ArrayXf> ArrayOf(float* p, int64_t n) { return {p, n}; }
Eigen::Map<const Eigen::ArrayXf> ArrayOf(const float* p, int64_t n) { return {p, n}; }

}  // namespace

Dense::Dense(std::string name, const DenseOptions& options)
    : Layer(std::move(name)), options_(options) {}

absl::StatusOr<Shape> Dense::Build(const Shape& input) {
  if (input.empty() || input.size() > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(),
                     ": Dense needs flat inputs or sequences [L, features] (add a Flatten "
                     "layer), got ",
                     ShapeToString(input)));
  }
  if (options_.units <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": units must be positive"));
  }
  in_features_ = input.back();
  rows_ = input.size() == 2 ? input[0] : 1;  // a sequence's positions
  Shape out = input;
  out.back() = options_.units;
  return out;
}

std::vector<VariableSpec> Dense::Variables() const {
  std::vector<VariableSpec> vars;
  vars.push_back({"kernel",
                  {in_features_, options_.units},
                  true,
                  options_.kernel_initializer,
                  in_features_,
                  options_.units});
  if (options_.use_bias)
    vars.push_back({"bias", {options_.units}, true, options_.bias_initializer});
  return vars;
}

void Dense::Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) {
  const int64_t batch = in.dim(0) * rows_;  // rows of the product
  const int64_t units = options_.units;
  Shape shape = in.shape();
  shape.back() = units;
  out->Resize(std::move(shape));
  const float* kernel = args.params + offset(0);
  ParallelGemm(false, false, batch, units, in_features_, in.data(), in_features_, kernel, units,
               false, out->data(), units);
  const float* bias = options_.use_bias ? args.params + offset(1) : nullptr;
  const bool relu = options_.activation == Activation::kRelu;
  if (bias == nullptr && !relu) return;
  ParallelFor(batch, 16, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      auto y = ArrayOf(out->data() + n * units, units);
      if (bias) y += ArrayOf(bias, units);
      if (relu) y = y.max(0.0f);
    }
  });
}

void Dense::Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                     const BackwardArgs& args) {
  const int64_t batch = in.dim(0) * rows_;  // rows of the product
  const int64_t units = options_.units;
  const float* dz = dout.data();
  if (options_.activation == Activation::kRelu) {
    dz_.Resize({batch, units});
    ParallelFor(batch * units, 1 << 14, [&](int64_t begin, int64_t end) {
      const int64_t len = end - begin;
      ArrayOf(dz_.data() + begin, len) =
          (ArrayOf(out.data() + begin, len) > 0.0f).select(ArrayOf(dout.data() + begin, len), 0.0f);
    });
    dz = dz_.data();
  }
  float* kernel_grad = args.grads + offset(0);
  ParallelGemm(true, false, in_features_, units, batch, in.data(), in_features_, dz, units, false,
               kernel_grad, units);
  if (options_.use_bias) {
    float* bias_grad = args.grads + offset(1);
    ParallelFor(units, 64, [&](int64_t begin, int64_t end) {
      auto db = ArrayOf(bias_grad + begin, end - begin);
      db.setZero();
      for (int64_t n = 0; n < batch; ++n) db += ArrayOf(dz + n * units + begin, end - begin);
    });
  }
  if (din != nullptr) {
    din->Resize(in.shape());
    const float* kernel = args.params + offset(0);
    ParallelGemm(false, true, batch, in_features_, units, dz, units, kernel, units, false,
                 din->data(), in_features_);
  }
}

}  // namespace pstrain
