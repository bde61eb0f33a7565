#ifndef PSTRAIN_PS_PARAMETER_SHARD_H_
#define PSTRAIN_PS_PARAMETER_SHARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/trace.h"
#include "models/model.h"
#include "ps/optimizer.h"
#include "ps/staleness_bound.h"

namespace pstrain {

// The moving-average decay of each of the model's state values: a layer's
// own (VariableSpec::decay) or `job_decay`; empty when every value has the
// job's.
std::vector<float> StateDecays(const Model& model, float job_decay);

// A ParameterShard holds one layout chunk (ps/shard_layout.h): `chunk` of
// `num_chunks`.
struct ShardOptions {
  int chunk = 0;
  int num_chunks = 1;
  int64_t begin = 0;  // The chunk's range [begin, end) of the flat parameter vector.
  int64_t end = 0;
  std::vector<Segment> segments;  // Variables in the range, relative to `begin`.
  int64_t num_state = 0;          // Non-trainable state held here (shard 0 holds all of it).
  float state_decay = 0.99f;      // Moving-average decay for pushed batch statistics.
  // Per state value, when layers have their own (batch_norm's momentum);
  // empty: state_decay for all. StateDecays() makes it.
  std::vector<float> state_decays;
  OptimizerConfig optimizer;
  bool sync = false;
  int replicas_to_aggregate = 1;  // R (sync)
  int total_replicas = 1;         // N (sync); replica ids are 0..N-1
  // Bounded staleness (async only): >= 0 makes a push wait while its replica
  // is more than this many steps ahead of the slowest live one; -1: off.
  int staleness = -1;
  // sync: how long a step waits for missing replicas; ssp: how long a
  // replica may be silent before it is no longer waited for.
  absl::Duration sync_timeout = absl::Seconds(30);
  int64_t train_steps = 0;         // The job is done once the step reaches this.
  TraceRecorder* trace = nullptr;  // --trace_steps: applies and waits; may be null
};

// A copy of a shard's values for a checkpoint.
struct ShardSnapshot {
  int64_t step = 0;
  int64_t optimizer_step = 0;  // Adam's t
  absl::Duration copy_time;    // how long the shard's lock was held for the copy
  std::vector<float> params;
  std::vector<float> state;
  std::vector<std::vector<float>> slots;  // the optimizer's, in slot order
};

// What a push (or a pull) learns about the shard.
struct PushResult {
  int64_t global_step = 0;  // This shard's step after the push was handled.
  bool stale = false;       // The push was for an older step and was dropped.
  bool job_done = false;    // The step reached train_steps, or the job is shutting down.
  int64_t generation = 0;   // The shard's generation (Initialize makes a new one).
  // Read: the parameters' version (PushPullResponse.params_version), and
  // whether they were left out because the reader holds that version.
  int64_t params_version = 0;
  bool params_unchanged = false;
};

// The logic of one parameter server: a slice of the flat parameter vector, its
// optimizer, and the update rule. No gRPC here; the service adapts it.
//
//  - async: every push is applied on arrival, under the shard lock, and
//    advances the shard's step.
//  - sync: pushes for the current step are summed until R distinct replicas
//    have pushed (or every replica still considered live, if fewer); then the
//    average is applied once and the step advances. A push for an older step
//    is dropped and counted as stale. A repeated (replica, step) counts once.
//    If a step has waited `sync_timeout` since its first push, what arrived
//    is applied, the missing replicas are logged and considered gone until
//    they push again, so a dead worker never hangs the job.
//  - ssp (bounded staleness): as async, but a push's answer waits while its
//    replica is more than `staleness` pushes ahead of the slowest live one
//    (ps/staleness_bound.h).
//
// Thread-safe. Push callbacks run on the thread that completes the step (a
// pushing thread or the sync timer thread), never under the shard lock.
class ParameterShard {
 public:
  using PushCallback = std::function<void(absl::Status, PushResult)>;

  static absl::StatusOr<std::unique_ptr<ParameterShard>> Create(const ShardOptions& options);
  ~ParameterShard();  // Fails pending sync pushes with Cancelled, stops the timer.

