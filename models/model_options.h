#ifndef PSTRAIN_MODELS_MODEL_OPTIONS_H_
#define PSTRAIN_MODELS_MODEL_OPTIONS_H_

// A job's training section as the models see it: every role builds its model
// with these, so all agree on the variables.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "config/cluster_config.h"
#include "models/model.h"
#include "models/registry.h"

namespace pstrain {

// The model settings of a job's training section.
ModelOptions ModelOptionsFromSpec(const TrainingSpec& t);

// The optimizer a job uses: training.optimizer, or the model's default.
std::string EffectiveOptimizer(const TrainingSpec& spec);

// Sets training.model_spec, when the job has none, to the spec of the
// built-in training.model names, with the job's settings checked against it
// ("training.num_layers = 21: cifar10_resnet needs 6n + 2 layers ..."), so
// the job's YAML, and the checkpoints and exports that carry it, hold the
// model itself and never need the registry. A role resolves its job once at
// start (role/role_flags.h); the spec then travels as a value. InvalidArgument
// for an unknown model or settings that do not fit.
absl::Status ResolveJobModel(TrainingSpec* t);

// The job's model, built from training.model_spec (resolved first when the
// job has none); errors name the spec's source and lines.
absl::StatusOr<std::unique_ptr<Model>> BuildJobModel(const TrainingSpec& t);

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_MODEL_OPTIONS_H_
