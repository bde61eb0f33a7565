#include "models/avg_pool2d.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "models/parallel.h"

namespace pstrain {

AvgPool2D::AvgPool2D(std::string name, int pool_size, int stride, Padding padding)
    : Layer(std::move(name)), pool_size_(pool_size), stride_(stride), padding_(padding) {}

absl::StatusOr<Shape> AvgPool2D::Build(const Shape& input) {
  absl::StatusOr<PoolGeometry> g =
      ComputePoolGeometry(name(), "AvgPool2D", input, pool_size_, stride_, padding_);
  if (!g.ok()) return g.status();
  g_ = *g;
  return Shape{g_.out_h, g_.out_w, g_.c};
}

void AvgPool2D::Window(int64_t oh, int64_t ow, int64_t* h0, int64_t* h1, int64_t* w0,
                       int64_t* w1) const {
  *h0 = std::max<int64_t>(0, oh * stride_ - g_.pad_top);
  *h1 = std::min<int64_t>(g_.in_h, oh * stride_ - g_.pad_top + pool_size_);
  *w0 = std::max<int64_t>(0, ow * stride_ - g_.pad_left);
  *w1 = std::min<int64_t>(g_.in_w, ow * stride_ - g_.pad_left + pool_size_);
}

void AvgPool2D::Forward(const Tensor& in, Tensor* out, const ForwardArgs&) {
  const int64_t batch = in.dim(0);
  out->Resize({batch, g_.out_h, g_.out_w, g_.c});
  const int64_t out_size = g_.out_h * g_.out_w * g_.c;
  const int64_t in_size = g_.in_h * g_.in_w * g_.c;
  ParallelFor(batch, 4, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const float* x = in.data() + n * in_size;
      float* y = out->data() + n * out_size;
      for (int64_t oh = 0; oh < g_.out_h; ++oh) {
        for (int64_t ow = 0; ow < g_.out_w; ++ow) {
          int64_t h0, h1, w0, w1;
          Window(oh, ow, &h0, &h1, &w0, &w1);
          float* o = y + (oh * g_.out_w + ow) * g_.c;
          std::fill(o, o + g_.c, 0.0f);
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) {
              const float* src = x + (ih * g_.in_w + iw) * g_.c;
              for (int64_t c = 0; c < g_.c; ++c) o[c] += src[c];
            }
          }
          const float scale = 1.0f / static_cast<float>((h1 - h0) * (w1 - w0));
          for (int64_t c = 0; c < g_.c; ++c) o[c] *= scale;
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
  const int64_t out_size = g_.out_h * g_.out_w * g_.c;
  const int64_t in_size = g_.in_h * g_.in_w * g_.c;
  ParallelFor(batch, 4, [&](int64_t begin, int64_t end) {
    std::fill(din->data() + begin * in_size, din->data() + end * in_size, 0.0f);
    for (int64_t n = begin; n < end; ++n) {
      float* dx = din->data() + n * in_size;
      const float* dy = dout.data() + n * out_size;
      for (int64_t oh = 0; oh < g_.out_h; ++oh) {
        for (int64_t ow = 0; ow < g_.out_w; ++ow) {
          int64_t h0, h1, w0, w1;
          Window(oh, ow, &h0, &h1, &w0, &w1);
          const float scale = 1.0f / static_cast<float>((h1 - h0) * (w1 - w0));
          const float* g = dy + (oh * g_.out_w + ow) * g_.c;
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) {
              float* dst = dx + (ih * g_.in_w + iw) * g_.c;
              for (int64_t c = 0; c < g_.c; ++c) dst[c] += g[c] * scale;
            }
          }
        }
      }
    }
  });
}

}  // namespace pstrain
