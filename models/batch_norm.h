#ifndef PSTRAIN_MODELS_BATCH_NORM_H_
#define PSTRAIN_MODELS_BATCH_NORM_H_

#include <vector>

#include "models/layer.h"

namespace pstrain {

// Batch normalization over the last (channel) dimension, as
// tf.layers.batch_normalization: trainable "gamma" and "beta", and state
// "moving_mean" and "moving_variance". In training the batch's statistics
// normalize the input and are written to args.batch_stats (the variance with
// Bessel's correction, as TensorFlow's fused kernel reports it) for whoever owns
// the state to fold into the moving averages:
//   moving = decay * moving + (1 - decay) * batch
// (MovingAverageUpdate below). In evaluation the moving statistics are used.
class BatchNorm : public Layer {
 public:
  // `relu`: the output is max(., 0) (a following ReLU fused in).
  BatchNorm(std::string name, float epsilon, bool relu = false)
      : Layer(std::move(name)), epsilon_(epsilon), relu_(relu) {}

  bool MixesPositions() const override { return true; }
  absl::StatusOr<Shape> Build(const Shape& input) override;
  std::vector<VariableSpec> Variables() const override;
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;

 private:
  template <bool kRelu>
  void BackwardImpl(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                    const BackwardArgs& args);

  float epsilon_;
  bool relu_;
  int64_t channels_ = 0;
  std::vector<float> mean_, inv_std_;  // Per channel, last training pass.
  Tensor masked_;                      // The output gradient through the fused ReLU.
  std::vector<float> partial_;         // Per-chunk partial sums.
};

// state = decay * state + (1 - decay) * batch_stats, element-wise over n.
void MovingAverageUpdate(float decay, const float* batch_stats, int64_t n, float* state);

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_BATCH_NORM_H_
