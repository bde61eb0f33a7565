#ifndef PSTRAIN_PS_PARAMETER_SHARD_H_
#define PSTRAIN_PS_PARAMETER_SHARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/trace.h"
#include "models/model.h"
#include "ps/optimizer.h"
#include "ps/step_barrier.h"

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
  StepRule rule;                   // The update rule: ps/step_barrier.h.
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

// One update of a chunk as its backups apply it again (a replicated ps,
// issue 55): what its barrier counted (AppliedPushes) and what its
// optimizer took: a sync step's averaged gradient, or an async push's; and
// the batch statistics with it. Applied in sequence to a copy of the chunk
// (ApplyReplicated), the updates leave it bit for bit as the primary's:
// values, slots, Adam's step, the step and which pushes were applied.
struct ChunkUpdate {
  AppliedPushes applied;
  std::vector<float> grads;  // empty for a move of the step with nothing applied
  std::vector<float> stats;
};

// One chunk of the flat parameter vector, its optimizer and batch-norm
// state: a storage-and-apply engine under the ps's step rule
// (ps/step_barrier.h: async, sync with backup workers and timeouts, ssp).
// A push's answer waits for its sync step to complete or, with bounded
// staleness, for the slower replicas. No gRPC here; the service adapts it.
//
// Thread-safe. Push callbacks run on the thread that completes the step (a
// pushing thread or the barrier's timer thread), never under the shard lock.
class ParameterShard final : private StepEngine {
 public:
  using PushCallback = StepBarrier::Done;
  using Stats = StepStats;

  static absl::StatusOr<std::unique_ptr<ParameterShard>> Create(const ShardOptions& options);
  ~ParameterShard() override;  // Fails pending pushes with Cancelled, stops the timer.

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
  void ReplicaLeft(int replica) { barrier_.ReplicaLeft(replica); }

  // Copies the current values into `params` and `state` (resized). Returns the
  // step and whether the job is done; Unavailable before Initialize.
  // With `bf16`, the parameters are written as bfloat16 (half the bytes).
  // A reader that holds the parameters of `have_generation` at
  // `have_version` (nonzero) gets `params` empty and params_unchanged while
  // they are still those.
  //
  // A sync reader, replica `replica`, that asks for `at_step` (>= 0) one
  // step below the shard's, in which its push counted, gets the values the
  // shard held at that step, with that step: a replica that rejoins in the
  // middle of a step (it was killed after pushing this chunk and not the
  // others) computes its gradients for the step from the very values it had
  // computed them from before. Any other reader gets the values as they are.
  absl::StatusOr<PushResult> Read(std::string* params, std::string* state, bool bf16 = false,
                                  int64_t have_generation = 0, int64_t have_version = 0,
                                  int64_t at_step = -1, int replica = -1) const;

  // Handles replica `replica`'s gradients computed at `step`. `done` is called
  // exactly once: at once for async, stale, refused or done-job pushes, and
  // when the step completes for sync ones (ssp: when the replica may go on).
  // Refused, nothing changed: InvalidArgument for a wrong gradient or
  // statistics length or a replica outside [0, N); Aborted for a step ahead
  // of the shard (the job was rolled back: the replica should pull);
  // Unavailable before Initialize (a new or restarted ps: retry).
  // A nonzero `generation` other than the shard's (values from before the
  // last Initialize: the job was rolled back since) is refused as Aborted.
  void Push(int replica, int64_t step, absl::Span<const float> grads,
            absl::Span<const float> batch_stats, PushCallback done, int64_t generation = 0);

  // A replicated ps (issue 55), the primary's side: every update applied
  // from now on is handed to `observer`, in the order applied, under the
  // shard's lock (it must not call into the shard: it queues the update for
  // the backups). Null stops it.
  using UpdateObserver = std::function<void(ChunkUpdate)>;
  void SetUpdateObserver(UpdateObserver observer);

  // A backup's side: applies the primary's next update, as the primary did
  // (a sync step keeps the values before it for Read's at_step). The
  // errors of StepBarrier::CheckFollowLocked, InvalidArgument for sizes
  // other than the chunk's; then nothing changed. With an observer set, the
  // update goes on to it (a chain of backups).
  absl::Status ApplyReplicated(const ChunkUpdate& update);