  // Sets parameters, state and step (the chief's initialization or a
  // restore), and the optimizer's slots and step: `slots` empty zeroes them,
  // else it holds one span per slot. InvalidArgument if a size does not match
  // the shard. Pending sync pushes of the previous run fail with Aborted.
  // `generation` names this initialization (PushRequest.generation); the
  // chief gives every chunk of one initialization or restore the same one.
  // 0: a random one.
  absl::Status Initialize(absl::Span<const float> params, absl::Span<const float> state,
                          int64_t global_step,
                          const std::vector<absl::Span<const float>>& slots = {},
                          int64_t optimizer_step = 0, int64_t generation = 0);

  // Copies parameters, state, optimizer slots and steps under the lock (a
  // few milliseconds; pushes wait only for the copy). In sync mode a shard
  // whose step is below `at_step` is copied the moment its step reaches it,
  // if that happens within `wait`, so the shards of a checkpoint hold the
  // same step; otherwise (async, or the wait ran out) it is copied as it is.
  // FailedPrecondition before Initialize.
  absl::StatusOr<ShardSnapshot> Snapshot(int64_t at_step, absl::Duration wait);
  // The same in two halves, so a ps can ask all its shards first and then
  // collect them (each is copied at `at_step` however long the others take):
  // RequestSnapshot copies now or marks the copy as wanted at `at_step`;
  // AwaitSnapshot waits for it until `deadline`, then copies as it is. One
  // snapshot at a time per shard.
  absl::Status RequestSnapshot(int64_t at_step);
  absl::StatusOr<ShardSnapshot> AwaitSnapshot(absl::Time deadline);

  // The optimizer's slot names ("m", "v" for Adam).
  std::vector<std::string> slot_names() const;

  // Replica `replica` has left the job (its process is stopping): a sync step
  // no longer waits for it, until it pushes again.
  void ReplicaLeft(int replica);

  // Copies the current values into `params` and `state` (resized). Returns the
  // step and whether the job is done; Unavailable before Initialize.
  // With `bf16`, the parameters are written as bfloat16 (half the bytes).
  // A reader that holds the parameters of `have_generation` at
  // `have_version` (nonzero) gets `params` empty and params_unchanged while
  // they are still those.
  absl::StatusOr<PushResult> Read(std::string* params, std::string* state, bool bf16 = false,
                                  int64_t have_generation = 0, int64_t have_version = 0) const;

  // Handles replica `replica`'s gradients computed at `step`. `done` is called
  // exactly once: at once for async, stale, refused or done-job pushes, and
  // when the step completes for sync ones. Refused, nothing changed:
  // InvalidArgument for a wrong gradient or statistics length or a replica
  // outside [0, N); Aborted for a step ahead of the shard (the job was
  // rolled back: the replica should pull); Unavailable before Initialize (a
  // new or restarted ps: retry).
  // A nonzero `generation` other than the shard's (values from before the
  // last Initialize: the job was rolled back since) is refused as Aborted.
  void Push(int replica, int64_t step, absl::Span<const float> grads,
            absl::Span<const float> batch_stats, PushCallback done, int64_t generation = 0);

  struct Stats {
    bool initialized = false;
    int64_t global_step = 0;
    int64_t applied_updates = 0;
    int64_t stale_pushes = 0;
    int64_t timed_out_steps = 0;
    int64_t ssp_waits = 0;  // ssp: pushes that waited for slower replicas
    bool shutting_down = false;
    bool job_done = false;  // train_steps reached, or shutting down.
  };
  Stats GetStats() const;
  // The generation of its values (Initialize and restores make new ones).
  int64_t generation() const;

  // Marks the job finished: later pushes answer job_done, pending sync
  // pushes complete with job_done. Idempotent.
  void Shutdown();
  // Blocks until Shutdown() was called or `timeout` passed; true if it was.
  bool WaitForShutdown(absl::Duration timeout) const;

