#ifndef PSTRAIN_MODELS_MERGE_H_
#define PSTRAIN_MODELS_MERGE_H_

#include "models/layer.h"

namespace pstrain {

// The sum of inputs of one shape (tf.keras.layers.Add): residual connections.
class Add : public MergeLayer {
 public:
  using MergeLayer::MergeLayer;
  absl::StatusOr<Shape> BuildMerge(const std::vector<Shape>& inputs) override;
  void ForwardMerge(const std::vector<const Tensor*>& in, Tensor* out) override;
  void BackwardMerge(const std::vector<const Tensor*>& in, const Tensor& dout,
                     const std::vector<Tensor*>& din) override;
};

// Inputs joined along their last (channel) dimension, the others equal
// (tf.keras.layers.Concatenate()): Inception-style blocks, two towers.
class Concat : public MergeLayer {
 public:
  using MergeLayer::MergeLayer;
  absl::StatusOr<Shape> BuildMerge(const std::vector<Shape>& inputs) override;
  void ForwardMerge(const std::vector<const Tensor*>& in, Tensor* out) override;
  void BackwardMerge(const std::vector<const Tensor*>& in, const Tensor& dout,
                     const std::vector<Tensor*>& din) override;

 private:
  std::vector<int64_t> widths_;  // each input's last dimension
  int64_t total_ = 0;
};

// Its input, unchanged: a named junction in a graph of layers.
class Identity : public Layer {
 public:
  using Layer::Layer;
  absl::StatusOr<Shape> Build(const Shape& input) override { return input; }
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_MERGE_H_
