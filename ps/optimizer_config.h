#ifndef PSTRAIN_PS_OPTIMIZER_CONFIG_H_
#define PSTRAIN_PS_OPTIMIZER_CONFIG_H_

#include "absl/status/statusor.h"
#include "config/cluster_config.h"
#include "ps/optimizer.h"

namespace pstrain {

// The optimizer a job's training section asks for: its type (or the model's
// default), learning rate and schedule, momentum, weight decay and what it
// excludes. `replicas` (training replicas of the job) sizes the model's
// default schedule when the job gives none (models/registry.h). Used by the
// ps (which applies it), the chief (its summaries) and local mode; it is not
// the ps server, so none of them links that.
absl::StatusOr<OptimizerConfig> OptimizerConfigFromSpec(const TrainingSpec& spec, int replicas = 1);

// The moving-average decay of the batch-norm statistics a model's state
// holds, for a batch norm that carries none of its own (built ones carry
// theirs, StateDecays): training.batch_norm_decay, or Keras' 0.99 when the
// job sets none. The ps's and local mode's.
float StateDecayOf(const TrainingSpec& spec);

}  // namespace pstrain

#endif  // PSTRAIN_PS_OPTIMIZER_CONFIG_H_
