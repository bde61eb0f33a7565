#include "models/batch_norm.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "models/parallel.h"

namespace pstrain {
namespace {

constexpr int64_t kRowsPerChunk = 512;

// Sums f(row, partial) over chunks of rows into per-chunk slots of `width`
// doubles, then adds the chunks in order into `total`.
template <typename Fn>
void ChunkedSum(int64_t rows, int64_t width, std::vector<double>* partial, double* total, Fn&& f) {
  const int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  partial->assign(chunks * width, 0.0);
  ParallelFor(rows, kRowsPerChunk, [&](int64_t begin, int64_t end) {
    double* p = partial->data() + (begin / kRowsPerChunk) * width;
    for (int64_t r = begin; r < end; ++r) f(r, p);
  });
  std::fill_n(total, width, 0.0);
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t i = 0; i < width; ++i) total[i] += (*partial)[c * width + i];
  }
}

}  // namespace

absl::StatusOr<Shape> BatchNorm::Build(const Shape& input) {
  if (input.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": BatchNorm needs a channel axis"));
  }
  if (!(epsilon_ > 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": batch norm epsilon must be positive, got ", epsilon_));
  }
  channels_ = input.back();
  return input;
}

std::vector<VariableSpec> BatchNorm::Variables() const {
  return {{"gamma", {channels_}, true, Initializer::kOnes},
          {"beta", {channels_}, true, Initializer::kZeros},
          {"moving_mean", {channels_}, false, Initializer::kZeros},
          {"moving_variance", {channels_}, false, Initializer::kOnes}};
}

void BatchNorm::Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) {
  out->Resize(in.shape());
  const int64_t c = channels_;
  const int64_t rows = in.size() / c;
  const float* gamma = args.params + offset(0);
  const float* beta = args.params + offset(1);
  const float* x = in.data();
  float* y = out->data();
  if (!args.training) {
    const float* mean = args.state + offset(2);
    const float* var = args.state + offset(3);
    std::vector<float> scale(c), shift(c);
    for (int64_t i = 0; i < c; ++i) {
      scale[i] = gamma[i] / std::sqrt(var[i] + epsilon_);
      shift[i] = beta[i] - mean[i] * scale[i];
    }
    ParallelFor(rows, kRowsPerChunk, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        for (int64_t i = 0; i < c; ++i) y[r * c + i] = x[r * c + i] * scale[i] + shift[i];
      }
    });
    return;
  }
  // Two passes (mean, then squared deviations) for accuracy.
  std::vector<double> mean(c), var(c);
  ChunkedSum(rows, c, &partial_, mean.data(), [&](int64_t r, double* p) {
    for (int64_t i = 0; i < c; ++i) p[i] += x[r * c + i];
  });
  for (auto& m : mean) m /= static_cast<double>(rows);
  ChunkedSum(rows, c, &partial_, var.data(), [&](int64_t r, double* p) {
    for (int64_t i = 0; i < c; ++i) {
      const double d = x[r * c + i] - mean[i];
      p[i] += d * d;
    }
  });
  inv_std_.resize(c);
  std::vector<float> meanf(c);
  for (int64_t i = 0; i < c; ++i) {
    var[i] /= static_cast<double>(rows);
    inv_std_[i] = static_cast<float>(1.0 / std::sqrt(var[i] + epsilon_));
    meanf[i] = static_cast<float>(mean[i]);
  }
  xhat_.Resize(in.shape());
  float* xhat = xhat_.data();
  ParallelFor(rows, kRowsPerChunk, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t i = 0; i < c; ++i) {
        const float h = (x[r * c + i] - meanf[i]) * inv_std_[i];
        xhat[r * c + i] = h;
        y[r * c + i] = gamma[i] * h + beta[i];
      }
    }
  });
  if (args.batch_stats != nullptr) {
    const double bessel = rows > 1 ? static_cast<double>(rows) / (rows - 1) : 1.0;
    for (int64_t i = 0; i < c; ++i) {
      args.batch_stats[offset(2) + i] = static_cast<float>(mean[i]);
      args.batch_stats[offset(3) + i] = static_cast<float>(var[i] * bessel);
    }
  }
}

void BatchNorm::Backward(const Tensor& in, const Tensor&, const Tensor& dout, Tensor* din,
                         const BackwardArgs& args) {
  const int64_t c = channels_;
  const int64_t rows = in.size() / c;
  const float* dy = dout.data();
  const float* xhat = xhat_.data();
  // sums[0, c): sum(dy); sums[c, 2c): sum(dy * xhat).
  std::vector<double> sums(2 * c);
  ChunkedSum(rows, 2 * c, &partial_, sums.data(), [&](int64_t r, double* p) {
    for (int64_t i = 0; i < c; ++i) {
      p[i] += dy[r * c + i];
      p[c + i] += dy[r * c + i] * xhat[r * c + i];
    }
  });
  float* dgamma = args.grads + offset(0);
  float* dbeta = args.grads + offset(1);
  for (int64_t i = 0; i < c; ++i) {
    dbeta[i] = static_cast<float>(sums[i]);
    dgamma[i] = static_cast<float>(sums[c + i]);
  }
  if (din == nullptr) return;
  din->Resize(in.shape());
  const float* gamma = args.params + offset(0);
  std::vector<float> k(c), mean_dy(c), mean_dy_xhat(c);
  for (int64_t i = 0; i < c; ++i) {
    k[i] = gamma[i] * inv_std_[i];
    mean_dy[i] = static_cast<float>(sums[i] / rows);
    mean_dy_xhat[i] = static_cast<float>(sums[c + i] / rows);
  }
  float* dx = din->data();
  ParallelFor(rows, kRowsPerChunk, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t i = 0; i < c; ++i) {
        const int64_t j = r * c + i;
        dx[j] = k[i] * (dy[j] - mean_dy[i] - xhat[j] * mean_dy_xhat[i]);
      }
    }
  });
}

void MovingAverageUpdate(float decay, const float* batch_stats, int64_t n, float* state) {
  for (int64_t i = 0; i < n; ++i) state[i] = decay * state[i] + (1.0f - decay) * batch_stats[i];
}

}  // namespace pstrain
