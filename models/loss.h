#ifndef PSTRAIN_MODELS_LOSS_H_
#define PSTRAIN_MODELS_LOSS_H_

#include <cstdint>

#include "models/tensor.h"

namespace pstrain {

struct LossResult {
  double loss_sum = 0.0;  // Sum over the batch of each example's cross-entropy.
  int64_t correct = 0;    // Examples whose arg-max logit is the label.
};

// Labels are floats for every head: a class id (a whole number) for softmax
// and binary heads.

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

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_LOSS_H_
