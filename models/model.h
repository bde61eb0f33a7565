#ifndef PSTRAIN_MODELS_MODEL_H_
#define PSTRAIN_MODELS_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/trace.h"
#include "config/model_spec.h"
#include "models/layer.h"
#include "models/loss.h"
#include "models/sparse_input.h"
#include "models/tensor.h"

namespace pstrain {

// Time spent in one layer's passes, accumulated over calls.
struct LayerTiming {
  std::string layer;
  double forward_secs = 0.0;
  double backward_secs = 0.0;
};

// What the input pipeline does to this model's images besides pixel / 255:
// in training, zero-pad and random-crop back to size and random left-right
// flips; in training and evaluation, per-image standardization.
struct InputPreprocessing {
  int crop_padding = 0;
  bool random_flip = false;
  bool per_image_standardization = false;
};

// A variable of a built model and where it lives: in the flat trainable vector
// (`trainable`) or the flat state vector, at `offset`.
struct VariableInfo {
  std::string name;  // "layer/variable", e.g. "conv2d/kernel".
  Shape shape;
  bool trainable = true;
  int64_t offset = 0;
  int64_t size = 0;
  VariableSpec spec;
  int layer = -1;  // the index of the layer that has it
};

// What the logits mean and how the loss is computed: softmax cross-entropy
// over `num_classes` logits, a binary head (a click model) with one logit
// and sigmoid cross-entropy against labels 0 and 1 (num_classes is 2), or a
// regression head: one output, a prediction of the label's value, with a
// RegressionLoss (num_classes is 0: it has none).
enum class Head { kSoftmax, kBinary, kRegression };

// One output of a model and the loss that trains it. A model has one head
// (its last layer's output) or several (a multi-task model: each the output
// of a layer of its own, its loss weighted, its label the example's
// label number `index` in the model's heads).
struct ModelHead {
  std::string name;  // "" for a model's single head
  // The label it is trained on: a CSV column or an Example feature; "" for a
  // single head ("label" in Examples, the CSV schema's label column).
  std::string label;
  Head kind = Head::kSoftmax;
  int num_classes = 0;  // softmax: its classes; binary: 2; regression: 0
  // The activation whose values are its logits (layer j's output is j + 1);
  // -1 when building: the last layer's.
  int activation = -1;
  float weight = 1.0f;  // its loss's factor in the model's loss
  RegressionLossOptions regression;
  int num_logits() const { return kind == Head::kSoftmax ? num_classes : 1; }
};

// A feed-forward classifier: a chain or graph of layers ending in logits,
// trained with its head's loss (Head above: softmax cross-entropy, or
// sigmoid cross-entropy for a binary head). The model owns no parameter
// values: every call reads them from flat vectors (wherever they live: an
// in-process store, or a copy pulled from the parameter servers), so the
// same layout is shared by every role. Holds workspace for activations, so one instance serves one
// thread.
class Model {
 public:
  // Builds `layers` in order for examples of shape `input_shape` (HWC) and
  // assigns variable offsets in declaration order. InvalidArgument if a layer
  // cannot take its input or the output is not [num_classes].
  static absl::StatusOr<std::unique_ptr<Model>> Create(std::string name, Shape input_shape,
                                                       int num_classes,
                                                       std::vector<std::unique_ptr<Layer>> layers);

  // A graph of layers: inputs[i] lists the activations layer i takes, 0 for
  // the model's input and j + 1 for the output of layer j < i (so the order
  // of `layers` is an order of evaluation). A MergeLayer takes two or more,
  // a MultiInputLayer 1 to its MaxInputs(), any other layer one. Every
  // layer's output but the last must be taken by a later layer.
  // InvalidArgument, naming the layer, for anything else.
  // With Head::kBinary the last layer's output must be [1] and
  // num_classes 2; with Head::kRegression [1] and num_classes 0, and
  // `regression` says its loss. Sparse layers' tables (Layer::SparseTables) become the
  // model's sparse_tables(), in layer order, and the features they read
  // (crossed ones too) its sparse_features(), in order of first use.
  static absl::StatusOr<std::unique_ptr<Model>> Create(std::string name, Shape input_shape,
                                                       int num_classes,
                                                       std::vector<std::unique_ptr<Layer>> layers,
                                                       std::vector<std::vector<int>> inputs,
                                                       Head head = Head::kSoftmax,
                                                       RegressionLossOptions regression = {});
  // A model of several heads: each head's activation
  // must have its logits' shape, be no other head's, and every layer's
  // output be taken by a later layer or a head. Examples then carry a label
  // per head, in this order (labels [batch, heads().size()]); the model's
  // loss is the heads' losses weighted, and logits() their logits side by
  // side, each head's at head_offset().
  static absl::StatusOr<std::unique_ptr<Model>> CreateWithHeads(
      std::string name, Shape input_shape, std::vector<ModelHead> heads,
      std::vector<std::unique_ptr<Layer>> layers, std::vector<std::vector<int>> inputs);

