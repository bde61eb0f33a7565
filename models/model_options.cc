#include "models/model_options.h"

#include <utility>

#include "common/status_macros.h"
#include "config/model_spec.h"

namespace pstrain {

ModelOptions ModelOptionsFromSpec(const TrainingSpec& t) {
  ModelOptions options;
  options.num_layers = t.num_layers;
  options.batch_norm_epsilon = static_cast<float>(t.batch_norm_epsilon);
  return options;
}

std::string EffectiveOptimizer(const TrainingSpec& spec) {
  if (!spec.optimizer.empty()) return spec.optimizer;
  return DefaultOptimizer(spec.model);
}

absl::StatusOr<std::string> JobModelSpec(const TrainingSpec& t) {
  if (!t.model_spec.empty()) return t.model_spec;
  PSTRAIN_ASSIGN_OR_RETURN(std::string text, BuiltinModelSpec(t.model, ModelOptionsFromSpec(t)));
  // As ModelSpecToYaml writes it, the form a spec in the job has.
  PSTRAIN_ASSIGN_OR_RETURN(ModelSpec spec, ParseModelSpec(text, t.model));
  return ModelSpecToYaml(spec);
}

absl::Status ResolveJobModel(TrainingSpec* t) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string spec, JobModelSpec(*t));
  t->model_spec = std::move(spec);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Model>> BuildJobModel(const TrainingSpec& t) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string spec, JobModelSpec(t));
  return BuildModelFromSpecText(spec, t.model);
}

}  // namespace pstrain
