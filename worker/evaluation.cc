#include "worker/evaluation.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "data/augment.h"
#include "data/batcher.h"
#include "data/binary_metrics.h"
#include "data/tabular.h"
#include "input/eval_input.h"

namespace pstrain {

Evaluator::Evaluator(Model* model, const ParameterView& view, int batch_size)
    : model_(model), view_(view), batch_size_(batch_size) {
  view.AwaitParams();  // a training loop's view may still be receiving its last values
  metrics_.global_step = view.global_step;
  metrics_.binary = model->head() == Head::kBinary;
  metrics_.regression = model->head() == Head::kRegression;
}

absl::Status Evaluator::Add(const Dataset& data) {
  if (data.size() == 0) return absl::OkStatus();
  images_.resize(static_cast<size_t>(batch_size_) * data.example_size());
  labels_.resize(batch_size_);
  std::vector<int> columns;
  if (model_->has_sparse()) {
    if (view_.rows == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("model ", model_->name(), " has embedding tables but nothing to read them"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(
        columns, SelectSparseFeatures(data, model_->sparse_features(), "the test data"));
  }
  for (int64_t begin = 0; begin < data.size(); begin += batch_size_) {
    const int64_t n = std::min<int64_t>(batch_size_, data.size() - begin);
    const SparseStep* sparse = nullptr;
    if (model_->has_sparse()) {
      GatherRange(data, begin, n, images_.data(), labels_.data(), columns, &sparse_batch_);
      PSTRAIN_RETURN_IF_ERROR(model_->PrepareSparse(sparse_batch_, n, &sparse_step_));
      PSTRAIN_RETURN_IF_ERROR(view_.rows->ReadRows(&sparse_step_));
      sparse = &sparse_step_;
    } else {
      GatherRange(data, begin, n, images_.data(), labels_.data());
    }
    if (model_->input_preprocessing().per_image_standardization) {
      for (int64_t i = 0; i < n; ++i) {
        StandardizeImage(images_.data() + i * data.example_size(), data.example_size());
      }
    }
    LossResult r =
        model_->Evaluate(view_.params, view_.state, images_.data(), labels_.data(), n, sparse);
    loss_sum_ += r.loss_sum;
    correct_ += r.correct;
    abs_error_sum_ += r.abs_error_sum;
    squared_error_sum_ += r.squared_error_sum;
    if (metrics_.binary) {
      const float* logits = model_->logits().data();
      scores_.insert(scores_.end(), logits, logits + n);
    }
  }
  if (metrics_.binary)
    label_values_.insert(label_values_.end(), data.labels.begin(), data.labels.end());
  metrics_.examples += data.size();
  return absl::OkStatus();
}

EvalMetrics Evaluator::Finish() const {
  EvalMetrics metrics = metrics_;
  if (metrics.examples > 0) {
    metrics.accuracy = static_cast<double>(correct_) / metrics.examples;
    metrics.loss = loss_sum_ / metrics.examples;
    if (metrics.regression) {
      metrics.mae = abs_error_sum_ / metrics.examples;
      metrics.rmse = std::sqrt(squared_error_sum_ / metrics.examples);
    }
  }
  if (metrics.binary && metrics.examples > 0) {
    absl::StatusOr<double> auc = BinaryAuc(scores_, label_values_);
    // Undefined when the test data holds one class only: left at 0, said once.
    metrics.auc = auc.ok() ? *auc : std::nan("");
    std::vector<float> probabilities(scores_.size());
    for (size_t i = 0; i < scores_.size(); ++i) {
      probabilities[i] = 1.0f / (1.0f + std::exp(-scores_[i]));
    }
    absl::StatusOr<std::vector<float>> curve =
        PrCurve(probabilities, label_values_, kPrCurveThresholds);
    if (curve.ok()) metrics.pr_curve = std::move(*curve);
  }
  return metrics;
}

absl::StatusOr<EvalMetrics> EvaluateDataset(Model* model, const ParameterView& view,
                                            const Dataset& data, int batch_size) {
  Evaluator evaluator(model, view, batch_size);
  PSTRAIN_RETURN_IF_ERROR(evaluator.Add(data));
  return evaluator.Finish();
}

absl::StatusOr<EvalMetrics> EvaluateInput(Model* model, const ParameterView& view,
                                          const EvalInput& input) {
  Evaluator evaluator(model, view, input.batch_size());
  PSTRAIN_RETURN_IF_ERROR(
      input.ForEachPart([&evaluator](const Dataset& part) { return evaluator.Add(part); }));
  return evaluator.Finish();
}

std::string FormatEvalLine(const EvalMetrics& m) {
  if (m.regression) {
    return absl::StrFormat(
        "Saving dict for global step %d: loss = %.5f, mae = %.5f, rmse = %.5f, global_step = %d",
        m.global_step, m.loss, m.mae, m.rmse, m.global_step);
  }
  if (m.binary) {
    // TensorFlow's binary head reports its metrics in key order too.
    return absl::StrFormat(
        "Saving dict for global step %d: accuracy = %.4f, auc = %.4f, global_step = %d, "
        "loss = %.5f",
        m.global_step, m.accuracy, m.auc, m.global_step, m.loss);
  }
  return absl::StrFormat(
      "Saving dict for global step %d: accuracy = %.4f, global_step = %d, "
      "loss = %.5f",
      m.global_step, m.accuracy, m.global_step, m.loss);
}

}  // namespace pstrain
