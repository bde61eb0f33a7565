#ifndef PSTRAIN_CONFIG_MODEL_SOURCE_H_
#define PSTRAIN_CONFIG_MODEL_SOURCE_H_

// Where a job's model comes from: training.model names a built-in
// (models/registry.h) or a model spec file, local or gs://; a spec may also
// be inline in the job's YAML (TrainingSpec::model_spec). Every role reads
// the file itself, so a spec in gs:// reaches every VM.

#include <string_view>

#include "absl/status/status.h"
#include "common/env.h"
#include "config/cluster_config.h"

namespace pstrain {

// True when `model` names a spec file rather than a built-in: a gs:// path,
// one with a '/', or a name ending .yaml or .yml.
bool IsModelSpecPath(std::string_view model);

// When training.model names a spec file and the job has no spec yet, reads
// it through `env`, checks it (ParseModelSpec) and sets model_spec (as
// ModelSpecToYaml writes it) and model (the spec's name). A no-op for a
// built-in's name or a spec already there. InvalidArgument naming the file
// for one that cannot be read or is not a valid spec.
absl::Status LoadModelSpecFile(Env* env, TrainingSpec* training);

}  // namespace pstrain

#endif  // PSTRAIN_CONFIG_MODEL_SOURCE_H_
