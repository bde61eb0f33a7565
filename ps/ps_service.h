#ifndef PSTRAIN_PS_PS_SERVICE_H_
#define PSTRAIN_PS_PS_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "proto/parameter_server.grpc.pb.h"
#include "ps/parameter_shard.h"
#include "ps/shard_checkpoint.h"

namespace pstrain {

// The gRPC face of one ps task's ParameterShards (one per layout chunk;
// callback API): routes each request to the shard it names, converts bytes to
// float spans and Status codes, and nothing more. Requests that do not fit
// (a shard this ps does not hold, wrong model or size) get INVALID_ARGUMENT
// and change nothing; requests before initialization get FAILED_PRECONDITION.
// Save and Restore (files in the job dir) run on their own threads, so a
// save waiting for a sync step never holds a gRPC thread. The shards and
// `env` must outlive the service.
class ParameterServerService final : public ParameterServer::CallbackService {
 public:
  // `shards` are this ps task's shards; each knows its global shard id.
  ParameterServerService(const PsIdentity& identity, std::vector<ParameterShard*> shards, Env* env);
  ~ParameterServerService() override;  // Joins save/restore threads.

  grpc::ServerUnaryReactor* Initialize(grpc::CallbackServerContext* context,
                                       const InitializeRequest* request,
                                       InitializeResponse* response) override;
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* context, const PullRequest* request,
                                 PullResponse* response) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context, const PushRequest* request,
                                 PushResponse* response) override;
  grpc::ServerUnaryReactor* PushPull(grpc::CallbackServerContext* context,
                                     const PushRequest* request,
                                     PushPullResponse* response) override;
  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* context,
                                   const StatusRequest* request, StatusResponse* response) override;
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* context,
                                     const ShutdownRequest* request,
                                     ShutdownResponse* response) override;
  grpc::ServerUnaryReactor* Save(grpc::CallbackServerContext* context, const SaveRequest* request,
                                 SaveResponse* response) override;
  grpc::ServerUnaryReactor* Restore(grpc::CallbackServerContext* context,
                                    const RestoreRequest* request,
                                    RestoreResponse* response) override;
  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext* context, const LeaveRequest* request,
                                  LeaveResponse* response) override;

  // This ps is being stopped (SIGTERM): Status tells the chief, which saves
  // a checkpoint and ends the job. Async-signal-unsafe; call from a thread.
  void SetPreempting() { preempting_ = true; }

  // Replicas that have been told the job is done (so the ps can exit once
  // every one of them knows).
  int replicas_told_done() const;

 private:
  absl::StatusOr<ParameterShard*> FindShard(int shard) const;
  // Validates a push and hands it to the shard; `done` gets the outcome.
  void DoPush(const PushRequest* request, ParameterShard::PushCallback done);
  void NoteDone(int replica, bool job_done);
  // Runs `work` on a thread of its own (joined by the destructor).
  void RunInBackground(std::function<void()> work);

  const PsIdentity identity_;
  const int ps_index_;
  const std::vector<ParameterShard*> shards_;
  const std::string model_;
  const int64_t num_params_;
  Env* const env_;
  std::atomic<bool> preempting_{false};
  std::atomic<int64_t> departures_{0};
  double loss_sum_ ABSL_GUARDED_BY(mu_) = 0;  // Progress reported with pushes.
  int64_t loss_batches_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t examples_ ABSL_GUARDED_BY(mu_) = 0;
  mutable absl::Mutex mu_;
  std::vector<bool> told_done_ ABSL_GUARDED_BY(mu_);
  absl::Mutex file_mu_;  // One save or restore at a time.
  struct Background {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Background> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_PS_SERVICE_H_
