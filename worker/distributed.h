#ifndef PSTRAIN_WORKER_DISTRIBUTED_H_
#define PSTRAIN_WORKER_DISTRIBUTED_H_

#include <memory>

#include "absl/status/statusor.h"
#include "config/role_context.h"
#include "config/role_flags.h"
#include "ps/shard_layout.h"
#include "worker/parameter_client.h"
#include "worker/parameter_servers.h"

namespace pstrain {

// Training replica id of a task: the chief is replica 0 when it trains, and
// worker j follows it. -1 for a task that does not train.
int ReplicaId(const JobConfig& job, const TaskSpec& task);

// A gRPC ParameterClient (PsClient) for `replica` of the job, with deadlines
// that fit its update mode (a sync PushPull waits for the step to complete).
// `retry_budget`: how long a ps that does not answer is retried; `trace`
// (may be null) records every chunk's round trip.
absl::StatusOr<std::unique_ptr<ParameterClient>> MakePsClient(
    const JobConfig& job, const ShardLayout& layout, int replica,
    absl::Duration retry_budget = absl::Seconds(60), TraceRecorder* trace = nullptr);

// The job's ParameterServers over gRPC, as patient as `patience` says.
absl::StatusOr<std::unique_ptr<ParameterServers>> MakeParameterServers(
    const JobConfig& job, const ShardLayout& layout, const CallPatience& patience = {});

// Runs worker task role.task.task_index: waits for the initialized ps, trains
// its shard of the data until the job is done, returns OK. A stop request
// (context.termination) ends it after its current step: it leaves the job
// (sync steps stop waiting for it) and returns OK.
absl::Status RunWorker(const RoleConfig& role, const RoleContext& context);

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_DISTRIBUTED_H_
