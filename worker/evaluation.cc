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

namespace pstrain {

absl::StatusOr<EvalMetrics> EvaluateDataset(Model* model, const ParameterView& view,
                                            const Dataset& data, int batch_size) {
  view.AwaitParams();  // a training loop's view may still be receiving its last values
  EvalMetrics metrics;
  metrics.global_step = view.global_step;
  metrics.binary = model->head() == Head::kBinary;
  std::vector<float> images(static_cast<size_t>(batch_size) * data.example_size());
  std::vector<int32_t> labels(batch_size);
  std::vector<int> columns;
  SparseBatch sparse_batch;
  SparseStep sparse_step;
  if (model->has_sparse()) {
    if (view.rows == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("model ", model->name(), " has embedding tables but nothing to read them"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(columns,
                             SelectSparseFeatures(data, model->sparse_features(), "the test data"));
  }
  std::vector<float> scores;  // binary: every example's logit, for the AUC
  double loss_sum = 0.0;
  int64_t correct = 0;
  for (int64_t begin = 0; begin < data.size(); begin += batch_size) {
    const int64_t n = std::min<int64_t>(batch_size, data.size() - begin);
    const SparseStep* sparse = nullptr;
    if (model->has_sparse()) {
      GatherRange(data, begin, n, images.data(), labels.data(), columns, &sparse_batch);
      PSTRAIN_RETURN_IF_ERROR(model->PrepareSparse(sparse_batch, n, &sparse_step));
      PSTRAIN_RETURN_IF_ERROR(view.rows->ReadRows(&sparse_step));
      sparse = &sparse_step;
    } else {
      GatherRange(data, begin, n, images.data(), labels.data());
    }
    if (model->input_preprocessing().per_image_standardization) {
      for (int64_t i = 0; i < n; ++i) {
        StandardizeImage(images.data() + i * data.example_size(), data.example_size());
      }
    }
    LossResult r =
        model->Evaluate(view.params, view.state, images.data(), labels.data(), n, sparse);
    loss_sum += r.loss_sum;
    correct += r.correct;
    if (metrics.binary) {
      const float* logits = model->logits().data();
      scores.insert(scores.end(), logits, logits + n);
    }
  }
  metrics.examples = data.size();
  if (data.size() > 0) {
    metrics.accuracy = static_cast<double>(correct) / data.size();
    metrics.loss = loss_sum / data.size();
  }
  if (metrics.binary && data.size() > 0) {
    std::vector<float> label_values(data.labels.begin(), data.labels.end());
    absl::StatusOr<double> auc = BinaryAuc(scores, label_values);
    // Undefined when the test data holds one class only: left at 0, said once.
    metrics.auc = auc.ok() ? *auc : std::nan("");
  }
  return metrics;
}

std::string FormatEvalLine(const EvalMetrics& m) {
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
