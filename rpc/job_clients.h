#ifndef PSTRAIN_RPC_JOB_CLIENTS_H_
#define PSTRAIN_RPC_JOB_CLIENTS_H_

// The gRPC clients of a job's parameter servers, configured from the job
// (addresses, update mode, wire format, compression, security): what the
// chief and the workers reach the ps through. They see the interfaces only:
// this header includes no gRPC.

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/trace.h"
#include "config/cluster_config.h"
#include "ps_protocol/parameter_client.h"
#include "ps_protocol/parameter_servers.h"
#include "ps_protocol/shard_layout.h"

namespace pstrain {

// A gRPC ParameterClient (PsClient) for `replica` of the job, with deadlines
// that fit its update mode (a sync PushPull waits for the step to complete);
// a ps that does not answer is retried for the job's ps_retry_secs. `trace`
// (may be null) records every chunk's round trip. Its traffic() gives the
// bytes and the exposed round-trip time.
absl::StatusOr<std::unique_ptr<ParameterClient>> MakePsClient(const JobConfig& job,
                                                              const ShardLayout& layout,
                                                              int replica,
                                                              TraceRecorder* trace = nullptr);

// The job's ParameterServers over gRPC, as patient as `patience` says.
absl::StatusOr<std::unique_ptr<ParameterServers>> MakeParameterServers(
    const JobConfig& job, const ShardLayout& layout, const CallPatience& patience = {});

}  // namespace pstrain

#endif  // PSTRAIN_RPC_JOB_CLIENTS_H_
