#include "models/global_avg_pool.h"

#include "absl/strings/str_cat.h"
#include "models/parallel.h"

namespace pstrain {

absl::StatusOr<Shape> GlobalAvgPool::Build(const Shape& input) {
  if (input.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": GlobalAvgPool needs height x width x channels inputs, got ",
                     ShapeToString(input)));
  }
  positions_ = input[0] * input[1];
  channels_ = input[2];
  return Shape{channels_};
}

void GlobalAvgPool::Forward(const Tensor& in, Tensor* out, const ForwardArgs&) {
  const int64_t batch = in.dim(0);
  out->Resize({batch, channels_});
  const float inv = 1.0f / static_cast<float>(positions_);
  ParallelFor(batch, 8, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      Eigen::Map<const Eigen::MatrixXf> x(in.data() + n * positions_ * channels_, channels_,
                                          positions_);
      Eigen::Map<Eigen::VectorXf>(out->data() + n * channels_, channels_) = x.rowwise().sum() * inv;
    }
  });
}

void GlobalAvgPool::Backward(const Tensor& in, const Tensor&, const Tensor& dout, Tensor* din,
                             const BackwardArgs&) {
  if (din == nullptr) return;
  const int64_t batch = in.dim(0);
  din->Resize(in.shape());
  const float inv = 1.0f / static_cast<float>(positions_);
  ParallelFor(batch, 8, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      Eigen::Map<Eigen::MatrixXf> dx(din->data() + n * positions_ * channels_, channels_,
                                     positions_);
      dx.colwise() =
          Eigen::Map<const Eigen::VectorXf>(dout.data() + n * channels_, channels_) * inv;
    }
  });
}

}  // namespace pstrain
