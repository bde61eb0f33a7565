#ifndef PSTRAIN_PS_IN_PROCESS_PARAMETER_SERVERS_H_
#define PSTRAIN_PS_IN_PROCESS_PARAMETER_SERVERS_H_

#include <vector>

#include "ps/ps_task.h"
#include "ps_protocol/parameter_servers.h"
#include "ps_protocol/shard_layout.h"

namespace pstrain {

// ParameterServers over PsTasks in this process (like InProcessClient for
// training): the same checks and answers as the gRPC servers, without a
// network, so the chief's logic runs in a unit test. Saves run on one thread
// per task at once, as the gRPC broadcast does (a sync save waits for every
// task's chunks together). `tasks` (task i at [i]) must outlive this.
class InProcessParameterServers : public ParameterServers {
 public:
  InProcessParameterServers(std::vector<PsTask*> tasks, const ShardLayout& layout);

  int size() const override { return static_cast<int>(tasks_.size()); }
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
  const std::vector<PsTask*> tasks_;
  const ShardLayout layout_;
  std::vector<float> params_;  // Read()'s buffers
  std::vector<float> state_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_IN_PROCESS_PARAMETER_SERVERS_H_