  // A rejoin (a replicated ps): everything a new backup needs to follow
  // this chunk from here (its values, slots, state, the values before the
  // last sync step, the barrier's progress). `then` is called under the
  // shard's lock right after the copy, before any later update: it adds the
  // new backup to the update stream there. FailedPrecondition before
  // initialization.
  struct BackupCopy {
    ShardSnapshot values;
    BarrierProgress progress;
    std::vector<float> prev_params, prev_state;
    int64_t prev_step = -1;
  };
  absl::StatusOr<BackupCopy> CopyForBackup(absl::FunctionRef<void()> then);
  // The new backup's side: takes the copy as its own, to follow on with the
  // primary's later updates (ApplyReplicated). InvalidArgument for a copy
  // that does not fit the chunk; pending pushes of a previous run fail.
  absl::Status InstallCopy(const BackupCopy& copy);

  Stats GetStats() const { return barrier_.GetStats(); }
  // The generation of its values (Initialize and restores make new ones).
  int64_t generation() const { return barrier_.generation(); }

  // Marks the job finished: later pushes answer job_done, pending sync
  // pushes complete with job_done. Idempotent.
  void Shutdown() { barrier_.Shutdown(); }
  // Blocks until Shutdown() was called or `timeout` passed; true if it was.
  bool WaitForShutdown(absl::Duration timeout) const { return barrier_.WaitForShutdown(timeout); }

  // Direct read access for a trainer in the same process that is the only
  // one pushing (a local trainer): the values are stable between its own
  // pushes, so it reads them without a copy per step. Valid for the shard's
  // lifetime; must not be read concurrently with Push or Initialize.
  const float* params_unlocked() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return params_.data(); }
  const float* state_unlocked() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return state_.data(); }

  // The step rule this chunk follows (PsTask's list of every engine's).
  StepBarrier& barrier() { return barrier_; }
  const ShardOptions& options() const { return options_; }
  int64_t size() const { return options_.end - options_.begin; }

 private:
  explicit ParameterShard(const ShardOptions& options, std::unique_ptr<Optimizer> optimizer);

  // StepEngine, with mu_ held.
  absl::Status ApplyPendingLocked(int contributors) override;
  void DiscardPendingLocked() override;
  void AdvancedLocked(int64_t step) override;
  void SnapshotLocked() override;
  void AppliedLocked(const AppliedPushes& applied) override;

  // Initialize's work; pending sync pushes of the old run go to `abandoned`.
  absl::Status InitializeLocked(absl::Span<const float> params, absl::Span<const float> state,
                                int64_t global_step,
                                const std::vector<absl::Span<const float>>& slots,
                                int64_t optimizer_step, int64_t generation,
                                std::vector<PushCallback>& abandoned);
  // Applies one update (a push in async mode, a step's average in sync).
  void ApplyLocked(const float* grads, const float* stats) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ShardSnapshot CopyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ShardOptions options_;
  mutable absl::Mutex mu_;
  std::unique_ptr<Optimizer> optimizer_ ABSL_GUARDED_BY(mu_);
  std::vector<float> params_ ABSL_GUARDED_BY(mu_);
  std::vector<float> state_ ABSL_GUARDED_BY(mu_);
  // Counts changes of params_ (never reset: a restore is one more).
  int64_t params_version_ ABSL_GUARDED_BY(mu_) = 0;
  // Sync: the values before the last applied step, `prev_step_` (-1: none;
  // Read's at_step).
  std::vector<float> prev_params_ ABSL_GUARDED_BY(mu_);
  std::vector<float> prev_state_ ABSL_GUARDED_BY(mu_);
  int64_t prev_step_ ABSL_GUARDED_BY(mu_) = -1;
  // Sync: the pending step's sums.
  std::vector<float> grad_sum_ ABSL_GUARDED_BY(mu_);
  std::vector<float> stats_sum_ ABSL_GUARDED_BY(mu_);
  // A replicated ps: the observer of applied updates, and the last update's
  // values, kept for it by ApplyLocked.
  UpdateObserver observer_ ABSL_GUARDED_BY(mu_);
  std::vector<float> last_grads_ ABSL_GUARDED_BY(mu_);
  std::vector<float> last_stats_ ABSL_GUARDED_BY(mu_);
  // The copy RequestSnapshot asked for, once taken.
  ShardSnapshot snapshot_ ABSL_GUARDED_BY(mu_);
  // Last: stopped first (its timer calls into the members above).
  StepBarrier barrier_;
};

// The variables (or parts of them) in [begin, end), relative to `begin`: the
// segment table a ps uses for per-variable rules (no weight decay on biases).
std::vector<Segment> SegmentsForRange(const Model& model, int64_t begin, int64_t end);

}  // namespace pstrain

#endif  // PSTRAIN_PS_PARAMETER_SHARD_H_