  const std::string& name() const { return name_; }
  const Shape& input_shape() const { return input_shape_; }
  // The first head's (a multi-task model's other heads are in heads()).
  int num_classes() const { return heads_[0].num_classes; }
  Head head() const { return heads_[0].kind; }
  const RegressionLossOptions& regression_loss() const { return heads_[0].regression; }
  const std::vector<ModelHead>& heads() const { return heads_; }
  bool multi_head() const { return heads_.size() > 1; }
  // Where head h's logits begin in an example's logits.
  int head_offset(size_t h) const { return head_offsets_[h]; }
  // Logits per example: every head's (num_classes, or 1 for a binary or
  // regression head).
  int num_logits() const { return num_logits_; }
  // Labels per example: one per head.
  int num_labels() const { return static_cast<int>(heads_.size()); }
  // The embedding tables of its sparse layers (not in the flat vectors), and
  // the sparse features they read, by name: the columns a batch carries (a
  // cross reads its features' columns; it is not one itself).
  const std::vector<SparseTableInfo>& sparse_tables() const { return sparse_tables_; }
  const std::vector<std::string>& sparse_features() const { return sparse_features_; }
  bool has_sparse() const { return !sparse_tables_.empty(); }

  // Turns a batch's sparse features (one column per sparse_features(), in
  // that order, each of `examples` examples) into each table's distinct row
  // ids and every value's index among them (SparseStep), ready for a row
  // holder to fill in the rows. A bucketed table takes an id (kIds) as its
  // row and a token's fingerprint (kTokens) modulo its buckets
  // (tf.strings.to_hash_bucket_fast); a dynamic table takes an id as it is
  // and a fingerprint's low 63 bits. A crossed table (SparseTableInfo::cross)
  // takes every combination of an example's values of its features, each
  // combination's CrossFingerprint as a token's fingerprint, and gets its own
  // TableStep::offsets. InvalidArgument, naming the feature or cross, table
  // and example, and changing nothing that matters (the step is to be
  // discarded), for columns that do not match, a negative id, an id >= a
  // bucketed table's buckets, or more than kMaxValuesPerExample values in
  // one example's feature or cross.
  absl::Status PrepareSparse(const SparseBatch& batch, int64_t examples, SparseStep* step) const;

  // Checks whole columns of a dataset (one per sparse_features(), in that
  // order) as PrepareSparse checks a batch, so bad data is refused when it
  // is loaded, not at the step that meets it (a cross's values are counted,
  // not computed). Errors name the feature or cross, the example's index and
  // `source`.
  absl::Status CheckSparseColumns(const std::vector<const SparseFeatureColumn*>& columns,
                                  const std::string& source) const;
  const std::vector<VariableInfo>& variables() const { return variables_; }
  int64_t num_params() const { return num_params_; }
  // The layers' names and the shapes of their outputs (one example's), in
  // order: what a summary of the model lists.
  size_t num_layers() const { return layers_.size(); }
  const std::string& layer_name(size_t i) const;
  const Shape& layer_output_shape(size_t i) const { return shapes_[i + 1]; }
  // Multiply-adds of one example's forward pass over every layer
  // (Layer::ForwardMultiplyAdds).
  int64_t ForwardMultiplyAdds() const;
  int64_t num_state() const { return num_state_; }
  const InputPreprocessing& input_preprocessing() const { return input_preprocessing_; }
  void set_input_preprocessing(const InputPreprocessing& p) { input_preprocessing_ = p; }
  // The model spec it was built from; null for a model built in code.
  const ModelSpec* spec() const { return spec_ ? &*spec_ : nullptr; }
  // That spec as ModelSpecToYaml writes it (what checkpoints and exports
  // store); empty for a model built in code.
  const std::string& spec_yaml() const { return spec_yaml_; }
  void set_spec(std::optional<ModelSpec> spec);

  // Fills params[num_params()] and state[num_state()] with the variables'
  // initial values; the same seed gives the same values.
  void InitializeVariables(uint64_t seed, float* params, float* state) const;

  // One training step on `batch` examples: forward (training mode, randomness
  // from `seed`), loss, backward. Overwrites grads[num_params()] with the
  // gradient of the mean loss and batch_stats[num_state()] with the batch's
  // statistics (for the moving averages of batch-norm layers).
  // `grads_ready`, if set, is called after each layer's backward pass that
  // produced gradients, with the lowest flat offset whose gradients are now
  // final (everything from there to the end of the vector is).
  // `params_ready`, if set, is called before each layer's forward pass with
  // the end of the flat range [0, end) it reads and must return once those
  // values are in `params` (a client still receiving them), and once more
  // with num_params() before the backward pass. `state` must be complete.
  LossResult TrainStep(const float* params, const float* state, const float* images,
                       const float* labels, int64_t batch, uint64_t seed, float* grads,
                       float* batch_stats,
                       const std::function<void(int64_t)>& grads_ready = nullptr,
                       SparseStep* sparse = nullptr,
                       const std::function<void(int64_t)>& params_ready = nullptr);

