#ifndef PSTRAIN_ONNX_ONNX_IMPORT_H_
#define PSTRAIN_ONNX_ONNX_IMPORT_H_

// Reads an ONNX model (a classifier exported by torch.onnx.export or by
// pstrain) into a model spec (config/model_spec.h) and its initializers as
// the spec's starting weights, so everything downstream is the spec path.
//
// The graph: one float32 input, NCHW [N, C, H, W] with C, H, W fixed, or
// pstrain's own NHWC [N, H, W, C] followed by Transpose perm [0, 3, 1, 2]
// (after its `preprocessing/...` nodes when the model's metadata says
// pstrain.preprocessing: per_image_standardization); one float output
// [N, classes] (logits, or a trailing Softmax / LogSoftmax, which is dropped:
// the loss has its own; an int64 ArgMax branch is ignored). Nodes that do not
// lead to that output are ignored. The ops and what they become:
//   Conv (2-D, square kernel, equal strides, group 1, dilations 1; pads that
//     are valid, TensorFlow's same or pstrain's fixed)     -> conv2d
//   Gemm (B an initializer), MatMul (+ Add of a 1-D initializer) -> dense
//   Relu, LeakyRelu, Sigmoid, Tanh -> the previous conv2d's or dense's
//     activation when nothing else takes that layer's output (through
//     Identity, Flatten or one-input Concat either), else a layer of their own;
//     Relu after BatchNormalization -> batch_norm relu: true
//   MaxPool, AveragePool (count_include_pad 0, or no padding) -> max_pool,
//     average_pool; GlobalAveragePool (+ its Flatten) -> global_average_pool
//   BatchNormalization (inference or training form) -> batch_norm with the
//     initializers' moving statistics, epsilon, momentum (the decay; absent:
//     the job's batch_norm_decay)
//   Dropout -> dropout; Flatten (axis 1), Reshape to [N, -1] (its shape a
//     constant or Shape/Gather/Unsqueeze/Concat/Constant arithmetic) -> flatten
//   Add (two activations) -> add; Concat (channels) -> concat; Identity -> nothing;
//   Pad (zeros on axis 1 of [N, C, H, W] or [N, F], equal before and after:
//     what pstrain's exporter writes) -> pad_channels.
// Sizes from the file (dims, pads, channels, shape constants) are bounded
// before any arithmetic on them; a constant in shape arithmetic is >= -1.
// NCHW becomes pstrain's NHWC: conv kernels OIHW -> HWIO, dense kernels
// [in, out], and the first dense after an NCHW flatten gets its rows permuted
// from CHW to HWC order, so the model computes the same function.
//
// Layer names come from the weights' names ("conv1.weight" -> conv1,
// "conv2d/kernel" -> conv2d) or the node's ("/pool/MaxPool" -> pool),
// sanitized to the spec's name rule and made unique; the weights are named
// as the built model's variables ("conv1/kernel").

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "config/model_spec.h"

namespace pstrain {

// One variable's starting value: its pstrain name ("conv1/kernel") and shape
// in pstrain's layout (conv kernel HWIO, dense kernel [in, units]), values
// row-major.
struct ImportedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

struct ImportedOnnx {
  ModelSpec spec;
  // Every variable of the model the spec builds (trainable and state), in
  // the spec's layer order.
  std::vector<ImportedTensor> weights;
  // What the import did that a user may want to know ("dropped the trailing
  // Softmax ..."), one sentence each.
  std::vector<std::string> notes;
  // Each layer's name -> the ONNX node that made it ("node /conv1/Conv
  // (Conv)"), for messages about a layer (a build error names the layer).
  std::map<std::string, std::string> origins;
};

// The ops ImportOnnx accepts, for messages and docs/onnx.md's table.
const std::vector<std::string>& SupportedOnnxOps();

// Reads `bytes`, a serialized onnx.ModelProto. `source` (the file's name)
// begins every message. InvalidArgument naming the node or tensor for what
// pstrain cannot compute (an unsupported op or attribute, with the supported
// list), an IR version over 8 or an opset over 17 (too new) or under 7,
// a cycle, an unknown name, an initializer whose shape does not fit its op,
// a non-float weight, external data, an input whose H, W, C are not fixed;
// DataLoss for bytes that are not a model or a tensor whose data does not
// match its dims (checked before anything is allocated). Thread-safe.
absl::StatusOr<ImportedOnnx> ImportOnnx(std::string_view bytes, std::string_view source);

}  // namespace pstrain

#endif  // PSTRAIN_ONNX_ONNX_IMPORT_H_
