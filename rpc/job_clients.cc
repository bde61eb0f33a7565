#include "rpc/job_clients.h"

#include "common/status_macros.h"
#include "rpc/grpc_parameter_servers.h"
#include "rpc/ps_client.h"

namespace pstrain {
namespace {

// The deadline of a call: a sync PushPull returns when its step completes,
// which can take up to the sync timeout (plus a slow replica's step).
absl::Duration RpcTimeout(const JobConfig& job) {
  absl::Duration timeout = absl::Seconds(60);
  // An ssp push waits for the slowest replica, or sync_timeout for a silent one.
  if (job.training.update != UpdateMode::kAsync) {
    timeout += absl::Seconds(job.training.sync_timeout);
  }
  return timeout;
}

// How long a ps that does not answer is retried before a call fails.
absl::Duration RetryBudget(const JobConfig& job) {
  return absl::Seconds(job.training.ps_retry_secs);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ParameterClient>> MakePsClient(const JobConfig& job,
                                                              const ShardLayout& layout,
                                                              int replica, TraceRecorder* trace) {
  PsClientOptions options;
  options.ps_addresses = job.cluster.ps;
  options.layout = layout;
  options.replica = replica;
  options.bf16 = job.training.wire_format == "bf16";
  options.sync = job.training.update == UpdateMode::kSync;
  options.rpc_timeout = RpcTimeout(job);
  options.retry_budget = RetryBudget(job);
  options.wire = job.wire;
  options.trace = trace;
  options.overlap_pull = job.training.overlap_pull;
  options.copies = job.training.ps_replication;
  options.failover_after = absl::Seconds(job.training.failover_secs);
  options.compression_ratio =
      job.training.compression == "topk" ? job.training.compression_ratio : 0;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client, PsClient::Create(options));
  return client;
}

absl::StatusOr<std::unique_ptr<ParameterServers>> MakeParameterServers(
    const JobConfig& job, const ShardLayout& layout, const CallPatience& patience) {
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<GrpcParameterServers> servers,
      GrpcParameterServers::Create(
          job.cluster.ps, layout, patience.deadline.value_or(RpcTimeout(job)),
          patience.retry_budget.value_or(RetryBudget(job)), job.wire, job.training.ps_replication,
          absl::Seconds(job.training.failover_secs)));
  return servers;
}

}  // namespace pstrain
