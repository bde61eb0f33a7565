#include "models/max_pool2d.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "models/parallel.h"

namespace pstrain {

MaxPool2D::MaxPool2D(std::string name, int pool_size, int stride, Padding padding)
    : Layer(std::move(name)), pool_size_(pool_size), stride_(stride), padding_(padding) {}

absl::StatusOr<Shape> MaxPool2D::Build(const Shape& input) {
  if (input.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(), ": MaxPool2D needs height x width x channels inputs, got ", ShapeToString(input)));
  }
  if (pool_size_ <= 0 || stride_ <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": pool size and stride must be positive"));
  }
  in_h_ = input[0];
  in_w_ = input[1];
  c_ = input[2];
  PaddedDim h = ComputePadding(in_h_, pool_size_, stride_, padding_);
  PaddedDim w = ComputePadding(in_w_, pool_size_, stride_, padding_);
  if (h.out <= 0 || w.out <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": pool ", pool_size_, " does not fit in ", ShapeToString(input)));
  }
  out_h_ = h.out;
  out_w_ = w.out;
  pad_top_ = h.pad_before;
  pad_left_ = w.pad_before;
  return Shape{out_h_, out_w_, c_};
}

void MaxPool2D::Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) {
  const int64_t batch = in.dim(0);
  out->Resize({batch, out_h_, out_w_, c_});
  const int64_t out_size = out_h_ * out_w_ * c_;
  const int64_t in_size = in_h_ * in_w_ * c_;
  const bool keep_argmax = args.training;
  if (keep_argmax) argmax_.resize(batch * out_size);
  ParallelFor(batch, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> best(c_);
    std::vector<int32_t> best_index(c_);
    for (int64_t n = begin; n < end; ++n) {
      const float* x = in.data() + n * in_size;
      float* y = out->data() + n * out_size;
      int32_t* am = keep_argmax ? argmax_.data() + n * out_size : nullptr;
      for (int64_t oh = 0; oh < out_h_; ++oh) {
        for (int64_t ow = 0; ow < out_w_; ++ow) {
          std::fill(best.begin(), best.end(), -std::numeric_limits<float>::infinity());
          std::fill(best_index.begin(), best_index.end(), -1);
          for (int64_t i = 0; i < pool_size_; ++i) {
            const int64_t ih = oh * stride_ - pad_top_ + i;
            if (ih < 0 || ih >= in_h_) continue;
            for (int64_t j = 0; j < pool_size_; ++j) {
              const int64_t iw = ow * stride_ - pad_left_ + j;
              if (iw < 0 || iw >= in_w_) continue;
              const int64_t base = (ih * in_w_ + iw) * c_;
              for (int64_t c = 0; c < c_; ++c) {
                // Strict '>' keeps the first maximum; '!(<=)' also takes a NaN.
                if (x[base + c] > best[c] || best_index[c] < 0) {
                  best[c] = x[base + c];
                  best_index[c] = static_cast<int32_t>(base + c);
                }
              }
            }
          }
          const int64_t o = (oh * out_w_ + ow) * c_;
          for (int64_t c = 0; c < c_; ++c) {
            y[o + c] = best[c];
            if (am) am[o + c] = best_index[c];
          }
        }
      }
    }
  });
}

void MaxPool2D::Backward(const Tensor& in, const Tensor&, const Tensor& dout, Tensor* din,
                         const BackwardArgs&) {
  if (din == nullptr) return;
  const int64_t batch = in.dim(0);
  din->Resize(in.shape());
  const int64_t out_size = out_h_ * out_w_ * c_;
  const int64_t in_size = in_h_ * in_w_ * c_;
  ParallelFor(batch, 4, [&](int64_t begin, int64_t end) {
    std::fill(din->data() + begin * in_size, din->data() + end * in_size, 0.0f);
    for (int64_t n = begin; n < end; ++n) {
      float* dx = din->data() + n * in_size;
      const float* dy = dout.data() + n * out_size;
      const int32_t* am = argmax_.data() + n * out_size;
      for (int64_t o = 0; o < out_size; ++o) dx[am[o]] += dy[o];
    }
  });
}

}  // namespace pstrain
