#include "models/dropout.h"

#include "absl/strings/str_cat.h"
#include "models/parallel.h"
#include "models/random.h"

namespace pstrain {

absl::StatusOr<Shape> Dropout::Build(const Shape& input) {
  if (!(rate_ >= 0.0f && rate_ < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": dropout rate must be in [0, 1), got ", rate_));
  }
  return input;
}

void Dropout::Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) {
  out->Resize(in.shape());
  const int64_t batch = in.dim(0);
  const int64_t per_example = in.size() / batch;
  if (!args.training || rate_ == 0.0f) {
    std::copy_n(in.data(), in.size(), out->data());
    mask_.Resize(in.shape());
    std::fill_n(mask_.data(), mask_.size(), 1.0f);
    return;
  }
  mask_.Resize(in.shape());
  const float scale = 1.0f / (1.0f - rate_);
  // Keep an element when its 24-bit uniform draw is >= rate * 2^24.
  const uint32_t threshold = static_cast<uint32_t>(static_cast<double>(rate_) * (1u << 24));
  ParallelFor(batch, 8, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      SplitMix64 rng(MixSeeds(args.seed, static_cast<uint64_t>(n)));
      float* m = mask_.data() + n * per_example;
      const float* x = in.data() + n * per_example;
      float* y = out->data() + n * per_example;
      for (int64_t i = 0; i < per_example; i += 2) {
        // One 64-bit draw gives two 24-bit uniforms.
        const uint64_t bits = rng.Next();
        for (int64_t k = 0; k < 2 && i + k < per_example; ++k) {
          const uint32_t u = static_cast<uint32_t>(bits >> (k * 32 + 8)) & 0xFFFFFF;
          m[i + k] = u >= threshold ? scale : 0.0f;
          y[i + k] = x[i + k] * m[i + k];
        }
      }
    }
  });
}

void Dropout::Backward(const Tensor& in, const Tensor&, const Tensor& dout, Tensor* din,
                       const BackwardArgs&) {
  if (din == nullptr) return;
  din->Resize(in.shape());
  ParallelFor(in.size(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) (*din)[i] = dout[i] * mask_[i];
  });
}

}  // namespace pstrain
