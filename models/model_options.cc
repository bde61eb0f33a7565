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
  PSTRAIN_ASSIGN_OR_RETURN(std::string text, JobModelSpec(t));
  const SpecBuildOptions options = SpecBuildOptionsOf(t.batch_norm_decay);
  if (t.model_origin.text.empty()) return BuildModelFromSpecText(text, t.model, options);
  // Built from the text as its author wrote it, so that an error names the
  // file and the line they see; the same spec as model_spec, with its name.
  PSTRAIN_ASSIGN_OR_RETURN(ModelSpec spec,
                           ParseModelSpec(t.model_origin.text, t.model_origin.source));
  spec.name = t.model;
  // Where its starting values are, as the job resolved it (relative to the
  // spec file, or dropped by onnx_weights: ignore).
  PSTRAIN_ASSIGN_OR_RETURN(const ModelSpec job_spec, ParseModelSpec(text, t.model));
  spec.weights = job_spec.weights;
  if (ModelSpecToYaml(spec) != text) {
    return absl::InternalError(absl::StrCat("the model spec from ", t.model_origin.source,
                                            " is not the job's (", t.model, ")"));
  }
  return BuildSpecModel(spec, t.model_origin.source, options);
}

}  // namespace pstrain
