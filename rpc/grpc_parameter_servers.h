#ifndef PSTRAIN_RPC_GRPC_PARAMETER_SERVERS_H_
#define PSTRAIN_RPC_GRPC_PARAMETER_SERVERS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ps_protocol/parameter_servers.h"
#include "ps_protocol/shard_layout.h"
#include "rpc/ps_connections.h"
#include "rpc/row_client.h"

namespace pstrain {

// ParameterServers over gRPC: each call is one broadcast to every ps task
// (PsConnections::Broadcast), with the deadline and retry budget given at
// creation; answers are converted to plain values here.
class GrpcParameterServers : public ParameterServers {
 public:
  // `addresses`: ps task i at [i]; `layout` must have a range per address.
  static absl::StatusOr<std::unique_ptr<GrpcParameterServers>> Create(
      const std::vector<std::string>& addresses, const ShardLayout& layout,
      absl::Duration rpc_timeout, absl::Duration retry_budget,
      const WireSecurity& wire = WireSecurity(), int copies = 1,
      absl::Duration failover_after = absl::Seconds(2));

  int size() const override { return connections_.size(); }
  absl::Status WaitReady(absl::Duration timeout, bool initialized,
                         const TerminationNotice* stop) override;
  absl::StatusOr<std::vector<PsStatus>> Statuses() override;
  absl::Status Initialize(const std::string& model, const float* params, const float* state,
                          int64_t global_step) override;
  absl::StatusOr<std::vector<ShardSaved>> Save(int64_t step, int64_t global_step,
                                               absl::Duration wait) override;
  absl::StatusOr<int64_t> Restore(const std::string& model, int64_t step) override;
  absl::Status Shutdown(const std::string& reason) override;
  absl::Status Leave(int replica, const std::string& reason, bool input_ended,
                     absl::Duration retry_budget) override;
  absl::StatusOr<ParameterView> Read() override;
  std::vector<absl::StatusOr<PsStatus>> Probe(
      absl::Duration deadline, const std::vector<int64_t>& confirm_drops = {}) override;
  absl::Status Promote(int task, int owner, int64_t epoch, const std::vector<int>& backups,
                       absl::Duration deadline) override;
  absl::Status Fence(int task, int64_t epoch, absl::Duration deadline) override;
  absl::Status AddBackup(int server, int owner, int task, absl::Duration deadline) override;

 private:
  GrpcParameterServers(const std::vector<std::string>& addresses, const ShardLayout& layout,
                       absl::Duration rpc_timeout, absl::Duration retry_budget,
                       const WireSecurity& wire, int copies, absl::Duration failover_after);
  // A replicated job: every call for task i's chunks goes to the task that
  // serves them now, and follows a failover (PsConnections::Broadcast's
  // `owner`). Requests[i] is for owner i.
  template <typename Response, typename Request, typename Method>
  absl::StatusOr<std::vector<Response>> ToEveryOwner(const char* what,
                                                     std::vector<Request> requests, Method method,
                                                     std::optional<absl::Duration> budget = {});
  // The tasks that are not ready yet, described; FailedPrecondition if a
  // task answers as another task index.
  absl::StatusOr<std::vector<std::string>> MissingTasks(bool initialized);

  const ShardLayout layout_;
  const PsConnections connections_;
  RowClient rows_;             // reads the embedding tables' rows for Read()'s view
  std::vector<float> params_;  // Read()'s buffers
  std::vector<float> state_;
};

}  // namespace pstrain

#endif  // PSTRAIN_RPC_GRPC_PARAMETER_SERVERS_H_
