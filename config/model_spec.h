#ifndef PSTRAIN_CONFIG_MODEL_SPEC_H_
#define PSTRAIN_CONFIG_MODEL_SPEC_H_

// A network as data: the text a job's `model:` section or a net.yaml file
// holds, read into plain structs (no layer code here; models/spec_builder.h
// builds a Model from a ModelSpec). The format:
//
//   name: fashion_cnn          # optional
//   input: [28, 28, 1]         # height, width, channels of one example
//   classes: 10                # the last layer's output
//   preprocessing:             # optional, all off by default
//     crop_padding: 4          # training: pad and randomly crop back
//     random_flip: true        # training: random left-right flips
//     per_image_standardization: true
//   weights: gs://b/net.onnx   # optional: starting values (ONNX initializers)
//   layers:                    # applied in order
//     - conv2d: {filters: 32, kernel: 5, padding: same, activation: relu}
//     - max_pool: {pool: 2}
//     - flatten
//     - dense: {units: 10}
//
// A layer is its type alone, or its type mapping to its options; `name` is
// one of every layer's options (default: the type's Keras name, numbered from
// the second on: conv2d, conv2d_1, ...), and names its variables
// ("conv2d_1/kernel"). A layer takes the previous layer's output, or with
// `input: <name>` the output of an earlier layer (or `input`, the model's);
// add, concat and dot_interaction take it together with `inputs: [<name>,
// ...]`, so layers form a graph: residual connections, Inception-style
// blocks, two towers:
//     - conv2d: {filters: 16, kernel: 3, padding: same, name: a}
//     - conv2d: {filters: 16, kernel: 3, padding: same}
//     - add: {inputs: [a]}            # the previous output + a's
// Every key, its default and what it accepts is in LayerReference().
//
// A tabular model (click prediction) takes [n] dense float features per
// example and sparse (id) features by name, and may end in one logit:
//
//   input: [13]                # n >= 0 dense features of one example
//   head: binary               # one logit, sigmoid cross-entropy (classes 2)
//                              # or regression: one output, the label's value
//                              # (loss: mse, mae or huber with huber_delta)
//   layers:
//     - embedding: {feature: C1, dim: 8, dynamic: true, name: emb_C1}
//     - embedding: {feature: C2, dim: 8, buckets: 100000, name: emb_C2}
//     - concat: {input: input, inputs: [emb_C1, emb_C2]}
//     - dense: {units: 64, activation: relu}
//     - dense: {units: 1, name: deep}
//     - linear: {features: [C1, C2], crosses: [[C1, C2]], dynamic: true, name: wide}
//     - add: {input: deep, inputs: [wide]}
//
// embedding and linear read their feature's ids, not an activation: without
// `input` they take the model's input (LayerTakesModelInputByDefault), so the
// previous layer's output stays for a later layer to take.
//
// Sequences: an embedding with `sequence: {max_length: L}` gives a
// feature's values in order, [L, dim] with a mask (padding after the
// values); layers over it keep the mask, and attention and sequence_pool
// leave the padding out:
//     - embedding: {feature: tokens, dim: 64, dynamic: true,
//                   sequence: {max_length: 128, positions: from_start}, name: tok}
//     - multi_head_attention: {heads: 4, key_dim: 16}
//     - sequence_pool: {mode: mean}

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain {

// An initializer as a spec writes it: glorot_uniform, he_normal, zeros,
// ones, truncated_normal (stddev 0.05), truncated_normal(<stddev>),
// constant(<value>), or for embedding tables uniform (scale 0.05) or
// uniform(<scale>): values in [-scale, scale).
struct InitializerSetting {
  std::string kind;
  float arg = 0.0f;  // truncated_normal: its stddev; constant: its value; uniform: its scale
  bool operator==(const InitializerSetting&) const = default;
};

struct LayerSpec {
  std::string type;  // "conv2d", "max_pool", ... (ModelSpecLayerTypes())
  std::string name;  // unique in the model
  int line = 0;      // where it is in the spec text (1-based), 0 if unknown
  // What the layer takes: the output of the layer named `input` ("input" is
  // the model's input), or when empty the previous layer's output (the
  // model's input for the first layer; for embedding and linear the model's
  // input). add, concat and dot_interaction also take `inputs`.
  std::string input;
  std::vector<std::string> inputs;

  // conv2d, dense, pad_channels
  int filters = 0;  // conv2d; pad_channels: the output's channels
  int units = 0;    // dense
  int kernel = 0;   // conv2d: square kernel size
  int strides = 1;  // conv2d, pools
  int pool = 2;     // max_pool, average_pool: square window
  // "same" or "valid" (Keras' default); conv2d also "fixed": (kernel - 1) / 2
  // before and the rest after whatever the stride, then valid (TensorFlow's
  // conv2d_fixed_padding, the CIFAR-10 estimator's strided convolutions)
  std::string padding = "valid";
  std::string activation = "none";  // conv2d, dense: none, relu, sigmoid, tanh, leaky_relu, gelu
  bool use_bias = true;
  InitializerSetting kernel_initializer = {"glorot_uniform", 0.0f};
  InitializerSetting bias_initializer = {"zeros", 0.0f};
  // dropout
  float rate = 0.0f;
  // batch_norm
  float epsilon = 1e-3f;
  bool relu = false;       // batch_norm: a ReLU fused after it
  float momentum = -1.0f;  // batch_norm: moving-average decay; < 0: the job's (or Keras' 0.99)
  // conv2d, dense, batch_norm: false freezes the layer's variables.
  bool trainable = true;
  // leaky_relu (and activation: leaky_relu)
  float alpha = 0.3f;
  // embedding: the sparse feature it looks up; linear: the features it sums
  // a weight of per value (non-empty, distinct).
  std::string feature;
  std::vector<std::string> features;
  // linear: crossed features (tf.feature_column.crossed_column), each a list
  // of two or more distinct features' names (in `features` or not), no two
  // of the same features; each a table "<name>/<a>_X_<b>..." of a weight per
  // combination of their values.
  std::vector<std::vector<std::string>> crosses;
  int dim = 0;  // embedding: floats per row
  // embedding, linear: a table of rows [0, buckets) (ids hashed or taken as
  // they are), or with `dynamic` (exactly one of the two) a hash table of any
  // id, rows created on first touch.
  int64_t buckets = 0;
  bool dynamic = false;
  std::string combiner = "mean";  // embedding: sum, mean or sqrtn over an example's values
  InitializerSetting embeddings_initializer = {"uniform", 0.05f};  // Keras' Embedding's
  // embedding's `sequence: {max_length, positions}`: > 0 makes the lookup
  // a sequence [max_length, dim] with a mask; positions: none, from_start
  // or from_end (learned position rows, models/embedding.h).
  int max_length = 0;
  std::string positions = "none";
  // embedding: the name of a table it shares with other embeddings (a
  // history and a candidate reading the same item rows); "": its own,
  // <name>/embeddings.
  std::string table;
  // multi_head_attention
  int heads = 0;
  int key_dim = 0;
  int value_dim = 0;  // 0: key_dim
  float dropout = 0.0f;
  bool causal = false;
  std::string query;  // the layer whose output is the query (target attention); "": self
  // sequence_pool: mean, max, sum or last
  std::string mode = "mean";
  // mmoe: the experts shared by every task, the tasks (a gate each), and
  // each expert's dense layers' units (its `units: [u1, ..., uk]`).
  int experts = 0;
  int tasks = 0;
  std::vector<int> expert_units;
  // slice: the features [begin, begin + size) of a flat input.
  int begin = 0;
  int size = 0;

  bool operator==(const LayerSpec&) const = default;
};

// One of a multi-task model's heads (ModelSpec::heads): an output of the
// network, the loss that trains it and the label it is trained on.
struct HeadSpec {
  std::string name;  // letters, digits and _; unique among the heads
  // "binary" (one logit, sigmoid cross-entropy), "softmax" (`classes`
  // logits) or "regression" (one value, with `loss`).
  std::string kind;
  int classes = 0;           // softmax: >= 2; binary: 2; regression: 0
  std::string input;         // the layer whose output is the head's
  std::string label;         // the label column or Example feature; default: name
  float weight = 1.0f;       // its share of the model's loss: > 0
  std::string loss = "mse";  // regression: mse, mae or huber
  float huber_delta = 1.0f;
  int line = 0;  // where it is in the spec text (1-based), 0 if unknown

  bool operator==(const HeadSpec&) const = default;
};

struct ModelSpec {
  std::string name;
  // {height, width, channels} of an image, or {n}: n >= 0 dense features.
  std::vector<int64_t> input;
  int classes = 0;  // 2 with head binary, 0 with head regression
  // "softmax": classes logits, softmax cross-entropy; "binary": one logit
  // (a click model), sigmoid cross-entropy; "regression": one output, the
  // label's value predicted, with `loss`.
  std::string head = "softmax";
  // head: regression: "mse" (the default), "mae" or "huber" (with
  // huber_delta > 0, 1 by default).
  std::string loss = "mse";
  float huber_delta = 1.0f;
  // A multi-task model: its heads, in order, instead of head, classes, loss
  // and huber_delta (which keep their defaults). Empty: one head, as above.
  // The model's loss is the weighted sum of theirs; each example has a
  // label per head, in this order.
  std::vector<HeadSpec> heads;
  int crop_padding = 0;
  bool random_flip = false;
  bool per_image_standardization = false;
  std::vector<LayerSpec> layers;
  // Where the variables' starting values come from instead of their
  // initializers: an ONNX file (local or gs://) whose initializers, named as
  // the variables, hold them (onnx/onnx_weights.h). `model: net.onnx` sets it
  // to that file unless the job says onnx_weights: ignore. Empty: initializers.
  std::string weights;

  bool operator==(const ModelSpec&) const = default;
};

// At most this many layers in a spec (a larger one is refused, naming it).
inline constexpr int kMaxSpecLayers = 10000;

// Reads a spec from YAML text. `source` (a file name, "model") begins every
// message. InvalidArgument, with the line, for a syntax error, an unknown
// layer type or key (with "did you mean"), a value of the wrong type, a zero
// or negative size, a duplicate name, an embedding or linear without exactly
// one of buckets and dynamic: true, a linear's cross of fewer than two
// features, of one feature twice, of the features of another cross or whose
// table has another table's name, head: binary with classes other than 2,
// head: regression with classes, loss or huber_delta without the head or
// loss they belong to, or more than kMaxSpecLayers layers; with `heads:`, a
// head without name, kind or input, an unknown key or kind, a name or label
// used twice, an input that is no layer, two heads on one layer, or head,
// classes, loss or huber_delta at the top as well.
// Shapes are checked when the spec is built (models/spec_builder.h).
absl::StatusOr<ModelSpec> ParseModelSpec(std::string_view yaml, std::string_view source);

// The spec as YAML that ParseModelSpec reads back to the same spec, every
// option written out (what a checkpoint or an export stores), except `head`,
// written only when binary or regression (a regression head with its loss,
// and huber_delta with huber), and of buckets and dynamic the one in use;
// a multi-task spec writes its heads instead of head and classes.
std::string ModelSpecToYaml(const ModelSpec& spec);

// A layer's options as ModelSpecToYaml writes them, key and value text, in
// its type's key order (name, input and inputs not among them).
std::vector<std::pair<std::string, std::string>> LayerOptions(const LayerSpec& layer);

// True when `a` and `b` are the same network: equal but for the lines their
// layers were read at.
bool SameModelSpec(const ModelSpec& a, const ModelSpec& b);

// True for the layer types that without `input:` take the model's input
// rather than the previous layer's output: embedding and linear, whose
// output does not depend on it.
bool LayerTakesModelInputByDefault(const LayerSpec& layer);

// What a layer takes, in order: its input ("" for the previous layer's
// output, "input" for the model's, which embedding and linear take without
// input:), then its inputs, then a multi_head_attention's query.
std::vector<std::string> LayerInputNames(const LayerSpec& layer);

// The layer types a spec accepts.
const std::vector<std::string>& ModelSpecLayerTypes();

// Every layer type with each of its keys, the key's default and what it
// accepts, as text: docs/models.md holds it (model_spec_test.cc checks).
std::string LayerReference();

}  // namespace pstrain

#endif  // PSTRAIN_CONFIG_MODEL_SPEC_H_
