#include "data/binary_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

absl::Status CheckSizes(size_t scores, size_t labels) {
  if (scores != labels) {
    return absl::InvalidArgumentError(
        absl::StrCat(scores, " predictions but ", labels, " labels; they must pair up"));
  }
  if (labels == 0) return absl::InvalidArgumentError("no examples to evaluate");
  return absl::OkStatus();
}

std::vector<double> ToDouble(std::span<const float> values) {
  return std::vector<double>(values.begin(), values.end());
}

}  // namespace

absl::StatusOr<double> BinaryAuc(std::span<const double> scores, std::span<const float> labels) {
  if (absl::Status s = CheckSizes(scores.size(), labels.size()); !s.ok()) return s;
  int64_t positives = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] != 0.0f && labels[i] != 1.0f) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", labels[i], " at index ", i, " is not 0 or 1"));
    }
    if (std::isnan(scores[i])) {
      return absl::InvalidArgumentError(absl::StrCat("score at index ", i, " is NaN"));
    }
    positives += labels[i] == 1.0f;
  }
  const int64_t n = static_cast<int64_t>(labels.size());
  const int64_t negatives = n - positives;
  if (positives == 0 || negatives == 0) {
    return absl::InvalidArgumentError(absl::StrCat("AUC is undefined with only one class (",
                                                   positives, " positives, ", negatives,
                                                   " negatives)"));
  }
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return scores[a] < scores[b]; });
  // Ranks are 1-based; a run of tied scores [i, j) shares the mean rank
  // (i + 1 + j) / 2.
  double positive_rank_sum = 0;
  for (int64_t i = 0; i < n;) {
    int64_t j = i + 1;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    const double rank = 0.5 * static_cast<double>(i + 1 + j);
    for (int64_t k = i; k < j; ++k) {
      if (labels[order[k]] == 1.0f) positive_rank_sum += rank;
    }
    i = j;
  }
  const double p = static_cast<double>(positives);
  return (positive_rank_sum - p * (p + 1) / 2) / (p * static_cast<double>(negatives));
}

absl::StatusOr<double> BinaryAuc(std::span<const float> scores, std::span<const float> labels) {
  const std::vector<double> wide = ToDouble(scores);
  return BinaryAuc(std::span<const double>(wide), labels);
}

absl::StatusOr<std::vector<float>> PrCurve(std::span<const float> probabilities,
                                           std::span<const float> labels, int num_thresholds) {
  if (absl::Status s = CheckSizes(probabilities.size(), labels.size()); !s.ok()) return s;
  if (num_thresholds < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("a PR curve of ", num_thresholds, " thresholds; it needs 2 or more"));
  }
  const int n = num_thresholds;
  std::vector<double> positives(n, 0.0), negatives(n, 0.0);
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] != 0.0f && labels[i] != 1.0f) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", labels[i], " at index ", i, " is not 0 or 1"));
    }
    const float p = probabilities[i];
    if (!(p >= 0.0f && p <= 1.0f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("probability ", p, " at index ", i, " is not in [0, 1]"));
    }
    const int bucket = std::min(n - 1, static_cast<int>(std::floor(p * (n - 1))));
    (labels[i] == 1.0f ? positives : negatives)[bucket] += 1;
  }
  const double all_positives = std::accumulate(positives.begin(), positives.end(), 0.0);
  const double all_negatives = std::accumulate(negatives.begin(), negatives.end(), 0.0);
  std::vector<float> curve(6 * static_cast<size_t>(n));
  double tp = 0, fp = 0;
  for (int i = n - 1; i >= 0; --i) {  // the counts at or above threshold i
    tp += positives[i];
    fp += negatives[i];
    const double fn = all_positives - tp, tn = all_negatives - fp;
    curve[0 * n + i] = static_cast<float>(tp);
    curve[1 * n + i] = static_cast<float>(fp);
    curve[2 * n + i] = static_cast<float>(tn);
    curve[3 * n + i] = static_cast<float>(fn);
    curve[4 * n + i] = static_cast<float>(tp / std::max(tp + fp, 1e-7));
    curve[5 * n + i] = static_cast<float>(tp / std::max(tp + fn, 1e-7));
  }
  return curve;
}

absl::StatusOr<double> MeanLogLoss(std::span<const double> probabilities,
                                   std::span<const float> labels, double epsilon) {
  if (absl::Status s = CheckSizes(probabilities.size(), labels.size()); !s.ok()) return s;
  if (!(epsilon >= 0 && epsilon < 0.5)) {
    return absl::InvalidArgumentError(absl::StrCat("epsilon ", epsilon, " is not in [0, 0.5)"));
  }
  double sum = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const double y = labels[i];
    if (!(y >= 0 && y <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", y, " at index ", i, " is outside [0, 1]"));
    }
    if (!(probabilities[i] >= 0 && probabilities[i] <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("probability ", probabilities[i], " at index ", i, " is outside [0, 1]"));
    }
    const double p = std::clamp(probabilities[i], epsilon, 1 - epsilon);
    // Terms with a zero coefficient are skipped, so p = 0 or 1 with
    // epsilon = 0 costs nothing where the label agrees.
    if (y > 0) sum -= y * std::log(p);
    if (y < 1) sum -= (1 - y) * std::log1p(-p);
  }
  return sum / static_cast<double>(labels.size());
}

absl::StatusOr<double> MeanLogLoss(std::span<const float> probabilities,
                                   std::span<const float> labels, double epsilon) {
  const std::vector<double> wide = ToDouble(probabilities);
  return MeanLogLoss(std::span<const double>(wide), labels, epsilon);
}

absl::StatusOr<double> BaseRateLogLoss(std::span<const float> labels) {
  if (labels.empty()) return absl::InvalidArgumentError("no labels");
  double mean = 0;
  for (float y : labels) mean += y;
  mean /= static_cast<double>(labels.size());
  const std::vector<double> constant(labels.size(), std::clamp(mean, 0.0, 1.0));
  return MeanLogLoss(std::span<const double>(constant), labels, 0.0);
}

}  // namespace pstrain
