#ifndef PSTRAIN_MODELS_LAYER_NORM_H_
#define PSTRAIN_MODELS_LAYER_NORM_H_

#include <string>
#include <vector>

#include "models/layer.h"

namespace pstrain {

// Layer normalization over the last dimension (Ba et al. 2016), as
// torch.nn.LayerNorm(d) and tf.keras.layers.LayerNormalization(axis=-1): each
// row of d values (every position of every example) is normalized by its own
// mean and biased variance, then scaled and shifted by trainable "gamma" [d]
// (ones) and "beta" [d] (zeros):
//   y = gamma * (x - mean) / sqrt(var + epsilon) + beta
// The same in training and evaluation; no state.
class LayerNorm : public Layer {
 public:
  LayerNorm(std::string name, float epsilon) : Layer(std::move(name)), epsilon_(epsilon) {}

  absl::StatusOr<Shape> Build(const Shape& input) override;
  std::vector<VariableSpec> Variables() const override;
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;

 private:
  const float epsilon_;
  int64_t dim_ = 0;
  Tensor normalized_;           // (x - mean) / sqrt(var + epsilon), last forward pass
  std::vector<float> inv_std_;  // per row, last forward pass
  std::vector<float> partial_;  // per-chunk sums of the variables' gradients
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_LAYER_NORM_H_
