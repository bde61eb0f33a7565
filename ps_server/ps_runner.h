#ifndef PSTRAIN_PS_SERVER_PS_RUNNER_H_
#define PSTRAIN_PS_SERVER_PS_RUNNER_H_

#include "absl/status/status.h"
#include "role/role_context.h"
#include "role/role_flags.h"

namespace pstrain {

// Runs ps task role.task.task_index of the job: serves its chunks on the
// task's address until the chief shuts the job down, then lingers briefly so
// every replica learns the job is over, and returns OK. A stop request
// (context.termination) before the job started exits at once; after, the
// task keeps serving up to shutdown_grace_secs so the chief can checkpoint.
absl::Status RunParameterServer(const RoleConfig& role, const RoleContext& context);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_PS_RUNNER_H_
