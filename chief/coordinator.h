#ifndef PSTRAIN_CHIEF_COORDINATOR_H_
#define PSTRAIN_CHIEF_COORDINATOR_H_

#include "absl/status/status.h"
#include "common/role_flags.h"

namespace pstrain {

// Runs the chief: waits for every ps (up to startup_timeout), initializes the
// parameters (unless the ps already hold them), trains as replica 0 unless
// chief_trains is false, evaluates on the test set every eval_steps and at
// the end (the "Saving dict for global step N: ..." line), and once the
// global step reaches train_steps shuts every ps down, which ends the job.
absl::Status RunChief(const RoleConfig& role);

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_COORDINATOR_H_
