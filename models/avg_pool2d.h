#ifndef PSTRAIN_MODELS_AVG_POOL2D_H_
#define PSTRAIN_MODELS_AVG_POOL2D_H_

#include "models/conv2d.h"
#include "models/layer.h"

namespace pstrain {

// Average pooling over NHWC inputs, as tf.layers.average_pooling2d (default
// VALID padding). With SAME padding an output averages the inputs its window
// covers, not the padding (TensorFlow's count_include_pad = false).
class AvgPool2D : public Layer {
 public:
  AvgPool2D(std::string name, int pool_size, int stride, Padding padding = Padding::kValid);

  absl::StatusOr<Shape> Build(const Shape& input) override;
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;

 private:
  // The window of output (oh, ow) clipped to the input: [h0, h1) x [w0, w1).
  void Window(int64_t oh, int64_t ow, int64_t* h0, int64_t* h1, int64_t* w0, int64_t* w1) const;

  int pool_size_;
  int stride_;
  Padding padding_;
  PoolGeometry g_;
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_AVG_POOL2D_H_
