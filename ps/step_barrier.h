#ifndef PSTRAIN_PS_STEP_BARRIER_H_
#define PSTRAIN_PS_STEP_BARRIER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ps/staleness_bound.h"

namespace pstrain {

// The update rule every engine on a ps follows (the dense chunks and the
// sparse rows alike): the job's training section, as PsTask derives it.
struct StepRule {
  // sync: a step's pushes are summed until `replicas_to_aggregate` distinct
  // live replicas have pushed (fewer if fewer are live), then applied once,
  // averaged. Else each push is applied on arrival (async), with bounded
  // staleness when `staleness` >= 0 (ssp).
  bool sync = false;
  int replicas_to_aggregate = 1;  // R (sync)
  int total_replicas = 1;         // N; replica ids are 0..N-1
  int staleness = -1;             // ssp (async only); -1: off
  // sync: how long a step waits for missing replicas; ssp: how long a
  // replica may be silent before it is no longer waited for.
  absl::Duration sync_timeout = absl::Seconds(30);
  int64_t train_steps = 0;  // The job is done once the step reaches this (0: no end).
  // Where the step comes from. The dense chunks count the job's steps: a
  // push names the step it was computed at, and one ahead of the chunk's
  // step (a replica that has not heard of a rollback) is refused. The
  // sparse rows follow them: a push ahead means the job's step moved on
  // without this ps hearing of it (the dense side timed out), so the
  // barrier moves there, and async pushes set the step to the latest one
  // pushed instead of counting.
  bool follows_pushed_steps = false;

  // InvalidArgument for replica counts that cannot work.
  absl::Status Check() const;
};

// What a push (or a read) learns about an engine.
struct PushResult {
  int64_t global_step = 0;  // The engine's step after the push was handled.
  bool stale = false;       // The push was for an older step and was dropped.
  bool job_done = false;    // The step reached train_steps, or the job is shutting down.
  int64_t generation = 0;   // The engine's generation (an initialization or restore makes one).
  // Dense reads: the parameters' version (PushPullResponse.params_version),
  // and whether they were left out because the reader holds that version.
  int64_t params_version = 0;
  bool params_unchanged = false;
};

// The barrier's counters (an engine may report more of its own).
struct StepStats {
  bool initialized = false;
  int64_t global_step = 0;
  int64_t applied_updates = 0;
  int64_t stale_pushes = 0;
  int64_t timed_out_steps = 0;
  int64_t ssp_waits = 0;  // ssp: pushes or reads that waited for slower replicas
  bool shutting_down = false;
  bool job_done = false;  // train_steps reached, or shutting down.
};

// An update an engine applied, as its backups apply it again (a replicated
// ps, issue 55): which pushes it counted, at which step, in which order.
// The engine adds its values (ParameterShard: the gradient its optimizer
// took).
struct AppliedPushes {
  int64_t sequence = 0;    // 1, 2, ... since the engine's last start (ResetLocked)
  int64_t generation = 0;  // of the values it was applied to
  int64_t step_before = 0;
  int64_t step_after = 0;
  std::vector<std::pair<int, int64_t>> pushes;  // (replica, step) of each push it counted
  bool operator==(const AppliedPushes&) const = default;
};

// Where a barrier is, as a copy of its engine must be to follow on from it
// (a replicated ps's rejoin): the step, generation and sequence, and which
// pushes count as applied.
struct BarrierProgress {
  int64_t step = 0;
  int64_t generation = 0;
  int64_t sequence = 0;
  int64_t applied = 0;
  std::vector<int64_t> last_async_step;  // per replica
  std::vector<int64_t> last_sync_step;
};

// What an engine does when the barrier says so. Every method is called with
// the barrier's mutex held (the engine's values are guarded by it too).
class StepEngine {
 public:
  virtual ~StepEngine() = default;
  // sync: apply the sums of the pending step's `contributors` pushes,
  // averaged, and clear them (the barrier then advances the step).
  virtual absl::Status ApplyPendingLocked(int contributors) = 0;
  // sync: forget the pending sums (a new start, or the job ended).
  virtual void DiscardPendingLocked() = 0;
  // The step moved to `step` (after an apply, or following pushed steps).
  virtual void AdvancedLocked(int64_t /*step*/) {}
  // Copy the values for a checkpoint now (RequestSnapshot's step came).
  virtual void SnapshotLocked() = 0;
  // With applies recorded (StepBarrier::RecordApplies): the update just
  // applied (async: a push; sync: a step), or followed (FollowLocked), so
  // that the engine hands it on to its backups in this order.
  virtual void AppliedLocked(const AppliedPushes& /*applied*/) {}
};

// The step rule of one engine on a ps: who is required, liveness,
// retries, stale pushes, timeouts, backup workers, bounded staleness, the
// job's end and the snapshot at a step. The engine holds the values and
// applies; the barrier decides when. One class for the dense chunks
// (ParameterShard) and the sparse rows (SparseShard), so both follow the
// same rule:
//
//  - async: a push is applied on arrival; a repeated (replica, step) once.
//  - sync: pushes for the current step are summed until R distinct live
//    replicas have pushed; then the step is applied once and advances. A
//    push for an older step is dropped and counted as stale (a retry of a
//    push that was counted is not). If a step has waited `sync_timeout`
//    since its first push, what arrived is applied and the missing
//    replicas are logged and not waited for until they push again, so a
//    dead worker never hangs the job. A replica that leaves is not waited
//    for either.
//  - ssp: as async, but a replica more than `staleness` pushes ahead of the
//    slowest live one waits (ps/staleness_bound.h); a replica silent for
//    `sync_timeout` is no longer waited for.
//
// Replicas wait in one of two places, by the same rule: a push that holds
// its answer until it may go on (the dense PushPull), or a read that waits
// before it is answered (the sparse Pull). Waiting reads also time out
// after sync_timeout.
//
// Thread-safe: the barrier and its engine share `mu`, which the barrier
// takes in its public methods; the *Locked ones are for the engine, with
// `mu` held. Callbacks run after `mu` is released, on the calling thread or
// the barrier's timer thread. The engine must call Stop() first in its
// destructor.
class StepBarrier {
 public:
  using Done = std::function<void(absl::Status, PushResult)>;

