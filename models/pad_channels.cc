#include "models/pad_channels.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "models/parallel.h"

namespace pstrain {

absl::StatusOr<Shape> PadChannels::Build(const Shape& input) {
  if (input.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": pad_channels needs inputs with a channel dimension, got ",
                     ShapeToString(input)));
  }
  in_c_ = input.back();
  if (in_c_ < 1 || filters_ < in_c_ || (filters_ - in_c_) % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(), ": pad_channels pads channels evenly on both sides, so filters (", filters_,
        ") must be the input's ", in_c_, " plus an even number; got input ", ShapeToString(input)));
  }
  pad_ = (filters_ - in_c_) / 2;
  positions_ = NumElements(input) / in_c_;
  Shape out = input;
  out.back() = filters_;
  return out;
}

void PadChannels::Forward(const Tensor& in, Tensor* out, const ForwardArgs&) {
  Shape shape = in.shape();
  shape.back() = filters_;
  out->Resize(shape);
  const int64_t rows = in.dim(0) * positions_;
  ParallelFor(rows, 256, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* y = out->data() + r * filters_;
      std::fill_n(y, pad_, 0.0f);
      std::memcpy(y + pad_, in.data() + r * in_c_, in_c_ * sizeof(float));
      std::fill_n(y + pad_ + in_c_, filters_ - pad_ - in_c_, 0.0f);
    }
  });
}

void PadChannels::Backward(const Tensor& in, const Tensor&, const Tensor& dout, Tensor* din,
                           const BackwardArgs&) {
  if (din == nullptr) return;
  din->Resize(in.shape());
  const int64_t rows = in.dim(0) * positions_;
  ParallelFor(rows, 256, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      std::memcpy(din->data() + r * in_c_, dout.data() + r * filters_ + pad_,
                  in_c_ * sizeof(float));
    }
  });
}

}  // namespace pstrain
