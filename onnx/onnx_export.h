#ifndef PSTRAIN_ONNX_ONNX_EXPORT_H_
#define PSTRAIN_ONNX_ONNX_EXPORT_H_

// A model as an ONNX graph (IR version 8, opset 13, the schema of Debian's
// libonnx-dev 1.12), for ONNX Runtime, Triton, OpenVINO or a browser. The
// graph computes what pstrain-serve does, from the same input:
//
//   input   images         float32 [N, H, W, C], pixels in [0, 1] (NHWC, as
//                          pstrain-serve and pstrain-predict take them)
//   outputs probabilities  float32 [N, classes]: Softmax(axis 1) of the logits
//           classes        int64 [N]: ArgMax(axis 1, keepdims 0) of the logits
//
// The graph, in order (the ONNX importer relies on this contract):
// - the model's preprocessing on the NHWC images, every node named
//   "preprocessing/...": per-image standardization (x - mean) / max(stddev,
//   1 / (255 sqrt(H W C))) as ReduceMean, Sub, Mul, ReduceMean, Sqrt, Max,
//   Div; the model's metadata_props then hold {"pstrain.preprocessing":
//   "per_image_standardization"} (crop and flip are training-only: not here);
// - one Transpose to NCHW, perm [0, 3, 1, 2], named "input/transpose";
// - each spec layer as nodes named after it: "<layer>" for its main node and
//   "<layer>/<suffix>" for the others ("/relu", "/sigmoid", "/tanh",
//   "/leaky_relu" for a fused or `activation:` one, "/flatten", "/nhwc");
//   every node's output tensor has the node's name (a name already taken,
//   as by a layer named "a/relu" after a conv2d "a" with activation relu,
//   gets "_1", "_2", ... appended):
//     conv2d        Conv (explicit pads: same puts the odd pixel at the end,
//                   as TensorFlow; fixed (k-1)/2 before, the rest after)
//     dense         Gemm (transB 0; C the bias when use_bias)
//     max_pool      MaxPool;  average_pool  AveragePool, count_include_pad 0
//     global_average_pool  GlobalAveragePool, then Flatten "<layer>/flatten"
//     flatten       of [h, w, c]: Transpose perm [0, 2, 3, 1] "<layer>/nhwc"
//                   then Flatten axis 1 "<layer>" (pstrain's NHWC order, so a
//                   following Gemm needs no row permutation); of a flat
//                   input: Flatten axis 1
//     batch_norm    BatchNormalization(X, gamma, beta, moving_mean,
//                   moving_variance), inference form, with its epsilon
//     add           Add (more than two inputs: "<layer>/sum_<k>" Adds first)
//     concat        Concat axis 1 (channels, or features when flat)
//     pad_channels  Pad, constant 0, pads from int64 initializer "<layer>/pads"
//     identity      Identity;  relu, sigmoid, tanh  Relu, Sigmoid, Tanh
//     leaky_relu    LeakyRelu with alpha
//     dropout       nothing: it is the identity at inference
// - "probabilities" (Softmax) and "classes" (ArgMax) on the logits.
// Initializers are float32 little-endian raw_data named as pstrain's
// variables: "<layer>/kernel" (conv2d: OIHW, from pstrain's HWIO; dense:
// [in, out] as pstrain's), "<layer>/bias", "<layer>/gamma", "<layer>/beta",
// "<layer>/moving_mean", "<layer>/moving_variance"; besides them only
// "preprocessing/stddev_floor" (a float32 scalar) and "<layer>/pads".
// producer_name "pstrain", producer_version the release, graph name the
// model's name, metadata_props {"pstrain.model_spec": the spec's YAML}.
//
// A tabular model (input: [n], dense and sparse id features; a click model)
// has instead of `images`, in this order:
//
//   inputs  dense          float32 [N, n], the dense features (only when n > 0)
//           <feature>      int64 [N, "<feature>_len"], one per
//                          Model::sparse_features() in that order: each
//                          example's ids, then -1 up to the batch's longest
//                          (an example without values is all -1). An id is
//                          a row in [0, buckets): an integer feature's value
//                          as it is, a string token's FarmHash Fingerprint64
//                          mod buckets (tf.strings.to_hash_bucket_fast,
//                          data/feature_hash.h); the caller hashes. An id
//                          outside [0, buckets) is the caller's error: one
//                          past the table makes ONNX Runtime's Gather fail;
//                          a negative one reads as padding.
//
// Only bucketed tables have an ONNX form (not dynamic ones, whose ids are
// unbounded, nor crossed ones, whose ids are fingerprints of combinations of
// values). Each table is an initializer named
// as the table ("<layer>/embeddings"; linear's "<layer>/<feature>"; a shared
// table its `table:` name), float32
// [buckets, dim], its trained rows at their ids and zeros elsewhere. Per
// feature f, once, nodes "f/ids" Max(f, 0), "f/is_id" GreaterOrEqual(f, 0),
// "f/valid" Cast to float32 [N, L], "f/mask" Unsqueeze [N, L, 1], and when a
// mean, sqrtn or sequence needs them "f/count" ReduceSum over L (keepdims)
// [N, 1], "f/count_at_least_1" Max(count, 1), "f/sqrt_count" Sqrt. (A layer
// named as its feature, as text_transformer's `tokens`, has its nodes named
// "<layer>_1", "<layer>_1/...": the feature's input holds the name.) The
// layers:
//     embedding        "<layer>/rows" Gather(table, f/ids) [N, L, dim],
//                      "<layer>/masked" Mul by f/mask, ReduceSum over L:
//                      sum: that is "<layer>"; mean, sqrtn: "<layer>/sum",
//                      then "<layer>" Div by f/count_at_least_1 or
//                      f/sqrt_count (an example without ids gives zeros)
//     linear           per feature the same on its [buckets, 1] table,
//                      "<layer>/<feature>/sum" [N, 1]; "<layer>" Sum of
//                      the bias and those
//     dot_interaction  "<layer>/concat" of the k inputs [N, k d],
//                      "<layer>/stacked" Reshape [N, k, d], "<layer>/dots"
//                      MatMul with its "<layer>/transposed" [N, k, k],
//                      "<layer>/flat_dots" [N, k k], "<layer>/pairs" Gather
//                      (axis 1) of int64 "<layer>/pair_indices" i k + j for
//                      (1, 0), (2, 0), (2, 1), (3, 0), ... (the layer's
//                      order), "<layer>" Concat of x_0 and those
//     concat           of an empty dense input (n == 0): that input left out
// Sequences (an embedding with `sequence: {max_length: L}`; a feature's
// input as above: each example's values in order, then only -1s):
//     embedding        "<layer>/values" f/count as int64, "<layer>/first"
//                      max(values - L, 0), "<layer>/take" first + k for k in
//                      [0, L), "<layer>/padded" Pad of the input with L -1s
//                      ("<layer>/pads", "<layer>/pad_value"), "<layer>/ids"
//                      GatherElements axis 1 [N, L] (the last L values, then
//                      -1), "<layer>/count" min(values, L), "<layer>/is_value"
//                      k < count, "<layer>/mask" float32 [N, L, 1],
//                      "<layer>/rows" Gather(table, "<layer>/row_ids"
//                      Max(ids, 0)); positions: from_start adds
//                      "<layer>/positions" [L, dim], from_end Gathers its row
//                      count - 1 - k ("<layer>/position_rows");
//                      "<layer>" Mul by the mask [N, L, dim]
//     a layer whose output keeps a sequence's mask (as pstrain's model:
//     attention's query's, else the first input's when the output is a
//     sequence of its length): "<layer>/zero_padding" Mul by the mask, but
//     after identity and dropout
//     dense on [L, d]  "<layer>/matmul" MatMul, "<layer>" Add of the bias
//     layer_norm       on [L, d] too, over the last axis
//     concat           of sequences: axis 2; pad_channels of a sequence
//                      pads axis 2
//     multi_head_attention  "<layer>/{query,key,value}" MatMul and Add
//                      ("/matmul"), "/split" Reshape, "/heads" Transpose to
//                      [N, heads, L, dim] (keys [N, heads, dim, L]),
//                      "<layer>/scores" MatMul, "<layer>/scaled" Mul by
//                      "<layer>/scale" 1 / sqrt(key_dim); with a mask or
//                      causal, what a query may attend to: the keys' mask
//                      "<mask layer>/key_mask" [N, 1, 1, L] and/or, when
//                      causal, "<layer>/causal" [Lq, Lk] (key j at or before
//                      query i: "/at_or_before" LessOrEqual of
//                      "/key_positions" and "/query_positions", Cast), their
//                      product "<layer>/allowed" when both; "/is_allowed" Cast,
//                      "/masked_scores" Where (else -1e9), "/softmax",
//                      "<layer>/weights" Mul by allowed (a query with no key
//                      gets no value); "<layer>/context" MatMul,
//                      "/context_positions" Transpose, "/context_joined"
//                      Reshape, "<layer>/output" projection; a query [d] is
//                      "<layer>/query_sequence" Unsqueeze, "<layer>" Squeeze
//     sequence_pool    sum: ReduceSum over L; mean: "<layer>/sum" Div by
//                      "<layer>/count_at_least_1"; max: "<layer>/masked"
//                      Where (else the lowest float), "<layer>/max"
//                      ReduceMax, "<layer>" Mul by min(count, 1); last:
//                      "<layer>/select" one-hot of position count - 1,
//                      "<layer>" ReduceSum of the product
//     din_attention    "<layer>/unit_input" Concat axis 2 of h, the
//                      candidate Expanded ("<layer>/candidates"), h - c,
//                      h * c; "<layer>/hidden" MatMul and Add, its
//                      activation, "<layer>/score" [N, L, 1],
//                      "<layer>/weights" Mul by the mask, "<layer>" ReduceSum
//                      over L of h times the weights
// and the other layers as above (a layer named "dense", the first dense
// layer's default name, has node "dense_1": the input has that name). A
// table shared by several features (`table: <name>`) is one initializer
// named so, Gathered with each reader's feature's ids.
// Constants that are no variable are the int64 and float32 initializers
// "constants/..." and dot_interaction's "<layer>/stacked_shape",
// "<layer>/flat_shape" and "<layer>/pair_indices"; layer_norm's
// "<layer>/epsilon"; the sequence layers' "<layer>/pads",
// "<layer>/pad_value", "<layer>/scale", "<layer>/last", "<layer>/length"
// and "<...>_shape" (Reshape's and Expand's shapes).
//
// A binary head (Head::kBinary, one logit z) has the outputs, in order:
//   probabilities  float32 [N, 2]: [1 - sigmoid(z), sigmoid(z)]
//                  ("probabilities/negative" Sub, then Concat)
//   classes        int64 [N]: 1 where sigmoid(z) > 0.5, else 0, as
//                  pstrain's Predictor decides (a tie is 0; the ArgMax of
//                  the probabilities) ("classes/positive" Greater of
//                  "logistic" and 0.5, "classes/int64" Cast, Squeeze)
//   logistic       float32 [N, 1]: sigmoid(z) (node "logistic")
// A softmax head on a tabular model has the two outputs above.
// The ONNX importer (onnx_import.h) does not read tabular graphs.

