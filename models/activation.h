#ifndef PSTRAIN_MODELS_ACTIVATION_H_
#define PSTRAIN_MODELS_ACTIVATION_H_

#include <string>

#include "models/layer.h"

namespace pstrain {

// The cheap element-wise activations as layers of their own, any shape:
//   sigmoid     1 / (1 + e^-x)
//   tanh        tanh(x)
//   leaky_relu  x if x > 0, else alpha * x (Keras' LeakyReLU; tf.nn's alpha 0.2)
//   gelu        x * Phi(x) = x / 2 * (1 + erf(x / sqrt(2))), the exact form
//               (torch.nn.GELU(), tf.nn.gelu(approximate=False))
// The backward pass reads the forward output where it can (sigmoid, tanh), so
// it recomputes nothing. ReLU stays its own layer (relu.h) and can be fused
// into Conv2D and Dense.
enum class ActivationKind { kSigmoid, kTanh, kLeakyRelu, kGelu };

class ElementwiseActivation : public Layer {
 public:
  ElementwiseActivation(std::string name, ActivationKind kind, float alpha = 0.2f)
      : Layer(std::move(name)), kind_(kind), alpha_(alpha) {}

  absl::StatusOr<Shape> Build(const Shape& input) override { return input; }
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;

 private:
  const ActivationKind kind_;
  const float alpha_;
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_ACTIVATION_H_
