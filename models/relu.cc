#include "models/relu.h"

#include "models/parallel.h"

namespace pstrain {
namespace {

constexpr int64_t kGrain = 1 << 14;

}  // namespace

void ReLU::Forward(const Tensor& in, Tensor* out, const ForwardArgs&) {
  out->Resize(in.shape());
  ParallelFor(in.size(), kGrain, [&](int64_t begin, int64_t end) {
    Eigen::Map<Eigen::ArrayXf>(out->data() + begin, end - begin) =
        Eigen::Map<const Eigen::ArrayXf>(in.data() + begin, end - begin).max(0.0f);
  });
}

void ReLU::Backward(const Tensor& in, const Tensor&, const Tensor& dout, Tensor* din,
                    const BackwardArgs&) {
  if (din == nullptr) return;
  din->Resize(in.shape());
  ParallelFor(in.size(), kGrain, [&](int64_t begin, int64_t end) {
    const int64_t n = end - begin;
    Eigen::Map<Eigen::ArrayXf>(din->data() + begin, n) =
        (Eigen::Map<const Eigen::ArrayXf>(in.data() + begin, n) > 0.0f)
            .select(Eigen::Map<const Eigen::ArrayXf>(dout.data() + begin, n), 0.0f);
  });
}

}  // namespace pstrain
