#include "models/layer.h"

#include "absl/strings/str_cat.h"

namespace pstrain {

int Layer::MaskFrom(const std::vector<Shape>& inputs, const Shape& output) const {
  if (inputs.empty() || inputs[0].size() < 2 || output.size() < 2) return -1;
  return output[0] == inputs[0][0] ? 0 : -1;
}

absl::StatusOr<Shape> BuildLayer(Layer* layer, const std::vector<Shape>& inputs) {
  if (auto* merge = dynamic_cast<MergeLayer*>(layer)) return merge->BuildMerge(inputs);
  if (auto* multi = dynamic_cast<MultiInputLayer*>(layer)) {
    if (inputs.empty() || inputs.size() > multi->MaxInputs()) {
      return absl::InvalidArgumentError(absl::StrCat(
          layer->name(), " takes 1 to ", multi->MaxInputs(), " inputs, got ", inputs.size()));
    }
    return multi->BuildInputs(inputs);
  }
  if (inputs.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(layer->name(), " takes one input, got ", inputs.size()));
  }
  return layer->Build(inputs[0]);
}

}  // namespace pstrain
