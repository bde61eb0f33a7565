#include "models/activation.h"

#include <cmath>

#include "models/parallel.h"

namespace pstrain {
namespace {

constexpr int64_t kGrain = 1 << 14;

using ConstArray = Eigen::Map<const Eigen::ArrayXf>;
using Array = Eigen::Map<Eigen::ArrayXf>;

}  // namespace

void ElementwiseActivation::Forward(const Tensor& in, Tensor* out, const ForwardArgs&) {
  out->Resize(in.shape());
  ParallelFor(in.size(), kGrain, [&](int64_t begin, int64_t end) {
    const ConstArray x(in.data() + begin, end - begin);
    Array y(out->data() + begin, end - begin);
    switch (kind_) {
      case ActivationKind::kSigmoid:
        y = (1.0f + (-x).exp()).inverse();
        break;
      case ActivationKind::kTanh:
        y = x.tanh();
        break;
      case ActivationKind::kLeakyRelu:
        y = (x > 0.0f).select(x, alpha_ * x);
        break;
      case ActivationKind::kGelu:
        for (int64_t i = 0; i < x.size(); ++i) {
          y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * static_cast<float>(M_SQRT1_2)));
        }
        break;
    }
  });
}

void ElementwiseActivation::Backward(const Tensor& in, const Tensor& out, const Tensor& dout,
                                     Tensor* din, const BackwardArgs&) {
  if (din == nullptr) return;
  din->Resize(in.shape());
  ParallelFor(in.size(), kGrain, [&](int64_t begin, int64_t end) {
    const int64_t n = end - begin;
    const ConstArray x(in.data() + begin, n), y(out.data() + begin, n), dy(dout.data() + begin, n);
    Array dx(din->data() + begin, n);
    switch (kind_) {
      case ActivationKind::kSigmoid:
        dx = dy * y * (1.0f - y);
        break;
      case ActivationKind::kTanh:
        dx = dy * (1.0f - y.square());
        break;
      case ActivationKind::kLeakyRelu:
        dx = (x > 0.0f).select(dy, alpha_ * dy);
        break;
      case ActivationKind::kGelu:
        // d/dx x Phi(x) = Phi(x) + x phi(x).
        for (int64_t i = 0; i < n; ++i) {
          const float cdf = 0.5f * (1.0f + std::erf(x[i] * static_cast<float>(M_SQRT1_2)));
          const float pdf =
              std::exp(-0.5f * x[i] * x[i]) * static_cast<float>(0.5 * M_2_SQRTPI * M_SQRT1_2);
          dx[i] = dy[i] * (cdf + x[i] * pdf);
        }
        break;
    }
  });
}

}  // namespace pstrain
