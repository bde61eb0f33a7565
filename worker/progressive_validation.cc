#include "worker/progressive_validation.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "data/binary_metrics.h"

namespace pstrain {

ProgressiveValidation::ProgressiveValidation(int64_t window, int classes)
    : window_(std::max<int64_t>(1, window)), classes_(std::max(0, classes)) {
  labels_.resize(window_);
  losses_.resize(window_);
  correct_.resize(window_);
  if (classes_ <= 1) scores_.resize(window_);
}

void ProgressiveValidation::Add(const float* logits, const float* labels, int64_t batch) {
  for (int64_t i = 0; i < batch; ++i) {
    const float* z = logits + i * std::max(1, classes_);  // a regression head's one value
    const float y = labels[i];
    double loss = 0;
    bool right = false;
    if (classes_ == 0) {
      const double d = static_cast<double>(z[0]) - y;
      loss = d * d;
      scores_[next_] = static_cast<float>(std::abs(d));
    } else if (classes_ == 1) {
      // max(z, 0) - z y + log(1 + exp(-|z|)), as the binary head's loss.
      const double v = z[0];
      loss = std::max(v, 0.0) - v * y + std::log1p(std::exp(-std::abs(v)));
      right = (v > 0) == (y == 1.0f);
      scores_[next_] = z[0];
    } else {
      const float top = *std::max_element(z, z + classes_);
      double sum = 0;
      for (int c = 0; c < classes_; ++c) sum += std::exp(static_cast<double>(z[c]) - top);
      const int label = std::clamp(static_cast<int>(y), 0, classes_ - 1);
      loss = std::log(sum) + top - z[label];
      right = std::max_element(z, z + classes_) - z == label;
    }
    labels_[next_] = y;
    losses_[next_] = loss;
    correct_[next_] = right ? 1 : 0;
    next_ = (next_ + 1) % window_;
    filled_ = std::min(filled_ + 1, window_);
  }
}

ProgressiveMetrics ProgressiveValidation::Compute() const {
  ProgressiveMetrics m;
  m.examples = filled_;
  if (filled_ == 0) return m;
  double loss = 0;
  int64_t right = 0;
  for (int64_t i = 0; i < filled_; ++i) {
    loss += losses_[i];
    right += correct_[i];
  }
  m.loss = loss / static_cast<double>(filled_);
  m.accuracy = static_cast<double>(right) / static_cast<double>(filled_);
  if (classes_ == 0) {
    double abs_errors = 0;
    for (int64_t i = 0; i < filled_; ++i) abs_errors += scores_[i];
    m.accuracy = 0;
    m.mae = abs_errors / static_cast<double>(filled_);
  }
  if (classes_ == 1) {
    absl::StatusOr<double> auc =
        BinaryAuc(std::span<const float>(scores_.data(), static_cast<size_t>(filled_)),
                  std::span<const float>(labels_.data(), static_cast<size_t>(filled_)));
    if (auc.ok()) m.auc = *auc;  // (undefined with one class in the window)
  }
  return m;
}

std::string FormatProgressive(const ProgressiveMetrics& m) {
  if (m.mae.has_value()) {
    return absl::StrFormat("progressive validation (last %d examples): loss = %.4f, mae = %.4f",
                           m.examples, m.loss, *m.mae);
  }
  return absl::StrFormat(
      "progressive validation (last %d examples): loss = %.4f%s, accuracy = %.4f", m.examples,
      m.loss, m.auc.has_value() ? absl::StrFormat(", auc = %.4f", *m.auc) : "", m.accuracy);
}

}  // namespace pstrain
