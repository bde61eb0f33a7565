#ifndef PSTRAIN_WORKER_PROGRESSIVE_VALIDATION_H_
#define PSTRAIN_WORKER_PROGRESSIVE_VALIDATION_H_

// Progressive validation (McMahan et al. 2013, "Ad Click Prediction: a View
// from the Trenches", section 5): every training batch is first predicted
// by the model as it is before the batch's update, so the loss, AUC and
// accuracy over the last examples trained on measure the model on data it
// has not seen yet, with no held-out set, and follow drift as it happens.
// The predictions are the training step's own forward pass (its logits,
// before the update it computes), so it costs no extra pass; with dropout
// they are the training pass's.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pstrain {

struct ProgressiveMetrics {
  int64_t examples = 0;       // in the window
  double loss = 0;            // mean cross-entropy (regression: squared error)
  double accuracy = 0;        // arg-max (binary: logit > 0) equals the label
  std::optional<double> auc;  // a binary head with both classes in the window
  std::optional<double> mae;  // a regression head: mean absolute error (no accuracy)
};

class ProgressiveValidation {
 public:
  // Over the last `window` examples (at least 1); `classes` logits per
  // example (1: a binary head, a logit of class 1), or 0 for a regression
  // head (one prediction of the label's value).
  ProgressiveValidation(int64_t window, int classes);

  // A batch's logits ([batch, classes]) and labels, as predicted before its
  // update.
  void Add(const float* logits, const float* labels, int64_t batch);

  ProgressiveMetrics Compute() const;
  int64_t window() const { return window_; }

 private:
  const int64_t window_;
  const int classes_;
  // Ring buffers of the window's examples: a binary head's logit (a
  // regression head's absolute error), each example's loss and whether it
  // was right, and its label.
  std::vector<float> scores_;
  std::vector<float> labels_;
  std::vector<double> losses_;
  std::vector<uint8_t> correct_;
  int64_t next_ = 0;  // where the next example goes
  int64_t filled_ = 0;
};

// "progressive validation (last 100000 examples): loss = 0.4631, auc =
// 0.7790, accuracy = 0.7812"; a regression head's "... loss = 3.1, mae =
// 1.2" (loss the squared error).
std::string FormatProgressive(const ProgressiveMetrics& m);

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_PROGRESSIVE_VALIDATION_H_
