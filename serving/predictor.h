#ifndef PSTRAIN_SERVING_PREDICTOR_H_
#define PSTRAIN_SERVING_PREDICTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "io/export_format.h"
#include "nlohmann/json.hpp"
#include "serving/click_request.h"

namespace pstrain {

// One instance's answer, as gcloud and TensorFlow Serving print it.
struct Prediction {
  int64_t classes = 0;               // the arg-max class
  std::vector<float> probabilities;  // softmax, num_classes; a binary head's [1 - p, p]
  // A binary head (a click model's): p, the sigmoid of its one logit
  // (TensorFlow's canned classifiers' "logistic").
  bool binary = false;
  float logistic = 0.0f;
  // A regression head's: its one output, the predicted value (classes and
  // probabilities are empty then).
  bool regression = false;
  float value = 0.0f;
  // A multi-task model's: each head's prediction, in its order, named
  // (the fields above are then unset).
  std::string name;
  std::vector<Prediction> heads;
};

// An exported model loaded to answer predictions. Thread-safe: one forward
// pass runs at a time (callers batch).
class Predictor {
 public:
  // Loads the export `path` names (a version directory, an export base, or a
  // job dir: ResolveExportDir) and checks it against the model this pstrain
  // builds under its name.
  static absl::StatusOr<std::unique_ptr<Predictor>> Load(Env* env, const std::string& path);

  // The export it was loaded from: its model, shapes and options (its
  // version and step as loaded; version() and global_step() follow the
  // deltas applied since; its values are read under the predictor's lock).
  const ExportedModel& exported() const { return exported_; }
  int64_t version() const { return version_.load(); }
  int64_t global_step() const { return global_step_.load(); }
  // Floats per image (H * W * C).
  int64_t example_size() const { return example_size_; }

  // `n` images of example_size() floats each, pixel / 255 in [0, 1].
  // Not for a click model (CHECKed).
  std::vector<Prediction> Predict(const float* images, int64_t n);

  // A click model, or any tabular model (input [n], with or without
  // embedding tables): its instances are ClickRequests
  // (serving/click_request.h) of these inputs, dense features of any value.
  bool is_click_model() const { return tabular_; }
  // A regression head: each prediction is a value (Prediction::regression).
  bool is_regression() const { return regression_; }
  const ClickInputs& click_inputs() const { return click_inputs_; }
  // A multi-task model's heads (empty for a model of one): each answers by
  // its name (Prediction::heads).
  const std::vector<ModelHead>& heads() const { return heads_; }

  // Predictions for a click model's instances. An id the training never
  // touched reads as a row of zeros (it was never trained; its initializer
  // was random). InvalidArgument for an id a bucketed table cannot take
  // (naming the feature and instance).
  // `version`, if not null, gets the version that answered.
  absl::StatusOr<std::vector<Prediction>> PredictClicks(const ClickRequest& request,
                                                        int64_t* version = nullptr);

  // A click model: applies `delta` (ReadExportFiles of a delta of the
  // version it holds) to its values and tables in place, between two
  // predictions (one runs at a time), so that it holds the delta's version.
  // InvalidArgument, changing nothing, for a delta of another version or
  // model, or a row its table cannot hold.
  absl::Status ApplyDelta(const ExportedModel& delta);

 private:
  // A table's trained rows, found by id.
  struct Table {
    int64_t dim = 0;
    absl::flat_hash_map<int64_t, int64_t> row_of;  // id -> row in weights
    std::vector<float> weights;
    std::vector<int64_t> free_rows;  // rows of weights a delta removed, for reuse
  };

  Predictor() = default;
  // The logits of `n` examples as predictions.
  std::vector<Prediction> ToPredictions(const Tensor& logits, int64_t n) const;

  // Its params and state change with ApplyDelta (under mu_); the rest as
  // loaded.
  ExportedModel exported_;
  std::atomic<int64_t> version_{0};
  std::atomic<int64_t> global_step_{0};
  int64_t example_size_ = 0;
  absl::Mutex mu_;
  std::unique_ptr<Model> model_ ABSL_GUARDED_BY(mu_);
  std::vector<float> scratch_ ABSL_GUARDED_BY(mu_);
  // A tabular model (input [n]: a click model, or one of dense features
  // alone): its instances are dense and sparse features (ClickRequest).
  bool tabular_ = false;
  bool binary_ = false;           // a binary head: one logit
  bool regression_ = false;       // a regression head: one value
  std::vector<ModelHead> heads_;  // a multi-task model's; empty for one head
  std::vector<int> head_offsets_;
  ClickInputs click_inputs_;
  std::vector<Table> tables_;  // per model table; empty for a model without (mu_ for deltas)
  std::vector<int64_t> table_buckets_;  // per table: its buckets (0: dynamic)
};

// One JSON instance as an image of `shape` (HWC), written to `out`
// (H * W * C floats in [0, 1]):
//   numbers nested as [H][W], [H][W][C], or a flat list of H * W * C;
//   {"image": numbers}, {"image": {"b64": PNG}}, or {"b64": PNG} (a PNG of
//   H x W with C channels, or with an alpha channel more, which is dropped).
// InvalidArgument saying what is wrong and where ("[3][27]: ...").
absl::Status ParseInstance(const nlohmann::json& instance, const std::vector<int64_t>& shape,
                           float* out);

// {"classes": k, "probabilities": [...]} (and "logistic": [p] for a binary
// head); a regression head's value as a bare number. A multi-task model's:
// an object of its heads by name, as TensorFlow Serving answers a signature
// of several outputs: {"delayed": 0.31, "delay": 12.4}, a binary head's
// probability and a regression head's value as numbers, a softmax head's
// {"classes": k, "probabilities": [...]}.
nlohmann::json PredictionJson(const Prediction& p);

// The columnar form of `predictions` (the "outputs" of a request in
// TensorFlow Serving's columnar form): {"classes": [...], "probabilities":
// [...]} with "logistic" for a binary head; {"predictions": [...]} for a
// regression head; for a multi-task model each head's values by its name.
nlohmann::json PredictionColumns(const std::vector<Prediction>& predictions);

}  // namespace pstrain

#endif  // PSTRAIN_SERVING_PREDICTOR_H_
