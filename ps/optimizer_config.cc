#include "ps/optimizer_config.h"

#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "models/model_options.h"
#include "models/registry.h"
#include "models/spec_builder.h"

namespace pstrain {

absl::StatusOr<OptimizerConfig> OptimizerConfigFromSpec(const TrainingSpec& t, int replicas) {
  OptimizerConfig config;
  PSTRAIN_ASSIGN_OR_RETURN(config.type, ParseOptimizerType(EffectiveOptimizer(t)));
  const std::string schedule = t.learning_rate_schedule.empty()
                                   ? DefaultLearningRateSchedule(t.model, t.batch_size, replicas)
                                   : t.learning_rate_schedule;
  PSTRAIN_ASSIGN_OR_RETURN(
      config.learning_rate,
      ParseLearningRateSchedule(static_cast<float>(t.learning_rate), schedule));
  config.momentum = static_cast<float>(t.momentum);
  config.nesterov = t.nesterov;
  config.weight_decay = static_cast<float>(t.weight_decay);
  for (absl::string_view s : absl::StrSplit(t.weight_decay_exclusions, ',', absl::SkipEmpty())) {
    config.weight_decay_exclusions.emplace_back(s);
  }
  return config;
}

float StateDecayOf(const TrainingSpec& t) {
  return t.batch_norm_decay >= 0 ? static_cast<float>(t.batch_norm_decay) : kKerasBatchNormMomentum;
}

}  // namespace pstrain
