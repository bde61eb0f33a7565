#include "models/avg_pool2d.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "models/parallel.h"

namespace pstrain {

AvgPool2D::AvgPool2D(std::string name, int pool_size, int stride, Padding padding)
    : Layer(std::move(name)), pool_size_(pool_size), stride_(stride), padding_(padding) {}

absl::StatusOr<Shape> AvgPool2D::Build(const Shape& input) {
  if (input.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(), ": AvgPool2D needs height x width x channels inputs, got ", ShapeToString(input)));
  }
  if (pool_size_ <= 0 || stride_ <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": pool size and stride must be positive"));
  }
  in_h_ = input[0];
  in_w_ = input[1];
  c_ = input[2];
  const PaddedDim h = ComputePadding(in_h_, pool_size_, stride_, padding_);
  const PaddedDim w = ComputePadding(in_w_, pool_size_, stride_, padding_);
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

void AvgPool2D::Window(int64_t oh, int64_t ow, int64_t* h0, int64_t* h1, int64_t* w0,
                       int64_t* w1) const {
  *h0 = std::max<int64_t>(0, oh * stride_ - pad_top_);
  *h1 = std::min<int64_t>(in_h_, oh * stride_ - pad_top_ + pool_size_);
  *w0 = std::max<int64_t>(0, ow * stride_ - pad_left_);
  *w1 = std::min<int64_t>(in_w_, ow * stride_ - pad_left_ + pool_size_);
}

void AvgPool2D::Forward(const Tensor& in, Tensor* out, const ForwardArgs&) {
  const int64_t batch = in.dim(0);
  out->Resize({batch, out_h_, out_w_, c_});
  const int64_t out_size = out_h_ * out_w_ * c_;
  const int64_t in_size = in_h_ * in_w_ * c_;
  ParallelFor(batch, 4, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const float* x = in.data() + n * in_size;
      float* y = out->data() + n * out_size;
      for (int64_t oh = 0; oh < out_h_; ++oh) {
        for (int64_t ow = 0; ow < out_w_; ++ow) {
          int64_t h0, h1, w0, w1;
          Window(oh, ow, &h0, &h1, &w0, &w1);
          float* o = y + (oh * out_w_ + ow) * c_;
          std::fill(o, o + c_, 0.0f);
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) {
              const float* src = x + (ih * in_w_ + iw) * c_;
              for (int64_t c = 0; c < c_; ++c) o[c] += src[c];
            }
          }
          const float scale = 1.0f / static_cast<float>((h1 - h0) * (w1 - w0));
          for (int64_t c = 0; c < c_; ++c) o[c] *= scale;
        }
      }
    }
  });
}

void AvgPool2D::Backward(const Tensor& in, const Tensor&, const Tensor& dout, Tensor* din,
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
      for (int64_t oh = 0; oh < out_h_; ++oh) {
        for (int64_t ow = 0; ow < out_w_; ++ow) {
          int64_t h0, h1, w0, w1;
          Window(oh, ow, &h0, &h1, &w0, &w1);
          const float scale = 1.0f / static_cast<float>((h1 - h0) * (w1 - w0));
          const float* g = dy + (oh * out_w_ + ow) * c_;
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) {
              float* dst = dx + (ih * in_w_ + iw) * c_;
              for (int64_t c = 0; c < c_; ++c) dst[c] += g[c] * scale;
            }
          }
        }
      }
    }
  });
}

}  // namespace pstrain
