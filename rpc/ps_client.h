#ifndef PSTRAIN_RPC_PS_CLIENT_H_
#define PSTRAIN_RPC_PS_CLIENT_H_

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
#include "common/trace.h"
#include "proto/parameter_server.grpc.pb.h"
#include "ps_protocol/parameter_client.h"
#include "ps_protocol/shard_layout.h"
#include "ps_protocol/sparse_gradients.h"
#include "rpc/ps_connections.h"
#include "rpc/row_client.h"

namespace pstrain {

struct PsClientOptions {
  std::vector<std::string> ps_addresses;  // ps task i at [i]
  ShardLayout layout;
  int replica = 0;    // This trainer's replica id; -1 for a client that only pulls.
  bool bf16 = false;  // Gradients and pushed-back parameters as bfloat16.
  // Synchronous updates: every chunk of a pulled view should be of one
  // generation (PullResponse.generation). A pull that finds them apart (a
  // rollback restoring one ps before another) pulls again, for up to
  // `consistent_pull_wait`.
  bool sync = false;
  absl::Duration consistent_pull_wait = absl::Seconds(10);
  absl::Duration rpc_timeout = absl::Seconds(60);  // Deadline of every call.
  // How long UNAVAILABLE calls are retried (with backoff) before giving up:
  // covers ps that are still starting or restarting.
  absl::Duration retry_budget = absl::Seconds(60);
  WireSecurity wire;  // mutual TLS and the job token; plaintext by default
  // ps_replication (issue 55): above 1, a chunk's calls follow a failover to
  // the copy that serves it now (PsConnections::Reroute); a call unanswered
  // for half of `failover_after` asks where the chunk is served now (every
  // second), and is cancelled and sent there if it moved (a primary that is
  // stopped, not gone, never fails the call).
  int copies = 1;
  absl::Duration failover_after = absl::Seconds(2);
  // > 0: top-k compression (ps_protocol/sparse_gradients.h): each chunk pushes
  // this fraction of its gradients, with error feedback.
  double compression_ratio = 0;
  // Push returns once chunk 0 (the first layers' parameters and the state)
  // has answered; the next forward pass waits layer by layer for the rest
  // (ParameterView::await_params). false: Push waits for every answer.
  bool overlap_pull = true;
  TraceRecorder* trace = nullptr;  // every chunk's encoding and round trip; may be null
};

// The parameters on the parameter servers, over gRPC: the training data
// path (the admin broadcasts are GrpcParameterServers').
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
// With overlap_pull, Push returns as soon as chunk 0 has answered (it is
// pushed last and holds the first layers, so the others are mostly in by
// then) and leaves the rest of the answers as the push's tail: the view the
// next Pull returns says so (await_params), and the forward pass waits for
// each layer's chunks before reading them, so it computes on the first
// layers while the last ones are still on the wire. The tail is settled
// before anything of the next step is sent: a tail that failed makes that
// Push return the error, and one that found the job rolled back or done
// makes it return `discarded` without sending anything.
//
// Every call has a deadline; UNAVAILABLE is retried with exponential backoff
// within the retry budget (a retried push counts once on the ps). One
// training loop per client.
class PsClient : public ParameterClient {
 public:
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(const PsClientOptions& options);
  ~PsClient() override;

