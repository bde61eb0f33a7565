#ifndef PSTRAIN_MODELS_MAX_POOL2D_H_
#define PSTRAIN_MODELS_MAX_POOL2D_H_

#include <vector>

#include "models/conv2d.h"
#include "models/layer.h"

namespace pstrain {

// Max pooling over NHWC inputs, as tf.layers.max_pooling2d (default VALID
// padding). Remembers each output's argmax so the backward pass routes the
// gradient to exactly one input (the first maximum on ties).
class MaxPool2D : public Layer {
 public:
  MaxPool2D(std::string name, int pool_size, int stride, Padding padding = Padding::kValid);

  absl::StatusOr<Shape> Build(const Shape& input) override;
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;

 private:
  int pool_size_;
  int stride_;
  Padding padding_;
  PoolGeometry g_;
  std::vector<int32_t> argmax_;  // Per output element: index within its example's input.
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_MAX_POOL2D_H_
