#ifndef PSTRAIN_MODELS_GLOBAL_AVG_POOL_H_
#define PSTRAIN_MODELS_GLOBAL_AVG_POOL_H_

#include "models/layer.h"

namespace pstrain {

// [batch, H, W, C] -> [batch, C]: the mean over all positions of each channel
// (tf.reduce_mean over axes 1 and 2).
class GlobalAvgPool : public Layer {
 public:
  explicit GlobalAvgPool(std::string name) : Layer(std::move(name)) {}

  absl::StatusOr<Shape> Build(const Shape& input) override;
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;

 private:
  int64_t positions_ = 0;
  int64_t channels_ = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_GLOBAL_AVG_POOL_H_
