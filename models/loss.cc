#include "models/loss.h"

#include <algorithm>
#include <cmath>

namespace pstrain {

LossResult SoftmaxCrossEntropy(const Tensor& logits, const float* labels, Tensor* dlogits) {
  const int64_t batch = logits.dim(0);
  const int64_t classes = logits.dim(1);
  if (dlogits != nullptr) dlogits->Resize(logits.shape());
  LossResult result;
  const float inv_batch = 1.0f / static_cast<float>(batch);
  for (int64_t n = 0; n < batch; ++n) {
    const float* z = logits.data() + n * classes;
    const int64_t arg = std::max_element(z, z + classes) - z;
    const float max = z[arg];
    double sum = 0.0;
    for (int64_t k = 0; k < classes; ++k) sum += std::exp(static_cast<double>(z[k] - max));
    const double log_sum = std::log(sum);
    const int64_t label = static_cast<int64_t>(labels[n]);
    result.loss_sum += log_sum - (z[label] - max);
    if (arg == label) ++result.correct;
    if (dlogits != nullptr) {
      float* g = dlogits->data() + n * classes;
      for (int64_t k = 0; k < classes; ++k) {
        const double p = std::exp(static_cast<double>(z[k] - max) - log_sum);
        g[k] = static_cast<float>(p - (k == label ? 1.0 : 0.0)) * inv_batch;
      }
    }
  }
  return result;
}

LossResult SigmoidCrossEntropy(const Tensor& logits, const float* labels, Tensor* dlogits) {
  const int64_t batch = logits.dim(0);
  if (dlogits != nullptr) dlogits->Resize(logits.shape());
  LossResult result;
  const double inv_batch = 1.0 / static_cast<double>(batch);
  for (int64_t n = 0; n < batch; ++n) {
    const double z = logits[n];
    const double y = labels[n] == 1.0f ? 1.0 : 0.0;
    // max(z, 0) - z y + log(1 + exp(-|z|)): no overflow for any z.
    result.loss_sum += std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::abs(z)));
    if ((z > 0) == (labels[n] == 1.0f)) ++result.correct;
    if (dlogits != nullptr) {
      const double p = z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z));
      (*dlogits)[n] = static_cast<float>((p - y) * inv_batch);
    }
  }
  return result;
}

LossResult RegressionLossOf(const Tensor& predictions, const float* targets,
                            const RegressionLossOptions& options, Tensor* dlogits) {
  const int64_t batch = predictions.dim(0);
  if (dlogits != nullptr) dlogits->Resize(predictions.shape());
  LossResult result;
  const double inv_batch = 1.0 / static_cast<double>(batch);
  const double delta = options.huber_delta;
  for (int64_t n = 0; n < batch; ++n) {
    const double d = static_cast<double>(predictions[n]) - static_cast<double>(targets[n]);
    const double abs_d = std::abs(d);
    result.abs_error_sum += abs_d;
    result.squared_error_sum += d * d;
    double loss = 0, grad = 0;
    switch (options.loss) {
      case RegressionLoss::kMse:
        loss = d * d;
        grad = 2 * d;
        break;
      case RegressionLoss::kMae:
        loss = abs_d;
        grad = d > 0 ? 1.0 : (d < 0 ? -1.0 : 0.0);
        break;
      case RegressionLoss::kHuber:
        loss = abs_d <= delta ? 0.5 * d * d : delta * (abs_d - 0.5 * delta);
        grad = std::clamp(d, -delta, delta);
        break;
    }
    result.loss_sum += loss;
    if (dlogits != nullptr) (*dlogits)[n] = static_cast<float>(grad * inv_batch);
  }
  return result;
}

}  // namespace pstrain
