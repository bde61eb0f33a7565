#ifndef PSTRAIN_WORKER_DISTRIBUTED_H_
#define PSTRAIN_WORKER_DISTRIBUTED_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/role_flags.h"
#include "ps/shard_layout.h"
#include "worker/ps_client.h"

namespace pstrain {

// Training replica id of a task: the chief is replica 0 when it trains, and
// worker j follows it. -1 for a task that does not train.
int ReplicaId(const JobConfig& job, const TaskSpec& task);

// A PsClient for `replica` of the job, with deadlines that fit its update
// mode (a sync PushPull waits for the step to complete).
// `retry_budget`: how long a ps that does not answer is retried.
absl::StatusOr<std::unique_ptr<PsClient>> MakePsClient(
    const JobConfig& job, const ShardLayout& layout, int replica,
    absl::Duration retry_budget = absl::Seconds(60));

// Runs worker task role.task.task_index: waits for the initialized ps, trains
// its shard of the data until the job is done, returns OK.
absl::Status RunWorker(const RoleConfig& role);

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_DISTRIBUTED_H_
