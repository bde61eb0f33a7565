#ifndef PSTRAIN_DATA_BINARY_METRICS_H_
#define PSTRAIN_DATA_BINARY_METRICS_H_

// Evaluation metrics of a binary classifier (click prediction): the exact
// ROC AUC and the mean log loss. Pure functions, thread-compatible.

#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain {

// The area under the ROC curve of `scores` against `labels` (each 0 or 1),
// computed exactly as the Mann-Whitney U statistic: sort by score, give tied
// scores the average of their ranks, AUC = (sum of positive ranks -
// P(P+1)/2) / (P N). A tie between a positive and a negative counts 1/2, as
// in sklearn.metrics.roc_auc_score (TensorFlow's tf.keras.metrics.AUC
// approximates this with thresholds; this is the exact value). Scores may be
// probabilities or logits: any increasing transform gives the same AUC.
// O(n log n) time, O(n) memory.
//
// InvalidArgument if the sizes differ, a label is not 0 or 1, a score is
// NaN, or one class is absent (the AUC is undefined then).
absl::StatusOr<double> BinaryAuc(std::span<const double> scores, std::span<const float> labels);
absl::StatusOr<double> BinaryAuc(std::span<const float> scores, std::span<const float> labels);

// A precision-recall curve as TensorBoard's pr_curves plugin draws it
// (tensorboard/plugins/pr_curve/summary.py's rule): each probability goes to
// bucket floor(p * (num_thresholds - 1)), and at threshold i (of value
// i / (num_thresholds - 1)) the examples of buckets >= i are predicted
// positive. Returns 6 rows of num_thresholds floats, row-major: true
// positives, false positives, true negatives, false negatives, precision
// TP / max(TP + FP, 1e-7) and recall TP / max(TP + FN, 1e-7).
// InvalidArgument if the sizes differ, num_thresholds < 2, a label is not 0
// or 1, or a probability is outside [0, 1] or NaN.
absl::StatusOr<std::vector<float>> PrCurve(std::span<const float> probabilities,
                                           std::span<const float> labels, int num_thresholds);

// The mean binary cross-entropy -[y log p + (1 - y) log(1 - p)] of
// `probabilities` against `labels` in [0, 1], natural log, with p clipped to
// [epsilon, 1 - epsilon] (Keras's binary_crossentropy uses epsilon 1e-7) so a
// confident mistake costs a large finite amount, not infinity.
// InvalidArgument if the sizes differ or are 0, a label is outside [0, 1] or
// a probability outside [0, 1] or NaN.
absl::StatusOr<double> MeanLogLoss(std::span<const double> probabilities,
                                   std::span<const float> labels, double epsilon = 1e-7);
absl::StatusOr<double> MeanLogLoss(std::span<const float> probabilities,
                                   std::span<const float> labels, double epsilon = 1e-7);

// The log loss of always predicting the base rate (the mean label): the
// entropy of the labels, the loss a model with no information reaches.
// InvalidArgument for no labels or a label outside [0, 1].
absl::StatusOr<double> BaseRateLogLoss(std::span<const float> labels);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_BINARY_METRICS_H_
