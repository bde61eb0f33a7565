#ifndef PSTRAIN_MODELS_RELU_H_
#define PSTRAIN_MODELS_RELU_H_

#include "models/layer.h"

namespace pstrain {

// max(x, 0), element-wise, any shape. Conv2D and Dense can fuse it instead.
class ReLU : public Layer {
 public:
  explicit ReLU(std::string name) : Layer(std::move(name)) {}

  absl::StatusOr<Shape> Build(const Shape& input) override { return input; }
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_RELU_H_
