#include "worker/evaluation.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
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
  sums_.resize(model->heads().size());
}

absl::Status Evaluator::Add(const Dataset& data) {
  if (data.size() == 0) return absl::OkStatus();
  const size_t num_heads = model_->heads().size();
  if (data.label_width != static_cast<int>(num_heads)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the evaluation data has ", data.label_width, " label(s) per example; model ",
                     model_->name(), " has ", num_heads, " head(s), each with its label"));
  }
  images_.resize(static_cast<size_t>(batch_size_) * data.example_size());
  labels_.resize(static_cast<size_t>(batch_size_) * num_heads);
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
    const LossResult r =
        model_->Evaluate(view_.params, view_.state, images_.data(), labels_.data(), n, sparse);
    loss_sum_ += r.loss_sum;
    const int width = model_->num_logits();
    const float* logits = model_->logits().data();
    for (size_t h = 0; h < num_heads; ++h) {
      const LossResult& hr = model_->multi_head() ? model_->head_losses()[h] : r;
      HeadSums& sum = sums_[h];
      sum.loss_sum += hr.loss_sum;
      sum.correct += hr.correct;
      sum.abs_error_sum += hr.abs_error_sum;
      sum.squared_error_sum += hr.squared_error_sum;
      if (model_->heads()[h].kind != Head::kBinary) continue;
      const int offset = model_->head_offset(h);
      for (int64_t i = 0; i < n; ++i) {
        sum.scores.push_back(logits[i * width + offset]);
        sum.labels.push_back(labels_[i * num_heads + h]);
      }
    }
  }
  metrics_.examples += data.size();
  return absl::OkStatus();
}

EvalMetrics Evaluator::Finish() const {
  EvalMetrics metrics = metrics_;
  std::vector<HeadMetrics> heads;
  for (size_t h = 0; h < sums_.size(); ++h) {
    const HeadSums& sum = sums_[h];
    const ModelHead& head = model_->heads()[h];
    HeadMetrics m;
    m.name = head.name;
    m.binary = head.kind == Head::kBinary;
    m.regression = head.kind == Head::kRegression;
    if (metrics.examples > 0) {
      m.accuracy = static_cast<double>(sum.correct) / metrics.examples;
      m.loss = sum.loss_sum / metrics.examples;
      if (m.regression) {
        m.mae = sum.abs_error_sum / metrics.examples;
        m.rmse = std::sqrt(sum.squared_error_sum / metrics.examples);
      }
    }
    if (m.binary && metrics.examples > 0) {
      absl::StatusOr<double> auc = BinaryAuc(sum.scores, sum.labels);
      // Undefined when the test data holds one class only.
      m.auc = auc.ok() ? *auc : std::nan("");
      std::vector<float> probabilities(sum.scores.size());
      for (size_t i = 0; i < sum.scores.size(); ++i) {
        probabilities[i] = 1.0f / (1.0f + std::exp(-sum.scores[i]));
      }
      absl::StatusOr<std::vector<float>> curve =
          PrCurve(probabilities, sum.labels, kPrCurveThresholds);
      if (curve.ok()) m.pr_curve = std::move(*curve);
    }
    heads.push_back(std::move(m));
  }
  const HeadMetrics& first = heads[0];
  metrics.accuracy = first.accuracy;
  metrics.auc = first.auc;
  metrics.mae = first.mae;
  metrics.rmse = first.rmse;
  metrics.loss = metrics.examples > 0 ? loss_sum_ / metrics.examples : 0.0;
  if (model_->multi_head()) {
    metrics.heads = std::move(heads);
  } else {
    metrics.pr_curve = first.pr_curve;
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
  if (!m.heads.empty()) {
    // TensorFlow's Estimator sorts the keys; "delay/..." before "delayed/..."
    // before global_step and loss.
    std::vector<std::pair<std::string, std::string>> items;
    for (const HeadMetrics& h : m.heads) {
      const std::string p = h.name + "/";
      items.push_back({p + "loss", absl::StrFormat("%.5f", h.loss)});
      if (h.regression) {
        items.push_back({p + "mae", absl::StrFormat("%.5f", h.mae)});
        items.push_back({p + "rmse", absl::StrFormat("%.5f", h.rmse)});
        continue;
      }
      items.push_back({p + "accuracy", absl::StrFormat("%.4f", h.accuracy)});
      if (h.binary) items.push_back({p + "auc", absl::StrFormat("%.4f", h.auc)});
    }
    std::sort(items.begin(), items.end());
    std::string line = absl::StrFormat("Saving dict for global step %d: ", m.global_step);
    for (const auto& [key, value] : items) absl::StrAppend(&line, key, " = ", value, ", ");
    absl::StrAppend(&line, absl::StrFormat("global_step = %d, loss = %.5f", m.global_step, m.loss));
    return line;
  }
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
