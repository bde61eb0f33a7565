#ifndef PSTRAIN_WORKER_PS_CLIENT_H_
#define PSTRAIN_WORKER_PS_CLIENT_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/parameter_server.grpc.pb.h"
#include "ps/shard_layout.h"
#include "worker/parameter_client.h"

namespace pstrain {

struct PsClientOptions {
  std::vector<std::string> ps_addresses;  // ps task i at [i]
  ShardLayout layout;
  int replica = 0;    // This trainer's replica id; -1 for a client that never pushes.
  bool bf16 = false;  // Gradients and pushed-back parameters as bfloat16.
  absl::Duration rpc_timeout = absl::Seconds(60);  // Deadline of every call.
  // How long UNAVAILABLE calls are retried (with backoff) before giving up:
  // covers ps that are still starting or restarting.
  absl::Duration retry_budget = absl::Seconds(60);
};

// The parameters on the parameter servers, over gRPC.
//
// A training step is one PushPull round trip per layout chunk, all in
// flight at once: each ps answers with the chunk's parameters after the
// update, so the next Pull needs no call. Chunks are pushed as soon as the
// backward pass has finished their gradients (GradientsReady), by a sender
// thread that copies them into requests, so communication overlaps the rest
// of the backward pass. Answers are copied into the parameter buffer by the
// gRPC threads as they arrive; a chunk is only answered after it was pushed,
// and the backward pass never reads parameters of chunks it already pushed,
// so the compute thread and the answers touch disjoint memory.
//
// Every call has a deadline; UNAVAILABLE is retried with exponential backoff
// within the retry budget (a retried push counts once on the ps). One
// training loop per client.
class PsClient : public ParameterClient {
 public:
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(const PsClientOptions& options);
  ~PsClient() override;

  // Waits until every ps answers Status (and, if `initialized`, has been
  // initialized), up to `timeout`, logging who is still missing now and then.
  // Cancelled if the process is asked to stop (TerminationNotice) meanwhile.
  absl::Status WaitForPs(absl::Duration timeout, bool initialized);

  // Status of every ps, in task order.
  absl::StatusOr<std::vector<StatusResponse>> StatusAll();

  // Sends every chunk its part of `params` (num_params) and chunk 0 the state.
  absl::Status InitializeAll(const std::string& model, const float* params, const float* state,
                             int64_t global_step);

  // Tells every ps the job is over.
  absl::Status ShutdownAll(const std::string& reason);

  // Every ps writes its slice to <prefix>.shard-<i>-of-<P> (SaveRequest);
  // the responses in ps order. A sync ps waits up to `wait` for its shards to
  // reach `step`.
  absl::StatusOr<std::vector<SaveResponse>> SaveAll(const std::string& prefix, int64_t step,
                                                    int64_t global_step, absl::Duration wait);

  // Every ps loads its slice from the checkpoint whose index is at
  // `index_path`; returns the restored global step.
  absl::StatusOr<int64_t> RestoreAll(const std::string& model, const std::string& index_path);

  // Tells every ps that replica `replica` is leaving the job.
  // Retries a ps that does not answer for at most `retry_budget`.
  absl::Status LeaveAll(int replica, const std::string& reason, absl::Duration retry_budget);

  absl::StatusOr<ParameterView> Pull() override;
  // Pull() from the ps even if the last push brought the parameters back.
  absl::StatusOr<ParameterView> PullLatest() {
    have_fresh_ = false;
    return Pull();
  }
  void StartPush(int64_t step, const float* grads, const float* batch_stats) override;
  void GradientsReady(int64_t from) override;
  absl::StatusOr<PushOutcome> Push(int64_t step, const float* grads,
                                   const float* batch_stats) override;
  // Sent with the next push of chunk 0.
  void ReportProgress(double loss, int64_t examples) override;

  // Bytes sent and received in parameter and gradient payloads so far.
  int64_t bytes_sent() const;
  int64_t bytes_received() const;
  // Time from the end of each step's backward pass until its last answer:
  // the part of the round trip not hidden behind computation.
  const std::vector<double>& exposed_millis() const { return exposed_millis_; }
  // "p50 X ms, p90 Y ms, p99 Z ms over N steps" of exposed_millis().
  std::string LatencySummary() const;

 private:
  struct ChunkCall;

  explicit PsClient(const PsClientOptions& options);

  // Runs call(i, context, done) for every i in [0, n) in parallel and waits;
  // retries UNAVAILABLE. `what` and `target(i)` name the call in errors.
  // `budget` replaces options_.retry_budget if set.
  template <typename CallFn, typename TargetFn>
  absl::Status CallAll(int n, const char* what, TargetFn target, CallFn call,
                       std::optional<absl::Duration> budget = std::nullopt);

  void SenderLoop();
  void SendChunk(int chunk) ABSL_LOCKS_EXCLUDED(mu_);
  void OnChunkDone(int chunk, grpc::Status status);
  void EnqueueLocked(int chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const PsClientOptions options_;
  std::vector<std::unique_ptr<ParameterServer::Stub>> stubs_;
  std::vector<float> params_;
  std::vector<float> state_;
  std::vector<std::unique_ptr<ChunkCall>> calls_;  // One per chunk.

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  // Chunks for the sender thread, each not before its time (retries wait).
  std::deque<std::pair<int, absl::Time>> queue_ ABSL_GUARDED_BY(mu_);
  const float* grads_ ABSL_GUARDED_BY(mu_) = nullptr;
  const float* batch_stats_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<bool> sent_ ABSL_GUARDED_BY(mu_);
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // Chunk calls not yet finished.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int64_t> chunk_steps_ ABSL_GUARDED_BY(mu_);  // Each chunk's step.
  bool job_done_ ABSL_GUARDED_BY(mu_) = false;
  double loss_sum_ ABSL_GUARDED_BY(mu_) = 0;  // Progress not yet reported.
  int loss_batches_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t examples_ ABSL_GUARDED_BY(mu_) = 0;
  bool stale_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_received_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time step_give_up_ ABSL_GUARDED_BY(mu_);

  bool have_fresh_ = false;  // params_ hold the last step's answers.
  std::vector<double> exposed_millis_;
  std::thread sender_;
};

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_PS_CLIENT_H_