#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/model.h"

namespace pstrain {

// Names the graph contract above gives, shared with its readers.
inline constexpr char kOnnxInputName[] = "images";
inline constexpr char kOnnxDenseInputName[] = "dense";
inline constexpr char kOnnxLogisticName[] = "logistic";
// A regression head's one output: [N] predicted values.
inline constexpr char kOnnxPredictionsName[] = "predictions";
inline constexpr char kOnnxConstantsPrefix[] = "constants/";
inline constexpr char kOnnxProbabilitiesName[] = "probabilities";
inline constexpr char kOnnxClassesName[] = "classes";
inline constexpr char kOnnxInputTransposeName[] = "input/transpose";
inline constexpr char kOnnxPreprocessingPrefix[] = "preprocessing/";
inline constexpr char kOnnxProducerName[] = "pstrain";
inline constexpr char kOnnxSpecKey[] = "pstrain.model_spec";
inline constexpr char kOnnxPreprocessingKey[] = "pstrain.preprocessing";
inline constexpr char kOnnxPerImageStandardization[] = "per_image_standardization";
inline constexpr int64_t kOnnxIrVersion = 8;
inline constexpr int64_t kOnnxOpsetVersion = 13;

// `model` with the values `params` (num_params()) and `state` (num_state():
// the batch-norm moving statistics) as a serialized onnx.ModelProto. The
// graph is built from the model's spec (Model::spec_yaml).
// `tables`: the trained rows of every model.sparse_tables() entry, in that
// order (empty for a model without embedding tables); a row not given is
// zeros.
// Unimplemented, naming the table, for a dynamic table (buckets 0), a
// crossed one, or a feature read by tables of different bucket counts.
// InvalidArgument for a model without a spec (built in code), counts that do
// not match (values, tables), a spec that does not describe `model`, a
// table's row id outside [0, buckets) or given twice, weights that are not
// ids x dim, or a sparse feature or table named as another input, output or
// initializer; ResourceExhausted for a model past protobuf's 2 GiB.
// Thread-safe: reads `model`'s description only.
absl::StatusOr<std::string> ModelToOnnx(const Model& model, absl::Span<const float> params,
                                        absl::Span<const float> state,
                                        absl::Span<const TrainedTableRows> tables = {});

}  // namespace pstrain

#endif  // PSTRAIN_ONNX_ONNX_EXPORT_H_
