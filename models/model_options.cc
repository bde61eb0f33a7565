#include "models/model_options.h"

#include <utility>

#include "common/status_macros.h"
#include "config/model_spec.h"

namespace pstrain {

ModelOptions ModelOptionsFromSpec(const TrainingSpec& t) {
  ModelOptions options;
  options.num_layers = t.num_layers;
  options.batch_norm_epsilon = static_cast<float>(t.batch_norm_epsilon);
  options.batch_norm_decay = t.batch_norm_decay;
  return options;
}

std::string EffectiveOptimizer(const TrainingSpec& spec) {
  if (!spec.optimizer.empty()) return spec.optimizer;
  return DefaultOptimizer(spec.model);
}

absl::Status ResolveJobModel(TrainingSpec* t) {
  if (t->model_spec.has_value()) return absl::OkStatus();
  PSTRAIN_ASSIGN_OR_RETURN(std::string text, BuiltinModelSpec(t->model, ModelOptionsFromSpec(*t)));
  PSTRAIN_ASSIGN_OR_RETURN(t->model_spec, ParseJobModelSpec(text, t->model));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Model>> BuildJobModel(const TrainingSpec& t) {
  const SpecBuildOptions options = SpecBuildOptionsOf(t.batch_norm_decay);
  if (t.model_spec.has_value()) {
    return BuildSpecModel(t.model_spec->spec, t.model_spec->source, options);
  }
  TrainingSpec resolved = t;
  PSTRAIN_RETURN_IF_ERROR(ResolveJobModel(&resolved));
  return BuildSpecModel(resolved.model_spec->spec, resolved.model_spec->source, options);
}

}  // namespace pstrain
