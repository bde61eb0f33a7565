#ifndef PSTRAIN_PS_PS_RUNNER_H_
#define PSTRAIN_PS_PS_RUNNER_H_

#include "absl/status/status.h"
#include "common/role_flags.h"
#include "ps/optimizer.h"

namespace pstrain {

// Runs ps task role.task.task_index of the job: serves its shard on the
// task's address until the chief shuts the job down, then lingers briefly so
// every replica learns the job is over, and returns OK.
absl::Status RunParameterServer(const RoleConfig& role);

// The optimizer a job's training section asks for.
absl::StatusOr<OptimizerConfig> OptimizerConfigFromSpec(const TrainingSpec& spec);

}  // namespace pstrain

#endif  // PSTRAIN_PS_PS_RUNNER_H_