  // Every value of the view has arrived (the last push's answers are in).
  absl::StatusOr<ParameterView> Pull() override;
  // May return while the last push's answers are still arriving (the view's
  // await_params waits for them; overlap_pull).
  absl::StatusOr<ParameterView> PullOverlapped() override;
  // From the ps, at `step` (ParameterClient::PullAt; the rows pulled next
  // are read at the view's step as always).
  absl::StatusOr<ParameterView> PullAt(int64_t step) override;
  // Pull() from the ps even if the last push brought the parameters back.
  absl::StatusOr<ParameterView> PullLatest() {
    have_fresh_ = false;
    return Pull();
  }
  void StartPush(int64_t step, const float* grads, const float* batch_stats) override;
  void GradientsReady(int64_t from) override;
  // Returns once every chunk holding values below `end` has answered the last
  // push (at once without a tail). The views' await_params.
  void AwaitParams(int64_t end);
  absl::StatusOr<PushOutcome> Push(int64_t step, const float* grads,
                                   const float* batch_stats) override;
  // Sent with the next push of chunk 0.
  void ReportProgress(double loss, int64_t examples) override;
  // Models with embedding tables (the layout's tables): the rows of the
  // step's ids for the view's step, from the ps that own them (RowClient).
  // Push sends their gradients, overlapping the dense chunks' round trips.
  absl::Status PullRows(SparseStep* step) override;
  // Row traffic so far (zeros for a model without tables).
  RowClient::Traffic row_traffic() const;

  // Bytes sent and received in parameter and gradient payloads so far.
  int64_t bytes_sent() const;
  int64_t bytes_received() const;
  // PushPull answers that left out a chunk's parameters because this client
  // held them already (PushPullResponse.params_unchanged).
  int64_t unchanged_answers() const;
  // Per step, the time the training loop waited for answers: from the end
  // of the backward pass until Push returned, plus the forward pass's waits
  // for the rest (overlap_pull): the part of the round trip not hidden
  // behind computation.
  const std::vector<double>& exposed_millis() const { return exposed_millis_; }
  // "p50 X ms, p90 Y ms, p99 Z ms over N steps" of exposed_millis().
  std::string LatencySummary() const;
  // All of the above, and the row traffic. Call from the training loop's thread.
  ClientTraffic traffic() const override;

 private:
  struct ChunkCall;

  explicit PsClient(const PsClientOptions& options);

  // `at_step`: PullAt's, or none.
  absl::StatusOr<ParameterView> PullView(bool overlapped,
                                         std::optional<int64_t> at_step = std::nullopt);

