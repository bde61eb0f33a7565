#include "models/model_options.h"

#include "common/status_macros.h"

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

absl::StatusOr<std::unique_ptr<Model>> BuildJobModel(const TrainingSpec& t) {
  const ModelOptions options = ModelOptionsFromSpec(t);
  PSTRAIN_RETURN_IF_ERROR(CheckModelOptions(t.model, options));
  return BuildModel(t.model, options);
}

}  // namespace pstrain
