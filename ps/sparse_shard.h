#ifndef PSTRAIN_PS_SPARSE_SHARD_H_
#define PSTRAIN_PS_SPARSE_SHARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/env.h"
#include "io/row_checkpoint.h"
#include "models/model.h"
#include "ps/embedding_table.h"
#include "ps/model_tables.h"
#include "ps/step_barrier.h"
#include "ps_protocol/shard_layout.h"

namespace pstrain {

struct SparseShardOptions {
  int ps_index = 0;
  int num_ps = 1;
  // The update rule, the dense chunks' (ps/step_barrier.h); the rows follow
  // the steps pushes name (follows_pushed_steps is set by Create).
  StepRule rule;
};

// One ids-and-values part of a request: `ids` of table `table`; `values`
// holds ids.size() x dim floats (rows to fill, or gradients to apply).
struct RowsRef {
  int table = 0;
  absl::Span<const int64_t> ids;
  absl::Span<float> values;
};
struct ConstRowsRef {
  int table = 0;
  absl::Span<const int64_t> ids;
  absl::Span<const float> values;
};

// An order-independent checksum of rows: the sum (mod 2^64) over rows of a
// mix of the id, the weights' and the slots' bits and the last step, so the
// rows of a table split over any number of ps sum to the same value.
uint64_t RowChecksum(int64_t id, absl::Span<const float> weights, absl::Span<const float> slots,
                     int64_t last_step);

// One update of a ps task's rows as its backups apply it again (a
// replicated ps, issue 55): what its barrier counted, and per table the
// distinct ids and the gradients EmbeddingTable::ApplyGradients took (an
// async push's, at the push's step; a sync step's averages, at the step).
// Applied in sequence to a copy of the rows (SparseShard::ApplyReplicated),
// the updates leave it as the primary's: weights, slots, last steps, counts
// and admissions, evictions, and the rows before the last sync step.
struct RowsUpdate {
  AppliedPushes applied;
  struct Table {
    int table = 0;
    std::vector<int64_t> ids;
    std::vector<float> grads;  // ids x dim
  };
  std::vector<Table> tables;  // empty for a move of the step with nothing applied
  int64_t apply_step = 0;     // the step ApplyGradients took
};

// One ps task's rows of every embedding table of the model: those whose
// RowOwner is this task, as EmbeddingTables: a storage-and-apply engine
// under the ps's step rule (ps/step_barrier.h), as ParameterShard is for the
// flat vector. A push is answered at once; a training replica's pull waits
// where the rule says (sync: for the previous step's pushes; ssp: for the
// slower replicas).
//
// Requests are checked first: a table out of range, a values size that is
// not ids x dim, an id this task does not own, a negative id, an id beyond a
// bucketed table, an id twice in one push, a non-finite gradient, a replica
// or step out of range are InvalidArgument and change nothing. Until the
// rows are initialized (Reset) or while they are being restored, requests
// are answered UNAVAILABLE (clients retry). A push of another generation
// than the rows' (gradients from before a rollback) is ABORTED.
//
// Thread-safe. The tables are never replaced, only cleared, so lookups run
// outside the shard's lock.
class SparseShard final : private StepEngine {
 public:
  static absl::StatusOr<std::unique_ptr<SparseShard>> Create(const Model& model,
                                                             const SparseTableRules& rules,
                                                             const SparseShardOptions& options);
  ~SparseShard() override;

  // Forgets every row and starts at `step` with `generation` (an
  // initialization). Waiting pulls are answered with the new rows.
  void Reset(int64_t step, int64_t generation);

  // Writes the current rows of each part's ids into its values and calls
  // `done` (the parts' memory must stay valid until then). Replica
  // `replica`'s pull for `step` waits as the step rule says: sync, until the
  // pushes of step - 1 were applied (by the push that completes them, or by
  // the barrier's timer once they timed out); ssp, until the replica is no
  // more than `staleness` pushes ahead of the slowest. A replica of -1 is a
  // read that never waits, and so is a pull from a replica that holds
  // parameters of another `generation` than the rows' (0: not checked; a
  // replica that has not heard of a rollback yet: its next push tells it).
  // Shutdown answers every waiting pull. Sync: a replica's pull for the step
  // before the rows', in which its push counted, gets the rows as they were
  // at that step (a replica that rejoins in the middle of a step, whose rows
  // it had pushed before it was killed, computes the step as it did then).
  //
  // Not exact after a step that evicted rows (ttl_steps): those read as new.
  using PullDone = std::function<void(absl::Status)>;
  void Pull(int replica, int64_t step, std::vector<RowsRef> parts, PullDone done,
            int64_t generation = 0);
  // The same, blocking until answered.
  absl::Status PullAndWait(int replica, int64_t step, std::vector<RowsRef> parts);

