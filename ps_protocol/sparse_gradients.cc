#include "ps_protocol/sparse_gradients.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "ps_protocol/bf16.h"

namespace pstrain {

int64_t TopKCount(int64_t size, double ratio) {
  if (size <= 0) return 0;
  const auto k = static_cast<int64_t>(std::ceil(ratio * static_cast<double>(size)));
  return std::clamp<int64_t>(k, 1, size);
}

TopKCompressor::TopKCompressor(int64_t size, double ratio)
    : k_(TopKCount(size, ratio)), residual_(size, 0.0f), order_(size) {}

void TopKCompressor::Compress(const float* grads, bool bf16, std::string* indices,
                              std::string* values) {
  const int64_t n = size();
  for (int64_t i = 0; i < n; ++i) residual_[i] += grads[i];
  std::iota(order_.begin(), order_.end(), 0u);
  const auto bigger = [this](uint32_t a, uint32_t b) {
    return std::fabs(residual_[a]) > std::fabs(residual_[b]);
  };
  std::nth_element(order_.begin(), order_.begin() + k_, order_.end(), bigger);
  std::sort(order_.begin(), order_.begin() + k_);
  indices->resize(k_ * sizeof(uint32_t));
  values->resize(k_ * (bf16 ? sizeof(uint16_t) : sizeof(float)));
  for (int64_t j = 0; j < k_; ++j) {
    const uint32_t at = order_[j];
    std::memcpy(indices->data() + j * sizeof(uint32_t), &at, sizeof(uint32_t));
    float sent = residual_[at];
    if (bf16) {
      uint16_t packed;
      FloatsToBf16(&sent, 1, &packed);
      std::memcpy(values->data() + j * sizeof(uint16_t), &packed, sizeof(uint16_t));
      Bf16ToFloats(&packed, 1, &sent);
    } else {
      std::memcpy(values->data() + j * sizeof(float), &sent, sizeof(float));
    }
    residual_[at] -= sent;  // 0, or bfloat16's rounding error
  }
}

void TopKCompressor::Reset() { std::fill(residual_.begin(), residual_.end(), 0.0f); }

double TopKCompressor::residual_l1() const {
  double sum = 0;
  for (float r : residual_) sum += std::fabs(r);
  return sum;
}

absl::Status ScatterSparse(std::string_view index_bytes, absl::Span<const float> values,
                           int64_t size, std::vector<float>* dense) {
  if (index_bytes.size() % sizeof(uint32_t) != 0 ||
      index_bytes.size() / sizeof(uint32_t) != values.size()) {
    return absl::InvalidArgumentError(absl::StrCat("a sparse push has ", index_bytes.size(),
                                                   " bytes of offsets for ", values.size(),
                                                   " values (one uint32 offset per value)"));
  }
  dense->assign(size, 0.0f);
  int64_t previous = -1;
  for (size_t j = 0; j < values.size(); ++j) {
    uint32_t at;
    std::memcpy(&at, index_bytes.data() + j * sizeof(uint32_t), sizeof(uint32_t));
    if (static_cast<int64_t>(at) <= previous || static_cast<int64_t>(at) >= size) {
      return absl::InvalidArgumentError(
          absl::StrCat("a sparse push has offset ", at, " after ", previous, " in a chunk of ",
                       size, " (offsets must increase and stay below the chunk size)"));
    }
    (*dense)[at] = values[j];
    previous = at;
  }
  return absl::OkStatus();
}

}  // namespace pstrain
