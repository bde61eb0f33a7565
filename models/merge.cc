#include "models/merge.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {
namespace {

std::string Shapes(const std::vector<Shape>& shapes) {
  std::vector<std::string> parts;
  for (const Shape& s : shapes) parts.push_back(ShapeToString(s));
  return absl::StrJoin(parts, ", ");
}

}  // namespace

absl::StatusOr<Shape> MergeLayer::Build(const Shape& input) { return BuildMerge({input}); }

// A programmer's error: the model calls the merge entry points.
void MergeLayer::Forward(const Tensor&, Tensor*, const ForwardArgs&) {
  std::fprintf(stderr, "%s: a merge layer takes its inputs through ForwardMerge\n", name().c_str());
  std::abort();
}

void MergeLayer::Backward(const Tensor&, const Tensor&, const Tensor&, Tensor*,
                          const BackwardArgs&) {
  std::fprintf(stderr, "%s: a merge layer takes its inputs through BackwardMerge\n",
               name().c_str());
  std::abort();
}

absl::StatusOr<Shape> Add::BuildMerge(const std::vector<Shape>& inputs) {
  if (inputs.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": add takes two inputs or more"));
  }
  for (const Shape& s : inputs) {
    if (s != inputs[0]) {
      return absl::InvalidArgumentError(
          absl::StrCat(name(), ": add takes inputs of one shape, got ", Shapes(inputs)));
    }
  }
  return inputs[0];
}

void Add::ForwardMerge(const std::vector<const Tensor*>& in, Tensor* out) {
  out->Resize(in[0]->shape());
  std::memcpy(out->data(), in[0]->data(), in[0]->size() * sizeof(float));
  for (size_t k = 1; k < in.size(); ++k) {
    float* y = out->data();
    const float* x = in[k]->data();
    for (int64_t i = 0; i < out->size(); ++i) y[i] += x[i];
  }
}

void Add::BackwardMerge(const std::vector<const Tensor*>& in, const Tensor& dout,
                        const std::vector<Tensor*>& din) {
  for (size_t k = 0; k < in.size(); ++k) {
    if (din[k] == nullptr) continue;
    din[k]->Resize(dout.shape());
    std::memcpy(din[k]->data(), dout.data(), dout.size() * sizeof(float));
  }
}

absl::StatusOr<Shape> Concat::BuildMerge(const std::vector<Shape>& inputs) {
  if (inputs.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": concat takes two inputs or more"));
  }
  widths_.clear();
  total_ = 0;
  for (const Shape& s : inputs) {
    const bool fits = !s.empty() && s.size() == inputs[0].size() &&
                      std::equal(s.begin(), s.end() - 1, inputs[0].begin());
    if (!fits) {
      return absl::InvalidArgumentError(
          absl::StrCat(name(),
                       ": concat joins inputs along their last dimension, the others "
                       "equal; got ",
                       Shapes(inputs)));
    }
    widths_.push_back(s.back());
    total_ += s.back();
  }
  Shape out = inputs[0];
  out.back() = total_;
  return out;
}

void Concat::ForwardMerge(const std::vector<const Tensor*>& in, Tensor* out) {
  Shape shape = in[0]->shape();
  shape.back() = total_;
  out->Resize(shape);
  const int64_t rows = total_ > 0 ? out->size() / total_ : 0;
  int64_t at = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    const int64_t w = widths_[k];
    for (int64_t r = 0; r < rows && w > 0; ++r) {  // an empty input (input: [0]) adds nothing
      std::memcpy(out->data() + r * total_ + at, in[k]->data() + r * w, w * sizeof(float));
    }
    at += w;
  }
}

void Concat::BackwardMerge(const std::vector<const Tensor*>& in, const Tensor& dout,
                           const std::vector<Tensor*>& din) {
  const int64_t rows = total_ > 0 ? dout.size() / total_ : 0;
  int64_t at = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    const int64_t w = widths_[k];
    if (din[k] != nullptr) {
      din[k]->Resize(in[k]->shape());
      for (int64_t r = 0; r < rows && w > 0; ++r) {
        std::memcpy(din[k]->data() + r * w, dout.data() + r * total_ + at, w * sizeof(float));
      }
    }
    at += w;
  }
}

void Identity::Forward(const Tensor& in, Tensor* out, const ForwardArgs&) {
  out->Resize(in.shape());
  std::memcpy(out->data(), in.data(), in.size() * sizeof(float));
}

void Identity::Backward(const Tensor& in, const Tensor&, const Tensor& dout, Tensor* din,
                        const BackwardArgs&) {
  if (din == nullptr) return;
  din->Resize(in.shape());
  std::memcpy(din->data(), dout.data(), dout.size() * sizeof(float));
}

}  // namespace pstrain