  // `name` appears in logs and errors ("chunk 3", "the embedding rows");
  // `mu` and `engine` must outlive the barrier.
  StepBarrier(std::string name, const StepRule& rule, absl::Mutex* mu, StepEngine* engine);
  ~StepBarrier();
  StepBarrier(const StepBarrier&) = delete;
  StepBarrier& operator=(const StepBarrier&) = delete;

  // Stops the timer and fails every held push and waiting read with
  // Cancelled. Idempotent.
  void Stop();

  // Checks a push and decides what to do with it: `add` (under the lock)
  // applies it (async) or adds it to the pending step's sums (sync); it is
  // called only when the push counts, and an error it returns refuses the
  // push. `done` is called exactly once: at once, or, with
  // `hold_until_applied`, when the sync step completes or (ssp) the replica
  // may go on. Refused, nothing changed: Unavailable before initialization
  // or during a restore (retry); InvalidArgument for a replica outside
  // [0, N) or a negative step; Aborted for a push computed from values of
  // another generation, or (counting steps) for a step ahead of the
  // barrier's (the job was rolled back: pull).
  void Push(int replica, int64_t step, int64_t generation, absl::FunctionRef<absl::Status()> add,
            Done done, bool hold_until_applied);

  // A replica's read at `step` (sync) or at its clock (ssp): `done` is called
  // once it may read. sync: once the step reached `step` (its predecessor's
  // pushes applied), or its pending pushes time out as above; a read that
  // waited sync_timeout with no push pending moves a barrier that follows
  // pushed steps to `step`, applying what was pending. A replica of -1,
  // async, reads after the job ended and reads by a replica holding values
  // of another `generation` (nonzero: it has not heard of a rollback yet;
  // its next push, refused, tells it) are answered at once; before
  // initialization or during a restore with the Unavailable error.
  void WaitToRead(int replica, int64_t step, int64_t generation, Done done);

  // The replica is stopping: no step waits for it, until it pushes again.
  void ReplicaLeft(int replica);
  // The job ended: held pushes and waiting reads are answered with
  // job_done, later pushes are not applied. Idempotent.
  void Shutdown();
  // Blocks until Shutdown() or `timeout`; true if it was shut down.
  bool WaitForShutdown(absl::Duration timeout) const;

  // A snapshot for a checkpoint at `at_step`: async or a step already
  // reached, the engine copies now; sync, the moment the step reaches it.
  // FailedPrecondition before initialization.
  absl::Status RequestSnapshot(int64_t at_step);
  // Waits for the requested copy until `deadline`, then has it taken as it
  // is (logged). Returns with the engine's copy taken.
  void AwaitSnapshot(absl::Time deadline);

  StepStats GetStats() const;
  int64_t step() const;
  int64_t generation() const;

