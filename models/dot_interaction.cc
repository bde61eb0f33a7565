#include "models/dot_interaction.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {

absl::StatusOr<Shape> DotInteraction::BuildMerge(const std::vector<Shape>& inputs) {
  if (inputs.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": dot_interaction takes two inputs or more"));
  }
  for (const Shape& s : inputs) {
    if (s.size() != 1 || s[0] != inputs[0][0]) {
      std::vector<std::string> shapes;
      for (const Shape& t : inputs) shapes.push_back(ShapeToString(t));
      return absl::InvalidArgumentError(
          absl::StrCat(name(), ": dot_interaction takes flat inputs of one size, got ",
                       absl::StrJoin(shapes, ", ")));
    }
  }
  dim_ = inputs[0][0];
  count_ = static_cast<int64_t>(inputs.size());
  return Shape{dim_ + count_ * (count_ - 1) / 2};
}

void DotInteraction::ForwardMerge(const std::vector<const Tensor*>& in, Tensor* out) {
  const int64_t batch = in[0]->dim(0);
  const int64_t width = dim_ + count_ * (count_ - 1) / 2;
  out->Resize({batch, width});
  for (int64_t b = 0; b < batch; ++b) {
    float* o = out->data() + b * width;
    std::memcpy(o, in[0]->data() + b * dim_, dim_ * sizeof(float));
    int64_t p = dim_;
    for (int64_t i = 1; i < count_; ++i) {
      const float* xi = in[i]->data() + b * dim_;
      for (int64_t j = 0; j < i; ++j) {
        const float* xj = in[j]->data() + b * dim_;
        float dot = 0.0f;
        for (int64_t k = 0; k < dim_; ++k) dot += xi[k] * xj[k];
        o[p++] = dot;
      }
    }
  }
}

void DotInteraction::BackwardMerge(const std::vector<const Tensor*>& in, const Tensor& dout,
                                   const std::vector<Tensor*>& din) {
  const int64_t batch = in[0]->dim(0);
  const int64_t width = dim_ + count_ * (count_ - 1) / 2;
  for (int64_t m = 0; m < count_; ++m) {
    Tensor* d = din[m];
    if (d == nullptr) continue;
    d->Resize({batch, dim_});
    d->SetZero();
    for (int64_t b = 0; b < batch; ++b) {
      const float* g = dout.data() + b * width;
      float* dm = d->data() + b * dim_;
      if (m == 0) {
        for (int64_t k = 0; k < dim_; ++k) dm[k] = g[k];
      }
      // d(x_i . x_j)/d x_m: x_j if m == i, x_i if m == j.
      int64_t p = dim_;
      for (int64_t i = 1; i < count_; ++i) {
        for (int64_t j = 0; j < i; ++j, ++p) {
          if (i != m && j != m) continue;
          const float* other = in[i == m ? j : i]->data() + b * dim_;
          for (int64_t k = 0; k < dim_; ++k) dm[k] += g[p] * other[k];
        }
      }
    }
  }
}

}  // namespace pstrain
