#include "models/layer_norm.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "models/parallel.h"

namespace pstrain {
namespace {

constexpr int64_t kRowsPerChunk = 256;

}  // namespace

absl::StatusOr<Shape> LayerNorm::Build(const Shape& input) {
  if (input.empty() || input.back() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": layer_norm normalizes the last dimension; its input has none"));
  }
  if (!(epsilon_ > 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": layer_norm epsilon must be positive, got ", epsilon_));
  }
  dim_ = input.back();
  return input;
}

std::vector<VariableSpec> LayerNorm::Variables() const {
  return {{"gamma", {dim_}, true, Initializer::kOnes}, {"beta", {dim_}, true, Initializer::kZeros}};
}

void LayerNorm::Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) {
  out->Resize(in.shape());
  normalized_.Resize(in.shape());
  const int64_t d = dim_;
  const int64_t rows = in.size() / d;
  inv_std_.resize(rows);
  const float* gamma = args.params + offset(0);
  const float* beta = args.params + offset(1);
  ParallelFor(rows, kRowsPerChunk, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* x = in.data() + r * d;
      float* xhat = normalized_.data() + r * d;
      float* y = out->data() + r * d;
      double sum = 0;
      for (int64_t j = 0; j < d; ++j) sum += x[j];
      const float mean = static_cast<float>(sum / d);
      double squares = 0;
      for (int64_t j = 0; j < d; ++j) squares += (x[j] - mean) * (x[j] - mean);
      const float inv = 1.0f / std::sqrt(static_cast<float>(squares / d) + epsilon_);
      inv_std_[r] = inv;
      for (int64_t j = 0; j < d; ++j) {
        xhat[j] = (x[j] - mean) * inv;
        y[j] = gamma[j] * xhat[j] + beta[j];
      }
    }
  });
}

void LayerNorm::Backward(const Tensor& in, const Tensor&, const Tensor& dout, Tensor* din,
                         const BackwardArgs& args) {
  const int64_t d = dim_;
  const int64_t rows = in.size() / d;
  const float* gamma = args.params + offset(0);
  // dgamma = sum over rows of dy * xhat, dbeta = sum of dy: per chunk of
  // rows, then the chunks in order (the same sums on any number of threads).
  const int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  partial_.assign(chunks * 2 * d, 0.0f);
  if (din != nullptr) din->Resize(in.shape());
  ParallelFor(rows, kRowsPerChunk, [&](int64_t begin, int64_t end) {
    float* dgamma = partial_.data() + (begin / kRowsPerChunk) * 2 * d;
    float* dbeta = dgamma + d;
    for (int64_t r = begin; r < end; ++r) {
      const float* dy = dout.data() + r * d;
      const float* xhat = normalized_.data() + r * d;
      double sum_g = 0, sum_gx = 0;  // of dxhat = dy * gamma, and of dxhat * xhat
      for (int64_t j = 0; j < d; ++j) {
        dgamma[j] += dy[j] * xhat[j];
        dbeta[j] += dy[j];
        const float g = dy[j] * gamma[j];
        sum_g += g;
        sum_gx += g * xhat[j];
      }
      if (din == nullptr) continue;
      // dx = inv / d * (d * dxhat - sum(dxhat) - xhat * sum(dxhat * xhat)).
      float* dx = din->data() + r * d;
      const float inv = inv_std_[r];
      const float mean_g = static_cast<float>(sum_g / d), mean_gx = static_cast<float>(sum_gx / d);
      for (int64_t j = 0; j < d; ++j) {
        dx[j] = inv * (dy[j] * gamma[j] - mean_g - xhat[j] * mean_gx);
      }
    }
  });
  float* dgamma = args.grads + offset(0);
  float* dbeta = args.grads + offset(1);
  std::fill_n(dgamma, d, 0.0f);
  std::fill_n(dbeta, d, 0.0f);
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t j = 0; j < d; ++j) {
      dgamma[j] += partial_[c * 2 * d + j];
      dbeta[j] += partial_[c * 2 * d + d + j];
    }
  }
}

}  // namespace pstrain
