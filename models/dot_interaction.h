#ifndef PSTRAIN_MODELS_DOT_INTERACTION_H_
#define PSTRAIN_MODELS_DOT_INTERACTION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "models/layer.h"
#include "models/tensor.h"

namespace pstrain {

// DLRM's feature interaction (Naumov et al. 2019, "Deep Learning
// Recommendation Model for Personalization and Recommendation Systems";
// interact_features with arch_interaction_op "dot" and
// arch_interaction_itself false): inputs x_0 .. x_{k-1}, each [d] (the
// bottom MLP's output first, then the embeddings), give
// [x_0, x_i . x_j for every i > j] of d + k (k - 1) / 2 values, the pairs in
// DLRM's order: (1, 0), (2, 0), (2, 1), (3, 0), ...
class DotInteraction : public MergeLayer {
 public:
  using MergeLayer::MergeLayer;
  absl::StatusOr<Shape> BuildMerge(const std::vector<Shape>& inputs) override;
  void ForwardMerge(const std::vector<const Tensor*>& in, Tensor* out) override;
  void BackwardMerge(const std::vector<const Tensor*>& in, const Tensor& dout,
                     const std::vector<Tensor*>& din) override;

 private:
  int64_t dim_ = 0;
  int64_t count_ = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_DOT_INTERACTION_H_
