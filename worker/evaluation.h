#ifndef PSTRAIN_WORKER_EVALUATION_H_
#define PSTRAIN_WORKER_EVALUATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/dataset.h"
#include "data/sparse_features.h"
#include "models/model.h"
#include "ps_protocol/parameter_client.h"

namespace pstrain {

class EvalInput;  // input/eval_input.h

// Evaluation of a model's parameters on a dataset, shared by the chief (its
// periodic and final evaluations) and local mode.

// The thresholds of an evaluation's precision-recall curve: one every 0.005
// from 0 to 1 (TensorBoard's pr_curve summaries take 200 by default).
inline constexpr int kPrCurveThresholds = 201;

// One head's metrics in a multi-task model's evaluation: as EvalMetrics
// says for a model of that head alone (loss: its own, unweighted).
struct HeadMetrics {
  std::string name;
  bool binary = false;
  bool regression = false;
  double accuracy = 0.0;
  double loss = 0.0;
  double auc = 0.0;
  std::vector<float> pr_curve;
  double mae = 0.0;
  double rmse = 0.0;
};

// Loss and accuracy of a model over a whole dataset.
struct EvalMetrics {
  int64_t global_step = 0;
  int64_t examples = 0;
  double accuracy = 0.0;
  double loss = 0.0;  // Mean per example (for a binary head: the log loss).
  // A binary head (click model): the ROC AUC of the logits, exact
  // (data/binary_metrics.h); NaN when the data holds one class only.
  bool binary = false;
  double auc = 0.0;
  // A binary head: the precision-recall curve of its probabilities at
  // kPrCurveThresholds thresholds (PrCurve, data/binary_metrics.h); empty
  // when there is none.
  std::vector<float> pr_curve;
  // A regression head: the mean absolute error and the root mean squared
  // one (accuracy is 0: it has no classes); loss is its loss's mean.
  bool regression = false;
  double mae = 0.0;
  double rmse = 0.0;
  // A multi-task model: each head's metrics, in its order; loss above is
  // the model's (the heads' weighted sum), the rest the first head's.
  std::vector<HeadMetrics> heads;
};

// Evaluation of `view`'s parameters on examples given a part at a time (a
// stream's batches): Add each part, then Finish. `model` and `view` must
// outlive it. A binary head keeps every example's logit and label (8 bytes
// each) for the exact AUC.
class Evaluator {
 public:
  Evaluator(Model* model, const ParameterView& view, int batch_size);
  // Evaluates every example of `data` in batches of batch_size, as
  // EvaluateDataset says.
  absl::Status Add(const Dataset& data);
  // The metrics of every example added.
  EvalMetrics Finish() const;

 private:
  Model* const model_;
  const ParameterView& view_;
  const int batch_size_;
  EvalMetrics metrics_;
  std::vector<float> images_;
  std::vector<float> labels_;
  SparseBatch sparse_batch_;
  SparseStep sparse_step_;
  // Per head (one for a single-head model).
  struct HeadSums {
    std::vector<float> scores;  // binary: every example's logit, for the AUC
    std::vector<float> labels;
    double loss_sum = 0.0;
    int64_t correct = 0;
    double abs_error_sum = 0.0;
    double squared_error_sum = 0.0;
  };
  std::vector<HeadSums> sums_;
  double loss_sum_ = 0.0;  // the model's
};

// Evaluates `view`'s parameters on every example of `data` in batches of
// `batch_size` (the last batch may be smaller), with the model's evaluation
// preprocessing (per-image standardization where it has one). A model with
// embedding tables reads the rows each batch touches from view.rows; an
// error there (or an id the model refuses) is returned.
absl::StatusOr<EvalMetrics> EvaluateDataset(Model* model, const ParameterView& view,
                                            const Dataset& data, int batch_size);

// Evaluates `view`'s parameters on every example of the job's evaluation
// input, in batches of its eval_batch_size; a stream's errors name the file
// and where.
absl::StatusOr<EvalMetrics> EvaluateInput(Model* model, const ParameterView& view,
                                          const EvalInput& input);

// TensorFlow Estimator's evaluation line:
// "Saving dict for global step N: accuracy = A, global_step = N, loss = L",
// with "auc = U" after the accuracy for a binary head; for a regression head
// "Saving dict for global step N: loss = L, mae = M, rmse = R, global_step = N".
// A multi-task model's line has every head's metrics prefixed by its name
// ("delayed/auc = U"), in key order as TensorFlow sorts them, then
// global_step and the model's loss.
std::string FormatEvalLine(const EvalMetrics& metrics);

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_EVALUATION_H_