  // Replica `replica`'s gradient rows for `step`, computed from rows of
  // `generation` (0: not checked). A second push by one replica for one
  // step is counted once (a retry), in sync and async alike; sync pushes
  // for an earlier step are stale. Answered at once.
  absl::StatusOr<PushResult> Push(int replica, int64_t step, int64_t generation,
                                  absl::Span<const ConstRowsRef> parts);
  // The same, answered through `done`: at once, or with `hold_until_applied`
  // once the sync step the push counts in was applied (a replicated ps,
  // whose backups hold a sync push only once its step was applied there).
  // `parts` are read before it returns.
  using PushDone = std::function<void(absl::StatusOr<PushResult>)>;
  void Push(int replica, int64_t step, int64_t generation, absl::Span<const ConstRowsRef> parts,
            PushDone done, bool hold_until_applied);

  // Replica `replica` left the job: sync steps stop waiting for it.
  void ReplicaLeft(int replica) { barrier_.ReplicaLeft(replica); }

  // A replicated ps (issue 55), the primary's side: every update applied
  // from now on is handed to `observer`, in the order applied, under the
  // shard's lock (it must not call into the shard: it queues the update).
  // Null stops it.
  using UpdateObserver = std::function<void(RowsUpdate)>;
  void SetUpdateObserver(UpdateObserver observer);
  // A rejoin: every row (weights, slots, last step, count), every pending
  // admission, the rows before the last sync step and the barrier's
  // progress, copied under the shard's lock; `then` is called under it
  // right after (to add the new backup to the update stream there, whose
  // link must deliver nothing before the copy is installed). The copy is
  // about the size of the rows. FailedPrecondition before the rows start.
  struct BackupCopy {
    struct Row {
      int table = 0;
      int64_t id = 0;
      std::vector<float> weights, slots;
      int64_t last_step = 0;
      int64_t count = 0;
    };
    struct PendingId {
      int table = 0;
      int64_t id = 0;
      int64_t count = 0;
      int64_t last_step = 0;
    };
    std::vector<Row> rows;
    std::vector<PendingId> pending;
    BarrierProgress progress;
    int64_t last_evict = 0;
    // The rows before the last sync step (Pull), per table: ids, weights.
    int64_t undo_step = -1;  // -1: none
    std::vector<std::vector<int64_t>> undo_ids;
    std::vector<std::vector<float>> undo_weights;
  };
  absl::StatusOr<BackupCopy> CopyForBackup(absl::FunctionRef<void()> then);
  // The new backup's side: forgets its rows and takes the copy's, to
  // follow the primary's later updates. InvalidArgument for rows the tables
  // refuse (then the rows are uninitialized until a reset).
  absl::Status InstallCopy(const BackupCopy& copy);

  // A backup's side: applies the primary's next update as the primary did.
  // The errors of StepBarrier::CheckFollowLocked; InvalidArgument for a
  // table, size or id the rows refuse (as Push's); then nothing changed.
  // With an observer set, the update goes on to it (a chain of backups).
  absl::Status ApplyReplicated(const RowsUpdate& update);

  // A checkpoint of the rows at `step`: sync, a copy taken the moment the
  // rows reach `step` (step - 1's pushes applied, none of step's), waiting
  // up to `wait` for it (else copied as they are); async, copied now. The
  // copy holds the shard's lock (pushes wait, lookups do not); the file is
  // written after it, to `path` (io/row_checkpoint.h), recording
  // `global_step`. `optimizer` names the slots. FailedPrecondition before
  // the rows are initialized.
  struct SavedRows {
    RowFileSummary file;
    int64_t step = 0;                // the step the rows were at
    std::vector<uint64_t> checksum;  // per table: RowChecksum summed
  };
  absl::StatusOr<SavedRows> Save(Env* env, const std::string& path, int64_t step,
                                 int64_t global_step, absl::Duration wait,
                                 const std::string& optimizer);

  // Forgets every row, then inserts the rows this task owns from every rows
  // file of a checkpoint (written by any number of ps), matched to the
  // model's tables by name, and starts at `step` with `generation`. `files`
  // are full paths with the size and CRC the index recorded; `tables` and
  // `optimizer` are the index's. InvalidArgument for a table of another dim
  // or bucket count or slots of another optimizer; DataLoss for a damaged
  // file. Requests meanwhile are answered UNAVAILABLE; after a failure the
  // rows are uninitialized.
  // Answers requests UNAVAILABLE from now until Restore ends (a restore of
  // the dense shards first, then of the rows).
  void BeginRestore();
  // Ends BeginRestore's refusals with the rows as they were (the dense
  // restore failed before the rows were touched).
  void CancelRestore();
  struct RowsFile {
    std::string path;
    uint64_t size_bytes = 0;
    uint32_t crc32c = 0;
  };
  struct RestoredRows {
    int64_t rows = 0;
    std::vector<uint64_t> checksum;  // per model table
  };
  absl::StatusOr<RestoredRows> Restore(Env* env, const std::vector<RowsFile>& files,
                                       const std::vector<SparseTableInfo>& tables,
                                       const std::string& optimizer, int64_t step,
                                       int64_t generation);