  // Direct read access for a trainer in the same process that is the only
  // one pushing (a local trainer): the values are stable between its own
  // pushes, so it reads them without a copy per step. Valid for the shard's
  // lifetime; must not be read concurrently with Push or Initialize.
  const float* params_unlocked() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return params_.data(); }
  const float* state_unlocked() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return state_.data(); }

  const ShardOptions& options() const { return options_; }
  int64_t size() const { return options_.end - options_.begin; }

 private:
  explicit ParameterShard(const ShardOptions& options, std::unique_ptr<Optimizer> optimizer);

  // Initialize's work; pending sync pushes of the old run go to `abandoned`.
  absl::Status InitializeLocked(absl::Span<const float> params, absl::Span<const float> state,
                                int64_t global_step,
                                const std::vector<absl::Span<const float>>& slots,
                                int64_t optimizer_step, int64_t generation,
                                std::vector<PushCallback>& abandoned);
  // Applies the current sync aggregate and returns the callbacks to run.
  std::vector<PushCallback> CompleteStepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ssp: the waiting pushes whose replicas may go on now (all of them once
  // the job is done).
  std::vector<PushCallback> ReleaseSspLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ssp: a pushed step; its answer waits if its replica is too far ahead.
  void SspPushedLocked(int replica, PushCallback* done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The timer's work: ssp drops silent replicas, sync completes a step that
  // waited sync_timeout.
  void SspTimerLocked(std::vector<PushCallback>* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SyncTimerLocked(std::vector<PushCallback>* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyLocked(const float* grads, const float* stats) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ShardSnapshot CopyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int RequiredLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status NotInitializedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DoneLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TimerLoop();

  const ShardOptions options_;
  mutable absl::Mutex mu_;
  std::unique_ptr<Optimizer> optimizer_ ABSL_GUARDED_BY(mu_);
  std::vector<float> params_ ABSL_GUARDED_BY(mu_);
  std::vector<float> state_ ABSL_GUARDED_BY(mu_);
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool destroying_ ABSL_GUARDED_BY(mu_) = false;
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  // A new random value at each Initialize; 0 before the first.
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  // Counts changes of params_ (never reset: a restore is one more).
  int64_t params_version_ ABSL_GUARDED_BY(mu_) = 0;
  std::mt19937_64 random_ ABSL_GUARDED_BY(mu_){std::random_device{}()};
  int64_t applied_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t stale_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t timed_out_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> last_async_step_ ABSL_GUARDED_BY(mu_);  // Per replica, for retries.
  std::vector<int64_t> last_sync_step_ ABSL_GUARDED_BY(mu_);   // Step each replica last counted in.

  // Sync aggregation of the current step.
  std::vector<float> grad_sum_ ABSL_GUARDED_BY(mu_);
  std::vector<float> stats_sum_ ABSL_GUARDED_BY(mu_);
  std::set<int> contributors_ ABSL_GUARDED_BY(mu_);
  std::set<int> live_ ABSL_GUARDED_BY(mu_);  // Replicas not known to be gone.
  std::vector<PushCallback> waiting_ ABSL_GUARDED_BY(mu_);
  absl::Time first_push_ ABSL_GUARDED_BY(mu_);

  // Bounded staleness: the clocks, and the pushes waiting (with their
  // replica's clock) for the slowest to catch up.
  std::unique_ptr<StalenessBound> ssp_ ABSL_GUARDED_BY(mu_);
  struct SspWaiter {
    int replica;
    int64_t clock;
    PushCallback done;
  };
  std::vector<SspWaiter> ssp_waiting_ ABSL_GUARDED_BY(mu_);
  int64_t ssp_waits_ ABSL_GUARDED_BY(mu_) = 0;

  // A snapshot waiting for the step to reach snapshot_at_ (sync).
  bool snapshot_wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool snapshot_ready_ ABSL_GUARDED_BY(mu_) = false;
  int64_t snapshot_at_ ABSL_GUARDED_BY(mu_) = 0;
  ShardSnapshot snapshot_ ABSL_GUARDED_BY(mu_);
  std::thread timer_;
};

// The variables (or parts of them) in [begin, end), relative to `begin`: the
// segment table a ps uses for per-variable rules (no weight decay on biases).
std::vector<Segment> SegmentsForRange(const Model& model, int64_t begin, int64_t end);

}  // namespace pstrain

#endif  // PSTRAIN_PS_PARAMETER_SHARD_H_
