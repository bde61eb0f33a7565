#ifndef PSTRAIN_MODELS_LOSS_H_
#define PSTRAIN_MODELS_LOSS_H_

#include <cstdint>

#include "models/tensor.h"

namespace pstrain {

struct LossResult {
  double loss_sum = 0.0;  // Sum over the batch of -log softmax(logits)[label].
  int64_t correct = 0;    // Examples whose arg-max logit is the label.
};

// Softmax cross-entropy of [batch, classes] logits against integer labels
// (tf.losses.sparse_softmax_cross_entropy). When `dlogits` is given it receives
// the gradient of the batch-mean loss: (softmax - one_hot) / batch. Labels must
// be in [0, classes) (the data readers check).
LossResult SoftmaxCrossEntropy(const Tensor& logits, const int32_t* labels, Tensor* dlogits);

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_LOSS_H_
