#include "models/max_pool2d.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "models/parallel.h"

namespace pstrain {

MaxPool2D::MaxPool2D(std::string name, int pool_size, int stride, Padding padding)
    : Layer(std::move(name)), pool_size_(pool_size), stride_(stride), padding_(padding) {}

absl::StatusOr<Shape> MaxPool2D::Build(const Shape& input) {
  absl::StatusOr<PoolGeometry> g =
      ComputePoolGeometry(name(), "MaxPool2D", input, pool_size_, stride_, padding_);
  if (!g.ok()) return g.status();
  g_ = *g;
  return Shape{g_.out_h, g_.out_w, g_.c};
}

void MaxPool2D::Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) {
  const int64_t batch = in.dim(0);
  out->Resize({batch, g_.out_h, g_.out_w, g_.c});
  const int64_t out_size = g_.out_h * g_.out_w * g_.c;
  const int64_t in_size = g_.in_h * g_.in_w * g_.c;
  const bool keep_argmax = args.training;
  if (keep_argmax) argmax_.resize(batch * out_size);
  ParallelFor(batch, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> best(g_.c);
    std::vector<int32_t> best_index(g_.c);
    for (int64_t n = begin; n < end; ++n) {
      const float* x = in.data() + n * in_size;
      float* y = out->data() + n * out_size;
      int32_t* am = keep_argmax ? argmax_.data() + n * out_size : nullptr;
      for (int64_t oh = 0; oh < g_.out_h; ++oh) {
        for (int64_t ow = 0; ow < g_.out_w; ++ow) {
          std::fill(best.begin(), best.end(), -std::numeric_limits<float>::infinity());
          std::fill(best_index.begin(), best_index.end(), -1);
          for (int64_t i = 0; i < pool_size_; ++i) {
            const int64_t ih = oh * stride_ - g_.pad_top + i;
            if (ih < 0 || ih >= g_.in_h) continue;
            for (int64_t j = 0; j < pool_size_; ++j) {
              const int64_t iw = ow * stride_ - g_.pad_left + j;
              if (iw < 0 || iw >= g_.in_w) continue;
              const int64_t base = (ih * g_.in_w + iw) * g_.c;
              for (int64_t c = 0; c < g_.c; ++c) {
                // Strict '>' keeps the first maximum; '!(<=)' also takes a NaN.
                if (x[base + c] > best[c] || best_index[c] < 0) {
                  best[c] = x[base + c];
                  best_index[c] = static_cast<int32_t>(base + c);
                }
              }
            }
          }
          const int64_t o = (oh * g_.out_w + ow) * g_.c;
          for (int64_t c = 0; c < g_.c; ++c) {
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
  const int64_t out_size = g_.out_h * g_.out_w * g_.c;
  const int64_t in_size = g_.in_h * g_.in_w * g_.c;
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