  // For the engine, with `mu` held:
  // A new start at `step` with `generation` (0: a random one, returned):
  // forgets every replica's progress, discards the pending sums, and
  // returns the callbacks of held pushes and waiting reads of the previous
  // run, for the engine to answer after releasing `mu`.
  int64_t ResetLocked(int64_t step, int64_t generation, std::vector<Done>* abandoned)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  // While restoring, pushes and reads are refused (Unavailable) and the
  // timer rests; ResetLocked ends it, or SetRestoringLocked(false) with the
  // values as they were.
  void SetRestoringLocked(bool restoring) ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  // Back to before the first initialization (a restore failed): requests
  // are refused until ResetLocked; the callbacks of held pushes and waiting
  // reads go to `abandoned`.
  void UninitializeLocked(std::vector<Done>* abandoned) ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  // OK, or the Unavailable error a request gets now.
  absl::Status ReadyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  bool DoneLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  int64_t step_locked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) { return step_; }
  bool shutting_down_locked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) { return shutting_down_; }
  // Sync: whether `replica`'s push counted in `step` (a completed step, or
  // the pending one).
  bool CountedLocked(int replica, int64_t step) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) {
    return replica >= 0 && replica < static_cast<int>(last_sync_step_.size()) &&
           last_sync_step_[replica] == step;
  }
  int64_t generation_locked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) { return generation_; }
  // The result fields the barrier knows (step, generation, job done).
  PushResult ResultLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  // A replicated ps (issue 55). With applies recorded, every apply (an
  // async push, a sync step, a move of the step with nothing applied) is
  // numbered and handed to the engine's AppliedLocked, under `mu`, in the
  // order applied.
  void SetRecordAppliesLocked(bool on) ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) { record_applies_ = on; }
  // A backup follows its primary's applies, in order: OK when `applied` is
  // the next one for it (the generation it holds, the sequence after the
  // last followed, applied at its step); FailedPrecondition for another
  // generation or step (the backup needs the chunk copied again), OutOfRange
  // for a sequence that is not the next (one was lost, or is repeated).
  absl::Status CheckFollowLocked(const AppliedPushes& applied) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  // Takes a checked `applied` as its own, the engine having applied its
  // values: its pushes count as applied here (a retry of one is applied
  // once; a sync retry is no stale push), the step moves to step_after, and
  // with applies recorded it goes on to the engine's AppliedLocked (a chain).
  void FollowLocked(const AppliedPushes& applied) ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  int64_t sequence_locked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) { return sequence_; }
  // A rejoin: the primary's progress, and a copy starting from it (a new
  // start at its step and generation whose sequence and applied pushes go
  // on from the primary's; the callbacks of the previous run go to
  // `abandoned`). InvalidArgument for another number of replicas.
  BarrierProgress ProgressLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  absl::Status ResumeLocked(const BarrierProgress& progress, std::vector<Done>* abandoned)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);

  const StepRule& rule() const { return rule_; }
  const std::string& name() const { return name_; }

 private:
  // A held push or a waiting read.
  struct Waiter {
    int replica = -1;
    int64_t step = 0;    // sync: answered once the barrier's step reaches it
    int64_t clock = 0;   // ssp: answered once this clock may proceed
    absl::Time give_up;  // sync reads: when the timeout rule applies to it
    Done done;
  };

  // Applies the pending sync step and advances.
  void CompleteStepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  // Moves the step to `step` (> step_) without an apply of its own.
  void MoveToLocked(int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  // With applies recorded: numbers the apply that moved the step from
  // `step_before` and hands it to the engine.
  void RecordLocked(int64_t step_before, std::vector<std::pair<int, int64_t>> pushes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  void AdvancedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  int RequiredLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  // The waiters that may go on now (all once the job is done).
  std::vector<Done> TakeReadyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  void TimerLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  void TimerLoop();

  const std::string name_;
  const StepRule rule_;
  absl::Mutex* const mu_;
  StepEngine* const engine_;

  bool initialized_ ABSL_GUARDED_BY(*mu_) = false;
  bool restoring_ ABSL_GUARDED_BY(*mu_) = false;
  bool shutting_down_ ABSL_GUARDED_BY(*mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(*mu_) = false;
  int64_t step_ ABSL_GUARDED_BY(*mu_) = 0;
  int64_t generation_ ABSL_GUARDED_BY(*mu_) = 0;  // 0 before the first start
  bool record_applies_ ABSL_GUARDED_BY(*mu_) = false;
  int64_t sequence_ ABSL_GUARDED_BY(*mu_) = 0;  // applies recorded or followed since the start
  std::mt19937_64 random_ ABSL_GUARDED_BY(*mu_){std::random_device{}()};
  int64_t applied_ ABSL_GUARDED_BY(*mu_) = 0;
  int64_t stale_ ABSL_GUARDED_BY(*mu_) = 0;
  int64_t timed_out_ ABSL_GUARDED_BY(*mu_) = 0;
  int64_t ssp_waits_ ABSL_GUARDED_BY(*mu_) = 0;
  std::vector<int64_t> last_async_step_ ABSL_GUARDED_BY(*mu_);  // per replica, for retries
  std::vector<int64_t> last_sync_step_ ABSL_GUARDED_BY(*mu_);   // the step each last counted in
  // sync: the pending step's contributors, the replicas not known to be
  // gone, and when the pending step's first push came.
  std::set<int> contributors_ ABSL_GUARDED_BY(*mu_);
  std::set<int> live_ ABSL_GUARDED_BY(*mu_);
  absl::Time first_push_ ABSL_GUARDED_BY(*mu_);
  std::unique_ptr<StalenessBound> ssp_ ABSL_GUARDED_BY(*mu_);
  std::vector<Waiter> waiters_ ABSL_GUARDED_BY(*mu_);
  // A snapshot waiting for the step to reach snapshot_at_.
  bool snapshot_wanted_ ABSL_GUARDED_BY(*mu_) = false;
  int64_t snapshot_at_ ABSL_GUARDED_BY(*mu_) = 0;
  std::thread timer_;  // sync and ssp only
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_STEP_BARRIER_H_