  // Answers every waiting pull (the job is over); later pulls do not wait.
  void Shutdown() { barrier_.Shutdown(); }

  // The step the rows are at: every sync push of an earlier step is applied.
  int64_t step() const { return barrier_.step(); }

  // The step rule the rows follow (PsTask's list of every engine's).
  StepBarrier& barrier() { return barrier_; }
  const std::vector<std::unique_ptr<EmbeddingTable>>& tables() const { return tables_; }
  const std::vector<TableLayout>& layout() const { return layout_; }

  // The step rule's counters and the rows'.
  struct Stats : StepStats {
    int64_t rows_pulled = 0;  // ids answered, summed over pulls
    int64_t rows_pushed = 0;  // gradient rows received
    int64_t evicted = 0;
  };
  Stats GetStats() const;

 private:
  SparseShard(std::vector<TableLayout> layout, std::vector<std::unique_ptr<EmbeddingTable>> tables,
              const SparseTableRules& rules, const SparseShardOptions& options);

  // StepEngine, with mu_ held.
  absl::Status ApplyPendingLocked(int contributors) override;
  void DiscardPendingLocked() override;
  void AdvancedLocked(int64_t step) override;
  void SnapshotLocked() override;
  void AppliedLocked(const AppliedPushes& applied) override;

  // A snapshot of every row (Save).
  struct Snapshot {
    std::unique_ptr<RowFileWriter> writer;
    std::vector<uint64_t> checksum;
    int64_t step = 0;
  };

  absl::Status CheckParts(absl::Span<const ConstRowsRef> parts) const;
  absl::Status Check(int table, absl::Span<const int64_t> ids, size_t values) const;
  // Adds a sync push's rows to the pending step's sums.
  void AccumulateLocked(absl::Span<const ConstRowsRef> parts) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct Accumulator;
  // Sync: applies a step's averaged rows at the barrier's step, keeping the
  // rows as they were before it for Pull; `rows` is consumed.
  absl::Status ApplyStepLocked(std::vector<Accumulator>& rows) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // With an observer: keeps what was just applied for AppliedLocked.
  void KeepAppliedLocked(absl::Span<const ConstRowsRef> parts, int64_t step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Clears rows and sums for a new start.
  void ClearLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Snapshot> CopyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `step`: the checkpoint's.
  absl::Status RestoreFile(Env* env, const RowsFile& file, const std::string& optimizer,
                           int64_t step, RestoredRows* restored);
  // Looks up the parts and answers.
  // `step`: training replica `replica`'s pull's (-1: the rows as they are).
  void Answer(int replica, int64_t step, const std::vector<RowsRef>& parts, const PullDone& done);
  // Answers pulls the barrier released (or failed).
  void AnswerAll(std::vector<StepBarrier::Done>& released, const absl::Status& status);

  const std::vector<TableLayout> layout_;
  const std::vector<std::unique_ptr<EmbeddingTable>> tables_;
  const SparseTableRules rules_;
  const SparseShardOptions options_;

  mutable absl::Mutex mu_;
  // Sync: the pending step's gradient sums per table, id -> index of its
  // row in sums.
  struct Accumulator {
    absl::flat_hash_map<int64_t, int64_t> index;
    std::vector<int64_t> ids;
    std::vector<float> sums;
  };
  std::vector<Accumulator> accum_ ABSL_GUARDED_BY(mu_);
  // A replicated ps: the observer of applied updates, and the last update's
  // rows, kept for it.
  UpdateObserver observer_ ABSL_GUARDED_BY(mu_);
  RowsUpdate last_ ABSL_GUARDED_BY(mu_);
  // Sync: the rows the last applied step changed, as they were before it
  // (Pull for that step). Immutable once made: pulls read it unlocked.
  struct StepUndo {
    int64_t step = 0;
    struct Table {
      absl::flat_hash_map<int64_t, int64_t> index;  // id -> row in weights
      std::vector<float> weights;
    };
    std::vector<Table> tables;
  };
  std::shared_ptr<const StepUndo> undo_ ABSL_GUARDED_BY(mu_);
  int64_t last_evict_ ABSL_GUARDED_BY(mu_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mu_);  // the rows' counters
  // Save's copy, once the barrier had it taken.
  std::string snapshot_optimizer_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::StatusOr<Snapshot>> snapshot_ ABSL_GUARDED_BY(mu_);
  // Last: stopped first (its timer calls into the members above).
  StepBarrier barrier_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SPARSE_SHARD_H_