  // Forward pass in evaluation mode; loss summed over the batch.
  // `sparse`: the batch's rows, for a model with sparse layers (its grads
  // are not touched).
  LossResult Evaluate(const float* params, const float* state, const float* images,
                      const float* labels, int64_t batch, const SparseStep* sparse = nullptr);

  // Forward pass in evaluation mode without labels: the logits,
  // [batch, num_classes] (valid until the next call).
  const Tensor& Infer(const float* params, const float* state, const float* images, int64_t batch,
                      const SparseStep* sparse = nullptr);

  // When on, every pass adds its wall time per layer to timings() (for
  // benchmarks; costs two clock reads per layer and pass).
  void EnableProfiling(bool on);
  const std::vector<LayerTiming>& timings() const { return timings_; }

  // Records each layer's forward and backward pass in `trace` while it is
  // active (--trace_steps); null turns it off. `trace` must outlive the model.
  void set_trace(TraceRecorder* trace);

  // Logits of the last Evaluate/TrainStep call, [batch, num_logits()].
  const Tensor& logits() const { return multi_head() ? outputs_ : acts_.back(); }
  // A multi-task model: each head's loss, alone and unweighted, in the last
  // Evaluate/TrainStep call (LossResult of that call: their weighted sum,
  // and the first head's correct and errors).
  const std::vector<LossResult>& head_losses() const { return head_losses_; }

 private:
  Model() = default;
  void Forward(const float* params, const float* state, const float* images, int64_t batch,
               bool training, uint64_t seed, float* batch_stats, const SparseStep* sparse,
               const std::function<void(int64_t)>* params_ready = nullptr);
  // The loss of the last forward pass; with `grads`, each head's gradient
  // goes into act_grads_ at its activation (a chain: into `dlogits`).
  LossResult Loss(const float* labels, Tensor* dlogits);
  // Shared by both Create forms.
  static absl::StatusOr<std::unique_ptr<Model>> Build(std::string name, Shape input_shape,
                                                      std::vector<ModelHead> heads,
                                                      std::vector<std::unique_ptr<Layer>> layers,
                                                      std::vector<std::vector<int>> inputs);
  // Appends `layer`'s tables (and new features) and tells it where they
  // are; a shared table another layer declared already is that one.
  // InvalidArgument for a table name two layers declare unless both share it
  // alike.
  absl::Status BindSparseTables(Layer* layer);
  // The backward pass of a graph (not a chain of layers): each activation's
  // gradient summed over the layers that take it.
  void GraphBackward(BackwardArgs args, const std::function<void(int64_t)>& grads_ready);
  // The masks' lengths of layer `layer`'s inputs (ForwardArgs::lengths).
  std::vector<const int32_t*> InputLengths(size_t layer) const;
  // Zeroes the padded positions of a batch of activation `activation` (or
  // of its gradient) if it has a mask.
  void ZeroPadding(size_t activation, Tensor* t) const;

  std::string name_;
  Shape input_shape_;
  std::vector<ModelHead> heads_;
  std::vector<int> head_offsets_;
  int num_logits_ = 0;
  std::vector<LossResult> head_losses_;
  std::vector<float> head_labels_;  // one head's labels, gathered from [batch, heads]
  Tensor outputs_;                  // a multi-task model's logits, side by side
  std::vector<SparseTableInfo> sparse_tables_;
  std::vector<std::string> sparse_features_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<VariableInfo> variables_;
  int64_t num_params_ = 0;
  int64_t num_state_ = 0;
  InputPreprocessing input_preprocessing_;
  std::optional<ModelSpec> spec_;
  std::string spec_yaml_;

  std::vector<int64_t> layer_first_param_;  // Per layer: lowest trainable offset, or -1.
  std::vector<int64_t> layer_param_end_;    // and one past its highest, or -1.
  std::vector<Tensor> acts_;                // acts_[0] = input, acts_[i + 1] = output of layer i.
  // Per layer: the activations it takes (acts_ indices); {i} in a chain.
  std::vector<std::vector<int>> inputs_;
  // Per activation: the layer whose lengths are its mask (a sequence with
  // padding), or -1.
  std::vector<int> act_mask_;
  std::vector<Shape> shapes_;          // per activation: the input's, then each layer's output's
  std::vector<Tensor> multi_scratch_;  // a multi-input layer's inputs' gradients
  bool chain_ = true;                  // every layer takes the previous one's output
  std::vector<Tensor> act_grads_;      // a graph's: per activation, dL/d(activation)
  std::vector<bool> act_grad_set_;     // act_grads_[j] holds a sum already
  Tensor grad_scratch_;                // one input's gradient before it is added
  Tensor grad_a_, grad_b_;             // Ping-pong buffers for activation gradients.
  bool profiling_ = false;
  std::vector<LayerTiming> timings_;
  TraceRecorder* trace_ = nullptr;
  std::vector<std::string> forward_names_;  // "forward <layer>", per layer
  std::vector<std::string> backward_names_;
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_MODEL_H_
