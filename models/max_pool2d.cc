#include "models/max_pool2d.h"

#include <limits>
#include <type_traits>

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
  // Each window's first tap is taken as it is, then a later tap wins where
  // it is strictly greater (the first maximum; a NaN first tap stays): one
  // branch-free pass over the channels per tap.
  auto pool = [&](auto with_argmax) {
    constexpr bool kArgmax = decltype(with_argmax)::value;
    const int64_t c = g_.c;
    ParallelFor(batch, 4, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        const float* x = in.data() + n * in_size;
        float* y = out->data() + n * out_size;
        int32_t* am = kArgmax ? argmax_.data() + n * out_size : nullptr;
        for (int64_t oh = 0; oh < g_.out_h; ++oh) {
          for (int64_t ow = 0; ow < g_.out_w; ++ow) {
            const int64_t o = (oh * g_.out_w + ow) * c;
            float* best = y + o;
            int32_t* index = kArgmax ? am + o : nullptr;
            bool first = true;
            for (int64_t i = 0; i < pool_size_; ++i) {
              const int64_t ih = oh * stride_ - g_.pad_top + i;
              if (ih < 0 || ih >= g_.in_h) continue;
              for (int64_t j = 0; j < pool_size_; ++j) {
                const int64_t iw = ow * stride_ - g_.pad_left + j;
                if (iw < 0 || iw >= g_.in_w) continue;
                const int32_t base = static_cast<int32_t>((ih * g_.in_w + iw) * c);
                const float* xp = x + base;
                if (first) {
                  for (int64_t k = 0; k < c; ++k) best[k] = xp[k];
                  if constexpr (kArgmax) {
                    for (int64_t k = 0; k < c; ++k) index[k] = base + static_cast<int32_t>(k);
                  }
                  first = false;
                  continue;
                }
                for (int64_t k = 0; k < c; ++k) {
                  const bool wins = xp[k] > best[k];
                  best[k] = wins ? xp[k] : best[k];
                  if constexpr (kArgmax) {
                    index[k] = wins ? base + static_cast<int32_t>(k) : index[k];
                  }
                }
              }
            }
            if (first) {  // No tap inside the input.
              for (int64_t k = 0; k < c; ++k) best[k] = -std::numeric_limits<float>::infinity();
              if constexpr (kArgmax) {
                for (int64_t k = 0; k < c; ++k) index[k] = -1;
              }
            }
          }
        }
      }
    });
  };
  if (keep_argmax) {
    pool(std::true_type{});
  } else {
    pool(std::false_type{});
  }
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
