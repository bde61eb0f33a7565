#ifndef PSTRAIN_MODELS_DROPOUT_H_
#define PSTRAIN_MODELS_DROPOUT_H_

#include "models/layer.h"

namespace pstrain {

// In training, zeroes each element with probability `rate` and scales the rest
// by 1 / (1 - rate) (tf.layers.dropout); identity in evaluation. The mask of
// example n is drawn from a generator seeded by (args.seed, n), so a step is
// reproducible whatever the number of threads.
class Dropout : public Layer {
 public:
  Dropout(std::string name, float rate) : Layer(std::move(name)), rate_(rate) {}

  absl::StatusOr<Shape> Build(const Shape& input) override;
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;

 private:
  float rate_;
  Tensor mask_;  // 0 or 1 / (1 - rate) per element of the last training pass.
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_DROPOUT_H_
