#include "models/tensor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

void Tensor::Resize(Shape shape) {
  size_ = NumElements(shape);
  shape_ = std::move(shape);
  if (static_cast<int64_t>(buffer_.size()) < size_) buffer_.resize(size_);
}

void Tensor::SetZero() { std::fill_n(buffer_.data(), size_, 0.0f); }

}  // namespace pstrain
