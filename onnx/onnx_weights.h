#ifndef PSTRAIN_ONNX_ONNX_WEIGHTS_H_
#define PSTRAIN_ONNX_ONNX_WEIGHTS_H_

// A model's starting values from an ONNX file: the spec's `weights:` (set
// when a job's model is an ONNX file, role/model_source.h) names the file,
// and its initializers, imported as onnx/onnx_import.h converts them (kernels
// to HWIO, rows permuted after an NCHW flatten), replace the drawn initial
// values of the variables of the same name. Variables the file does not hold
// keep their drawn values (a new head on an imported network), with a log
// line naming them.

#include "absl/status/status.h"
#include "common/env.h"
#include "models/model.h"

namespace pstrain {

// Fills params[num_params()] and state[num_state()] with the model's initial
// values: its seeded initializers (Model::InitializeVariables), then the
// values of the spec's weights file when it has one. The read's own error
// for a file that cannot be read; InvalidArgument naming the file for one
// that cannot be imported, a variable whose shape differs from the file's, or
// a file that holds none of the variables.
absl::Status InitializeModelVariables(Env* env, const Model& model, uint64_t seed, float* params,
                                      float* state);

}  // namespace pstrain

#endif  // PSTRAIN_ONNX_ONNX_WEIGHTS_H_
