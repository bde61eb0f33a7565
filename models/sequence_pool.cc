#include "models/sequence_pool.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "models/parallel.h"

namespace pstrain {

absl::StatusOr<Shape> SequencePool::Build(const Shape& input) {
  if (input.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(), ": sequence_pool takes a sequence [L, d], got ", ShapeToString(input)));
  }
  length_ = input[0];
  dim_ = input[1];
  return Shape{dim_};
}

void SequencePool::Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) {
  const int64_t batch = in.dim(0);
  const int32_t* lengths = args.length_of(0);
  out->Resize({batch, dim_});
  out->SetZero();
  valid_.resize(batch);
  if (mode_ == SequencePoolMode::kMax) argmax_.assign(batch * dim_, -1);
  ParallelFor(batch, 16, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t n = lengths != nullptr ? std::clamp<int64_t>(lengths[b], 0, length_) : length_;
      valid_[b] = static_cast<int32_t>(n);
      if (n == 0) continue;
      const float* x = in.data() + b * length_ * dim_;
      float* y = out->data() + b * dim_;
      switch (mode_) {
        case SequencePoolMode::kLast:
          std::copy(x + (n - 1) * dim_, x + n * dim_, y);
          break;
        case SequencePoolMode::kMax: {
          int32_t* arg = argmax_.data() + b * dim_;
          std::copy(x, x + dim_, y);
          std::fill(arg, arg + dim_, 0);
          for (int64_t t = 1; t < n; ++t) {
            for (int64_t j = 0; j < dim_; ++j) {
              if (x[t * dim_ + j] > y[j]) {
                y[j] = x[t * dim_ + j];
                arg[j] = static_cast<int32_t>(t);
              }
            }
          }
          break;
        }
        case SequencePoolMode::kMean:
        case SequencePoolMode::kSum: {
          for (int64_t t = 0; t < n; ++t) {
            for (int64_t j = 0; j < dim_; ++j) y[j] += x[t * dim_ + j];
          }
          if (mode_ == SequencePoolMode::kMean) {
            const float w = 1.0f / static_cast<float>(n);
            for (int64_t j = 0; j < dim_; ++j) y[j] *= w;
          }
          break;
        }
      }
    }
  });
}

void SequencePool::Backward(const Tensor& in, const Tensor& /*out*/, const Tensor& dout,
                            Tensor* din, const BackwardArgs& /*args*/) {
  if (din == nullptr) return;
  const int64_t batch = in.dim(0);
  din->Resize(in.shape());
  din->SetZero();
  ParallelFor(batch, 16, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t n = valid_[b];
      if (n == 0) continue;
      const float* g = dout.data() + b * dim_;
      float* dx = din->data() + b * length_ * dim_;
      switch (mode_) {
        case SequencePoolMode::kLast:
          std::copy(g, g + dim_, dx + (n - 1) * dim_);
          break;
        case SequencePoolMode::kMax: {
          const int32_t* arg = argmax_.data() + b * dim_;
          for (int64_t j = 0; j < dim_; ++j) dx[arg[j] * dim_ + j] = g[j];
          break;
        }
        case SequencePoolMode::kMean:
        case SequencePoolMode::kSum: {
          const float w = mode_ == SequencePoolMode::kMean ? 1.0f / static_cast<float>(n) : 1.0f;
          for (int64_t t = 0; t < n; ++t) {
            for (int64_t j = 0; j < dim_; ++j) dx[t * dim_ + j] = w * g[j];
          }
          break;
        }
      }
    }
  });
}

}  // namespace pstrain
