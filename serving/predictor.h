#ifndef PSTRAIN_SERVING_PREDICTOR_H_
#define PSTRAIN_SERVING_PREDICTOR_H_

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
};

// An exported model loaded to answer predictions. Thread-safe: one forward
// pass runs at a time (callers batch).
class Predictor {
 public:
  // Loads the export `path` names (a version directory, an export base, or a
  // job dir: ResolveExportDir) and checks it against the model this pstrain
  // builds under its name.
  static absl::StatusOr<std::unique_ptr<Predictor>> Load(Env* env, const std::string& path);

  const ExportedModel& exported() const { return exported_; }
  // Floats per image (H * W * C).
  int64_t example_size() const { return example_size_; }

  // `n` images of example_size() floats each, pixel / 255 in [0, 1].
  // Not for a click model (CHECKed).
  std::vector<Prediction> Predict(const float* images, int64_t n);

  // A click model: one with embedding tables, whose instances are
  // ClickRequests (serving/click_request.h) of these inputs.
  bool is_click_model() const { return !tables_.empty(); }
  const ClickInputs& click_inputs() const { return click_inputs_; }

  // Predictions for a click model's instances. An id the training never
  // touched reads as a row of zeros (it was never trained; its initializer
  // was random). InvalidArgument for an id a bucketed table cannot take
  // (naming the feature and instance).
  absl::StatusOr<std::vector<Prediction>> PredictClicks(const ClickRequest& request);

 private:
  // A table's trained rows, found by id.
  struct Table {
    int64_t dim = 0;
    absl::flat_hash_map<int64_t, int64_t> row_of;  // id -> row in weights
    std::vector<float> weights;
  };

  Predictor() = default;
  // The logits of `n` examples as predictions.
  std::vector<Prediction> ToPredictions(const Tensor& logits, int64_t n) const;

  ExportedModel exported_;
  int64_t example_size_ = 0;
  absl::Mutex mu_;
  std::unique_ptr<Model> model_ ABSL_GUARDED_BY(mu_);
  std::vector<float> scratch_ ABSL_GUARDED_BY(mu_);
  bool binary_ = false;  // a binary head: one logit
  ClickInputs click_inputs_;
  std::vector<Table> tables_;  // per model table; empty for a model without
};

// One JSON instance as an image of `shape` (HWC), written to `out`
// (H * W * C floats in [0, 1]):
//   numbers nested as [H][W], [H][W][C], or a flat list of H * W * C;
//   {"image": numbers}, {"image": {"b64": PNG}}, or {"b64": PNG} (a PNG of
//   H x W with C channels, or with an alpha channel more, which is dropped).
// InvalidArgument saying what is wrong and where ("[3][27]: ...").
absl::Status ParseInstance(const nlohmann::json& instance, const std::vector<int64_t>& shape,
                           float* out);

// {"classes": k, "probabilities": [...]}.
nlohmann::json PredictionJson(const Prediction& p);

}  // namespace pstrain

#endif  // PSTRAIN_SERVING_PREDICTOR_H_
