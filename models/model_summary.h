#ifndef PSTRAIN_MODELS_MODEL_SUMMARY_H_
#define PSTRAIN_MODELS_MODEL_SUMMARY_H_

// A model spec's layers with their output shapes and parameter counts, as
// Keras' model.summary() lists them: what `pstrain-model describe` prints
// and the Python module's ModelSpec.check() and summary() give.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/model_spec.h"
#include "models/tensor.h"

namespace pstrain {

// An embedding table a layer reads (the parameter servers hold it).
struct TableSummary {
  std::string name;     // "<layer>/embeddings", linear's "<layer>/<feature>", a shared one's
  std::string feature;  // the feature whose values address it (a cross: "a_X_b")
  int64_t buckets = 0;  // 0: dynamic (rows made as ids arrive)
  int64_t dim = 0;
  bool shared = false;  // read by other layers too (`table:`)
};

// One spec layer.
struct LayerSummary {
  std::string name;
  std::string type;
  int line = 0;                      // in the spec text, 0 if unknown
  std::vector<std::string> inputs;   // the layers (or "input") it takes
  Shape output_shape;                // one example's
  int64_t trainable = 0;             // values of its trainable variables
  int64_t non_trainable = 0;         // its state (batch_norm's statistics), frozen variables
  std::vector<TableSummary> tables;  // a shared one at each reader (counted once)
};

struct ModelSummary {
  std::string name;
  Shape input_shape;
  int num_classes = 0;
  bool binary = false;  // one logit, sigmoid (a click model's head)
  // One value, the label's, with the spec's loss ("mse", "mae" or "huber");
  // empty for the heads with classes.
  std::string regression_loss;
  // A multi-task model's heads, each "name: kind on layer (label, weight)";
  // empty for a model of one head.
  std::vector<std::string> heads;
  std::vector<std::string> sparse_features;
  std::vector<LayerSummary> layers;
  int64_t trainable = 0;
  int64_t non_trainable = 0;
  int64_t table_values = 0;  // bucketed tables' buckets x dim
  int dynamic_tables = 0;
};

// Builds `spec` (each spec layer as itself: no fused residual blocks) and
// summarizes it. The errors a role gives for the spec (`source` and the
// layer's line begin them): InvalidArgument for shapes that do not fit.
// Variables of a layer with `trainable: false` count as non-trainable.
absl::StatusOr<ModelSummary> SummarizeModelSpec(const ModelSpec& spec, const std::string& source);

// The summary as a table: "Layer (type)", "Output Shape" (None for the
// batch), "Param #" and what each layer takes, the tables under their
// layer, then the totals.
std::string FormatModelSummary(const ModelSummary& summary);

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_MODEL_SUMMARY_H_
