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

#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/model.h"

namespace pstrain {

// Names the graph contract above gives, shared with its readers.
inline constexpr char kOnnxInputName[] = "images";
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
// graph is built from the model's spec (Model::spec_yaml). InvalidArgument for
// a model without a spec (built in code), counts that do not match, or a spec
// that does not describe `model`; ResourceExhausted for a model past protobuf's 2 GiB. Thread-safe:
// reads `model`'s description only.
// `tables`: the trained rows of every model.sparse_tables() entry, in that
// order (empty for a model without embedding tables).
absl::StatusOr<std::string> ModelToOnnx(const Model& model, absl::Span<const float> params,
                                        absl::Span<const float> state,
                                        absl::Span<const TrainedTableRows> tables = {});

}  // namespace pstrain

#endif  // PSTRAIN_ONNX_ONNX_EXPORT_H_
