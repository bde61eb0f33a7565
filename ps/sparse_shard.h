#ifndef PSTRAIN_PS_SPARSE_SHARD_H_
#define PSTRAIN_PS_SPARSE_SHARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
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
#include "ps_protocol/shard_layout.h"

namespace pstrain {

struct SparseShardOptions {
  int ps_index = 0;
  int num_ps = 1;
  // Sync: a step's pushes are summed, averaged over the replicas that pushed
  // and applied once `replicas_to_aggregate` distinct live replicas have
  // pushed; else (async, ssp) each push is applied on arrival.
  bool sync = false;
  int replicas_to_aggregate = 1;
  int total_replicas = 1;
  // Sync: how long a pull for step s waits for step s - 1's pushes before
  // applying what arrived.
  absl::Duration sync_timeout = absl::Seconds(30);
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

// One ps task's rows of every embedding table of the model: those whose
// RowOwner is this task, as EmbeddingTables, and the update rule around
// them (the sparse side of what ParameterShard is for the flat vector).
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
class SparseShard {
 public:
  static absl::StatusOr<std::unique_ptr<SparseShard>> Create(const Model& model,
                                                             const SparseTableRules& rules,
                                                             const SparseShardOptions& options);
  ~SparseShard();

  // Forgets every row and starts at `step` with `generation` (an
  // initialization). Waiting pulls are answered with the new rows.
  void Reset(int64_t step, int64_t generation);

  // Writes the current rows of each part's ids into its values and calls
  // `done` (the parts' memory must stay valid until then). A training
  // replica's sync pull for `step` (wait) is answered once the pushes of
  // step - 1 were applied: by the push that completes them (on its thread),
  // or after sync_timeout by the shard's timer, which applies what arrived
  // and logs the replicas missing. Shutdown answers every waiting pull.
  using PullDone = std::function<void(absl::Status)>;
  void Pull(int64_t step, bool wait, std::vector<RowsRef> parts, PullDone done);
  // The same, blocking until answered.
  absl::Status PullAndWait(int64_t step, bool wait, std::vector<RowsRef> parts);

  struct PushResult {
    bool stale = false;  // sync: the push is for a step already applied; dropped
    int64_t step = 0;    // the step the rows are at after the push
  };
  // Replica `replica`'s gradient rows for `step`, computed from rows of
  // `generation` (0: not checked). A second push by one replica for one
  // step is counted once (a retry), in sync and async alike.
  absl::StatusOr<PushResult> Push(int replica, int64_t step, int64_t generation,
                                  absl::Span<const ConstRowsRef> parts);

  // Replica `replica` left the job: sync steps stop waiting for it.
  void ReplicaLeft(int replica);

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
  void Shutdown();

  // The step the rows are at: every sync push of an earlier step is applied.
  int64_t step() const;

  const std::vector<std::unique_ptr<EmbeddingTable>>& tables() const { return tables_; }
  const std::vector<TableLayout>& layout() const { return layout_; }

  struct Stats {
    int64_t rows_pulled = 0;  // ids answered, summed over pulls
    int64_t rows_pushed = 0;  // gradient rows received
    int64_t stale_pushes = 0;
    int64_t evicted = 0;
  };
  Stats GetStats() const;

 private:
  SparseShard(std::vector<TableLayout> layout, std::vector<std::unique_ptr<EmbeddingTable>> tables,
              const SparseTableRules& rules, const SparseShardOptions& options);

  struct Waiter {
    int64_t step = 0;
    std::vector<RowsRef> parts;
    PullDone done;
    absl::Time give_up;
  };
  // A snapshot of every row (Save).
  struct Snapshot {
    std::unique_ptr<RowFileWriter> writer;
    std::vector<uint64_t> checksum;
    int64_t step = 0;
  };

  absl::Status CheckParts(absl::Span<const ConstRowsRef> parts) const;
  absl::Status Check(int table, absl::Span<const int64_t> ids, size_t values) const;
  absl::Status ReadyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<PushResult> PushLocked(int replica, int64_t step,
                                        absl::Span<const ConstRowsRef> parts)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies the sums of the pending sync step, averaged, and moves to the next.
  absl::Status ApplyPendingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int RequiredLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Clears rows and bookkeeping for a new start.
  void ClearLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeEvictLocked(int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the snapshot Save waits for once the rows reached its step.
  void MaybeSnapshotLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Snapshot> SnapshotLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `step`: the checkpoint's.
  absl::Status RestoreFile(Env* env, const RowsFile& file, const std::string& optimizer,
                           int64_t step, RestoredRows* restored);
  // Looks up the parts and answers.
  void Answer(std::vector<RowsRef> parts, const PullDone& done);
  // The waiters the rows' step now satisfies (or all, after shutdown or a
  // reset).
  std::vector<Waiter> TakeReadyLocked(bool all = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AnswerAll(std::vector<Waiter> waiters);
  void TimerLoop();
  // After sync_timeout: applies what the pending step has and moves the
  // step to the latest timed-out waiter's.
  void TimeOutLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<TableLayout> layout_;
  const std::vector<std::unique_ptr<EmbeddingTable>> tables_;
  const SparseTableRules rules_;
  const SparseShardOptions options_;

  mutable absl::Mutex mu_;
  absl::CondVar timer_cv_;
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  bool restoring_ ABSL_GUARDED_BY(mu_) = false;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // Sync: the pending step's gradient sums per table, id -> index of its
  // row in sums.
  struct Accumulator {
    absl::flat_hash_map<int64_t, int64_t> index;
    std::vector<int64_t> ids;
    std::vector<float> sums;
  };
  std::vector<Accumulator> accum_ ABSL_GUARDED_BY(mu_);
  std::vector<int> pushed_ ABSL_GUARDED_BY(mu_);          // replicas of the pending step
  std::vector<bool> live_ ABSL_GUARDED_BY(mu_);           // per replica: not left
  std::vector<int64_t> last_async_ ABSL_GUARDED_BY(mu_);  // per replica: last step applied
  int64_t last_evict_ ABSL_GUARDED_BY(mu_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::vector<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  // Save's request: a snapshot at snapshot_at_ (-1: none), and the taken one.
  int64_t snapshot_at_ ABSL_GUARDED_BY(mu_) = -1;
  std::string snapshot_optimizer_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::StatusOr<Snapshot>> snapshot_ ABSL_GUARDED_BY(mu_);
  bool stop_timer_ ABSL_GUARDED_BY(mu_) = false;
  std::thread timer_;  // sync only: times out waiting pulls
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SPARSE_SHARD_H_
