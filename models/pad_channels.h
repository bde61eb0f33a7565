#ifndef PSTRAIN_MODELS_PAD_CHANNELS_H_
#define PSTRAIN_MODELS_PAD_CHANNELS_H_

#include "models/layer.h"

namespace pstrain {

// Zero channels added evenly on both sides of the last (channel) dimension up
// to `filters`: the parameter-free "option A" shortcut of ResNet v1 when a
// block widens (tf.pad(x, [[0, 0], ..., [p, p]]) with p = (filters - c) / 2).
// No variables. Build refuses an increase that is negative or odd.
class PadChannels : public Layer {
 public:
  PadChannels(std::string name, int filters) : Layer(std::move(name)), filters_(filters) {}

  absl::StatusOr<Shape> Build(const Shape& input) override;
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;

 private:
  const int filters_;
  int64_t in_c_ = 0;
  int64_t pad_ = 0;        // zero channels before the input's
  int64_t positions_ = 0;  // per example: the product of the dimensions before the channels
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_PAD_CHANNELS_H_
