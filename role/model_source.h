#ifndef PSTRAIN_ROLE_MODEL_SOURCE_H_
#define PSTRAIN_ROLE_MODEL_SOURCE_H_

// Where a job's model comes from: training.model names a built-in
// (models/registry.h), a model spec file or an ONNX file (onnx/onnx_import.h),
// local or gs://; a spec may also be inline in the job's YAML
// (TrainingSpec::model_spec). Every role reads the file itself, so a spec in
// gs:// reaches every VM.

#include <string_view>

#include "absl/status/status.h"
#include "common/env.h"
#include "config/cluster_config.h"

namespace pstrain {

// True when `model` names a spec file rather than a built-in: a gs:// path,
// one with a '/', or a name ending .yaml, .yml or .onnx.
bool IsModelSpecPath(std::string_view model);

// When training.model names a spec file and the job has no spec yet, reads
// it through `env`, checks it (ParseModelSpec, or ImportOnnx for a name
// ending .onnx) and sets model_spec (the spec read, with the file's name) and
// model (the spec's name). An ONNX file's spec takes its starting values from the
// file (ModelSpec::weights, its absolute path) unless training.onnx_weights
// is "ignore", which also drops a spec file's weights; a spec file's relative
// weights are beside the spec file. A no-op for a
// built-in's name or a spec already there. InvalidArgument naming the file
// for one that cannot be read or is not a valid spec.
absl::Status LoadModelSpecFile(Env* env, TrainingSpec* training);

}  // namespace pstrain

#endif  // PSTRAIN_ROLE_MODEL_SOURCE_H_
