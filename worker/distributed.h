#ifndef PSTRAIN_WORKER_DISTRIBUTED_H_
#define PSTRAIN_WORKER_DISTRIBUTED_H_

#include "absl/status/status.h"
#include "role/role_context.h"
#include "role/role_flags.h"

namespace pstrain {

// Runs worker task role.task.task_index: waits for the initialized ps, trains
// its shard of the data until the job is done, returns OK. A stop request
// (context.termination) ends it after its current step: it leaves the job
// (sync steps stop waiting for it) and returns OK.
absl::Status RunWorker(const RoleConfig& role, const RoleContext& context);

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_DISTRIBUTED_H_