  void SenderLoop();
  void SendChunk(int chunk) ABSL_LOCKS_EXCLUDED(mu_);
  void OnChunkDone(int chunk, grpc::Status status);
  void EnqueueLocked(int chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A chunk's call of this push has ended (answered, failed, or never sent).
  void ChunkFinishedLocked(int chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Before a retry of chunk `chunk` whose last attempt a failover may
  // explain: routes it where it is served now (mu_ is released meanwhile).
  // False if the chunk's failure stands (it is finished with the error).
  bool RerouteLocked(int chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A replicated job: cancels the calls that hang on a task whose chunks
  // moved (see PsClientOptions::failover_after). The sender thread's.
  void CheckHangingCallsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes the buffers of `step`'s push current (nothing of it sent yet).
  void BeginPushLocked(int64_t step, const float* grads, const float* batch_stats)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for the last push's tail and takes in what it said; then begins a
  // push StartPush announced meanwhile.
  void SettleTailLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether Push may return with answers still out (overlap_pull).
  bool MayReturnEarlyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool PushAnsweredLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The lowest chunk step, a chunk still answering counting one past its last.
  int64_t LowestStepLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ParamsArrivedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the last answers say the job is done for this replica.
  bool JobDoneLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const PsClientOptions options_;
  const PsConnections connections_;
  std::unique_ptr<RowClient> rows_;  // null for a model without embedding tables
  SparseStep* sparse_ = nullptr;     // the last PullRows', pushed by the next Push
  int64_t view_step_ = 0;            // the global step of the last view
  int64_t view_generation_ = 0;      // and the generation of its parameters
  std::vector<float> params_;
  std::vector<float> state_;
  std::vector<std::unique_ptr<ChunkCall>> calls_;  // One per chunk.
  // Top-k compression: one per chunk (only the sender thread uses them).
  std::vector<std::unique_ptr<TopKCompressor>> compressors_;
  std::vector<std::string> trace_tracks_;  // "chunk <c> PushPull"
  std::vector<std::string> trace_encode_;  // "encode chunk <c>"

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  // Chunks for the sender thread, each not before its time (retries wait).
  std::deque<std::pair<int, absl::Time>> queue_ ABSL_GUARDED_BY(mu_);
  const float* grads_ ABSL_GUARDED_BY(mu_) = nullptr;
  const float* batch_stats_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<bool> sent_ ABSL_GUARDED_BY(mu_);
  int pending_ ABSL_GUARDED_BY(mu_) = 0;              // Chunk calls not yet finished.
  std::vector<char> in_flight_ ABSL_GUARDED_BY(mu_);  // per chunk: its call not yet finished
  bool started_ ABSL_GUARDED_BY(mu_) = false;         // a push began and Push has not returned it
  bool aligned_ ABSL_GUARDED_BY(mu_) = true;          // every chunk was at one step when it began
  // Push returned with answers still out (overlap_pull): the tail.
  bool tail_ ABSL_GUARDED_BY(mu_) = false;
  // The step, gradients and statistics StartPush announced while a tail was out.
  bool deferred_ ABSL_GUARDED_BY(mu_) = false;
  int64_t deferred_step_ ABSL_GUARDED_BY(mu_) = 0;
  const float* deferred_grads_ ABSL_GUARDED_BY(mu_) = nullptr;
  const float* deferred_stats_ ABSL_GUARDED_BY(mu_) = nullptr;
  // The settled tail failed (error) or found the job rolled back or done:
  // the next push sends nothing and returns the error or `discarded`.
  bool discard_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status tail_error_ ABSL_GUARDED_BY(mu_);
  // The settled tail answered stale and the last Push had not said so: the
  // next Push's outcome counts it.
  bool tail_stale_ ABSL_GUARDED_BY(mu_) = false;
  bool counted_stale_ ABSL_GUARDED_BY(mu_) = false;  // the last Push said stale
  // The global step the last Push claimed (its chunks' lowest step, a chunk
  // still answering counted one past its last). Sync: a tail that settles
  // with the chunks at another step makes the next push discarded.
  int64_t provisional_step_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t await_end_ ABSL_GUARDED_BY(mu_) = 0;  // AwaitParams' argument
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int64_t> chunk_steps_ ABSL_GUARDED_BY(mu_);  // Each chunk's step.
  int64_t push_step_ ABSL_GUARDED_BY(mu_) = 0;             // the step of the push in flight (sync)
  // Each chunk's generation, as its last answer gave it; pushes carry it.
  std::vector<int64_t> chunk_generations_ ABSL_GUARDED_BY(mu_);
  // Per chunk: the params_version (of chunk_generations_) params_ holds,
  // from the last PushPull answer; 0 after a pull (unknown).
  std::vector<int64_t> params_versions_ ABSL_GUARDED_BY(mu_);
  int64_t unchanged_answers_ ABSL_GUARDED_BY(mu_) = 0;
  bool job_done_ ABSL_GUARDED_BY(mu_) = false;
  // Whether each chunk said the job is done at its last answer. Async, the
  // job is done for this replica only when every chunk says so: a replica
  // killed mid-push leaves some chunks a step ahead of the others for the
  // rest of the job, and the ones behind still need their last push.
  std::vector<char> chunk_done_ ABSL_GUARDED_BY(mu_);
  double loss_sum_ ABSL_GUARDED_BY(mu_) = 0;  // Progress not yet reported.
  int loss_batches_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t examples_ ABSL_GUARDED_BY(mu_) = 0;
  bool stale_ ABSL_GUARDED_BY(mu_) = false;
  // A chunk answered Aborted: the job was rolled back to a checkpoint (or
  // re-initialized) under this push; the next Pull reads every chunk again.
  bool rolled_back_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_received_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time step_give_up_ ABSL_GUARDED_BY(mu_);

  bool have_fresh_ = false;  // params_ hold the last step's answers (or will: tail_).
  std::vector<double> exposed_millis_;
  double awaited_millis_ = 0;  // AwaitParams' waits since the last Push
  std::thread sender_;
};

}  // namespace pstrain

#endif  // PSTRAIN_RPC_PS_CLIENT_H_
