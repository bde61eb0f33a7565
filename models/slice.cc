#include "models/slice.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "models/parallel.h"

namespace pstrain {

absl::StatusOr<Shape> Slice::Build(const Shape& input) {
  if (input.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": slice takes a flat input [d] (add a flatten layer), got ",
                     ShapeToString(input)));
  }
  in_features_ = input[0];
  if (begin_ < 0 || size_ < 1 || begin_ + int64_t{size_} > in_features_) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": slice's begin (", begin_, ") and size (", size_,
                     ") take features [begin, begin + size), which must lie in the input's [0, ",
                     in_features_, ") with size >= 1"));
  }
  return Shape{size_};
}

void Slice::Forward(const Tensor& in, Tensor* out, const ForwardArgs&) {
  const int64_t batch = in.dim(0);
  out->Resize({batch, size_});
  ParallelFor(batch, 256, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      std::memcpy(out->data() + n * size_, in.data() + n * in_features_ + begin_,
                  size_ * sizeof(float));
    }
  });
}

void Slice::Backward(const Tensor& in, const Tensor&, const Tensor& dout, Tensor* din,
                     const BackwardArgs&) {
  if (din == nullptr) return;
  din->Resize(in.shape());
  const int64_t batch = in.dim(0);
  ParallelFor(batch, 256, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      float* dx = din->data() + n * in_features_;
      std::fill_n(dx, begin_, 0.0f);
      std::memcpy(dx + begin_, dout.data() + n * size_, size_ * sizeof(float));
      std::fill(dx + begin_ + size_, dx + in_features_, 0.0f);
    }
  });
}

}  // namespace pstrain
