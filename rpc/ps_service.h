#ifndef PSTRAIN_RPC_PS_SERVICE_H_
#define PSTRAIN_RPC_PS_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "proto/parameter_server.grpc.pb.h"
#include "ps/ps_task.h"

namespace pstrain {

// The gRPC face of one ps task (callback API): converts requests to the
// task's plain calls (bytes to float spans, bfloat16 to float32) and its
// answers and Status codes back, and nothing more; every rule is PsTask's.
// Save and Restore (files in the job dir) run on their own threads, so a
// save waiting for a sync step never holds a gRPC thread. `task` must
// outlive the service. Every call must carry `job_token` (unless it is
// empty) or is refused with UNAUTHENTICATED before it reaches the task.
class ParameterServerService final : public ParameterServer::CallbackService {
 public:
  explicit ParameterServerService(PsTask* task, std::string job_token = "")
      : task_(task), token_(std::move(job_token)) {}
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
  grpc::ServerUnaryReactor* PullRows(grpc::CallbackServerContext* context,
                                     const PullRowsRequest* request,
                                     PullRowsResponse* response) override;
  grpc::ServerUnaryReactor* PushRows(grpc::CallbackServerContext* context,
                                     const PushRowsRequest* request,
                                     PushRowsResponse* response) override;
  grpc::ServerUnaryReactor* Replicate(grpc::CallbackServerContext* context,
                                      const ReplicateRequest* request,
                                      ReplicateResponse* response) override;
  grpc::ServerUnaryReactor* Promote(grpc::CallbackServerContext* context,
                                    const PromoteRequest* request,
                                    PromoteResponse* response) override;
  // Runs on a thread of its own: the copies travel and catch up first.
  grpc::ServerUnaryReactor* AddBackup(grpc::CallbackServerContext* context,
                                      const AddBackupRequest* request,
                                      AddBackupResponse* response) override;
  grpc::ServerUnaryReactor* InstallCopy(grpc::CallbackServerContext* context,
                                        const InstallCopyRequest* request,
                                        InstallCopyResponse* response) override;

 private:
  // Decodes a push and hands it to the task; `done` gets the outcome.
  void DoPush(const PushRequest* request, ParameterShard::PushCallback done);
  // Runs `work` on a thread of its own (joined by the destructor).
  void RunInBackground(std::function<void()> work);

  PsTask* const task_;
  const std::string token_;
  absl::Mutex mu_;
  struct Background {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Background> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain

#endif  // PSTRAIN_RPC_PS_SERVICE_H_
