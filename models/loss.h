#ifndef PSTRAIN_MODELS_LOSS_H_
#define PSTRAIN_MODELS_LOSS_H_

#include <cstdint>

#include "models/tensor.h"

namespace pstrain {

struct LossResult {
  double loss_sum = 0.0;  // Sum over the batch of each example's loss.
  int64_t correct = 0;    // Examples whose arg-max logit is the label (not regression).
  // A regression head: sums over the batch of |prediction - target| and of
  // its square (for the mean absolute error and the root mean squared one).
  double abs_error_sum = 0.0;
  double squared_error_sum = 0.0;
};

// Labels are floats for every head: a class id (a whole number) for softmax
// and binary heads, a target value for a regression head.

// Softmax cross-entropy of [batch, classes] logits against class ids
// (tf.losses.sparse_softmax_cross_entropy). When `dlogits` is given it receives
// the gradient of the batch-mean loss: (softmax - one_hot) / batch. Labels must
// be whole numbers in [0, classes) (the data readers check).
LossResult SoftmaxCrossEntropy(const Tensor& logits, const float* labels, Tensor* dlogits);

// Sigmoid cross-entropy of [batch, 1] logits against labels 0 or 1
// (tf.nn.sigmoid_cross_entropy_with_logits, a binary head): loss_sum sums
// max(z, 0) - z y + log(1 + exp(-|z|)); an example is correct when z > 0
// exactly for label 1 (probability 0.5 is the threshold). `dlogits`, when
// given, receives (sigmoid(z) - y) / batch.
LossResult SigmoidCrossEntropy(const Tensor& logits, const float* labels, Tensor* dlogits);

// A regression head's loss, per example, of its prediction z against the
// target y, with d = z - y: kMse d^2 (tf.losses.mean_squared_error), kMae
// |d| (tf.losses.absolute_difference), kHuber d^2 / 2 where |d| <= delta and
// delta (|d| - delta / 2) beyond (tf.losses.huber_loss, torch's HuberLoss).
enum class RegressionLoss { kMse, kMae, kHuber };
struct RegressionLossOptions {
  RegressionLoss loss = RegressionLoss::kMse;
  float huber_delta = 1.0f;  // > 0; kHuber only
  bool operator==(const RegressionLossOptions&) const = default;
};

// The loss of [batch, 1] predictions against `targets`: loss_sum, and the
// absolute and squared errors' sums. When `dlogits` is given it receives the
// gradient of the batch-mean loss: 2 d / batch (mse), sign(d) / batch (mae;
// 0 where d is 0), clamp(d, -delta, delta) / batch (huber).
LossResult RegressionLossOf(const Tensor& predictions, const float* targets,
                            const RegressionLossOptions& options, Tensor* dlogits);

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_LOSS_H_
