#ifndef PSTRAIN_PS_PS_TASK_H_
#define PSTRAIN_PS_PS_TASK_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/env.h"
#include "config/cluster_config.h"
#include "models/model.h"
#include "ps/parameter_shard.h"
#include "ps/sparse_shard.h"
#include "ps/task_checkpoint.h"
#include "ps/update_stream.h"
#include "ps_protocol/ps_status.h"

namespace pstrain {

// The step rule a job's training section gives every engine on a ps.
StepRule StepRuleOf(const JobConfig& job);

// A replicated ps (issue 55): how a primary's updates reach its backups on
// other ps tasks (the gRPC adapter, or the tasks of one process in tests).
class ReplicaLinks {
 public:
  virtual ~ReplicaLinks() = default;
  // Sends chunk `chunk`'s update, by its primary of `epoch`, to ps task
  // `task`, which holds a backup of it; returns once that task holds it
  // (OK), or the task's refusal (ABORTED: it serves the chunk now, the
  // sender is fenced), or why it cannot be reached.
  virtual absl::Status SendChunkUpdate(int task, int chunk, int64_t epoch,
                                       const ChunkUpdate& update) = 0;
  // The same for the rows task `partition` owns (RowOwner).
  virtual absl::Status SendRowsUpdate(int task, int partition, int64_t epoch,
                                      const RowsUpdate& update) = 0;
  // A rejoin: sends task `task` a fresh copy of chunk `chunk` (the primary
  // of `epoch` took it), for PsTask::InstallChunkCopy there; returns once
  // installed, or fails at `deadline`. A link that gave up on `task` tries
  // it again.
  virtual absl::Status SendChunkCopy(int task, int chunk, int64_t epoch,
                                     const ParameterShard::BackupCopy& copy,
                                     absl::Time deadline) = 0;
  // The same for the rows task `partition` owns, in pieces
  // (RowsCopyPieces) for PsTask::InstallRowsCopy.
  virtual absl::Status SendRowsCopy(int task, int partition, int64_t epoch,
                                    const SparseShard::BackupCopy& copy, absl::Time deadline) = 0;
  // Every copy was restored alike (a rollback): tasks a link gave up on are
  // tried again.
  virtual void Reset() {}
};

// A rows copy cut into pieces of at most `rows_per_piece` rows, for the
// wire: the first piece carries everything else (the barrier's progress,
// pending ids, the rows before the last sync step), the rest only rows.
// Always at least one piece.
std::vector<SparseShard::BackupCopy> RowsCopyPieces(const SparseShard::BackupCopy& copy,
                                                    size_t rows_per_piece);

// How many copies of every chunk the job keeps, and where a primary's
// updates go.
struct PsReplication {
  int copies = 1;                 // the primary and copies - 1 backups, in [1, num_ps]
  ReplicaLinks* links = nullptr;  // needed when copies > 1; must outlive the task
};

// One ps task's logic, free of gRPC: the ParameterShards of the layout
// chunks in its range, for a model with embedding tables the SparseShard of
// the rows it owns, and the task-wide state around them (preemption,
// departures, progress totals, which replicas know the job is done). Every
// request is checked here: one that does not fit (a chunk this task does
// not hold, another model or size, a replica out of range) is
// InvalidArgument and changes nothing; one before initialization is
// FailedPrecondition. The gRPC service (ps_service.h) and the in-process
// parameter servers of the tests (in_process_parameter_servers.h) are
// adapters over it. Thread-safe; Save and Restore block (callers run them
// off their request threads) and run one at a time.
class PsTask {
 public:
  // The task `ps_index` of `job` for `model` (the layout, optimizer and
  // update rule every role derives from the same job). `env` holds the job
  // dir and must outlive the task; `trace` (may be null) records applies,
  // waits and checkpoint copies.
  //
  // With `replication.copies` > 1, the task also holds a backup of every
  // chunk whose primary's ReplicaTasks include it: the chief initializes
  // and restores it as the primary's, it follows the primary's updates
  // (FollowChunk), and it refuses the replicas' pushes and reads (for now:
  // a failover's promotion comes next). Each of its own chunks sends its
  // updates to its backups, and answers a push once they hold it. Status,
  // Save and shards() are of its own chunks.
  static absl::StatusOr<std::unique_ptr<PsTask>> Create(const JobConfig& job, const Model& model,
                                                        int ps_index, Env* env,
                                                        TraceRecorder* trace = nullptr,
                                                        PsReplication replication = {});
  // Over shards made by hand (tests): `shards` are this task's, in flat
  // order; `backups` (optional) the chunks it holds backups of.
  PsTask(const PsIdentity& identity, std::vector<std::unique_ptr<ParameterShard>> shards, Env* env,
         std::vector<std::unique_ptr<ParameterShard>> backups = {});
  ~PsTask();

  // Sets chunk `chunk`'s values; `model` and `num_params` must be the task's.
  absl::Status Initialize(int chunk, const std::string& model, int64_t num_params,
                          absl::Span<const float> params, absl::Span<const float> state,
                          int64_t global_step, int64_t generation = 0);
  // Copies chunk `chunk`'s values (ParameterShard::Read).
  absl::StatusOr<PushResult> Read(int chunk, std::string* params, std::string* state,
                                  bool bf16 = false, int64_t have_generation = 0,
                                  int64_t have_version = 0, int64_t at_step = -1,
                                  int replica = -1) const;
  // A replica's progress report, carried by a push; added to the totals.
  struct Progress {
    double loss_sum = 0;
    int64_t loss_batches = 0;
    int64_t examples = 0;
  };
  // The push's generation (ParameterShard::Push) and progress report.
  // Hands replica `replica`'s gradients for chunk `chunk` to its shard;
  // `done` as ParameterShard::Push. The task notes whether the replica
  // learned that the job is done.
  void Push(int chunk, int replica, int64_t step, int64_t generation, absl::Span<const float> grads,
            absl::Span<const float> batch_stats, const Progress& progress,
            ParameterShard::PushCallback done);
  // A backup's side: applies the next update of chunk `chunk` from its
  // primary of `epoch` (ParameterShard::ApplyReplicated). InvalidArgument
  // for a chunk this task holds no backup of; ABORTED for a sender this
  // task was promoted over, or of an older epoch (it is fenced).
  absl::Status FollowChunk(int chunk, const ChunkUpdate& update, int64_t epoch = 1);

  // A failover (issue 55): from now on this task serves the chunks and rows
  // of task `owner`, whose backups it holds, at `epoch` (past every epoch
  // it knew for them): the replicas' pushes and reads of them are taken
  // here, and what the old primary still sends is refused (it is fenced).
  // Their updates go to `backups` (the other copies still in step; none
  // with 2 copies). Idempotent for the same epoch. InvalidArgument for an
  // owner whose backups it does not hold; FailedPrecondition for an older
  // epoch.
  absl::Status Promote(int owner, int64_t epoch, const std::vector<int>& backups = {});
  // A rejoin (issue 55), the side of the task serving `owner`'s chunks and
  // rows: task `task`, which holds copies of them (a restarted ps, or one
  // its streams dropped), gets a fresh copy of each (ReplicaLinks, taken
  // while training goes on) and follows their updates from there. Returns
  // once it holds them and has caught up with the updates since, so that
  // from then on every answer waits for it as for every backup; or the
  // error, within `timeout` (then it is not waited for). FailedPrecondition
  // if this task does not serve them; InvalidArgument for a task that is
  // not one of their copies.
  absl::Status AddBackup(int owner, int task, absl::Duration timeout);
  // The rejoining task's side: takes chunk `chunk`'s copy from the task
  // that serves it at `epoch`, and follows that task's updates of it from
  // now on. For its own chunks this task no longer serves them (replicas'
  // requests are refused as fenced, sending them to the serving task) until
  // a failover promotes it again or a restore. FailedPrecondition for an
  // epoch older than one it knows, or chunks it serves at that epoch
  // itself; InvalidArgument for a chunk it holds no copy of, or a copy
  // that does not fit.
  absl::Status InstallChunkCopy(int chunk, int64_t epoch, const ParameterShard::BackupCopy& copy);
  // The same for the rows of task `partition`, in pieces (RowsCopyPieces)
  // numbered from `index` 0 (which drops a copy cut short before): each is
  // kept until the `last` one, then the whole copy is taken.
  absl::Status InstallRowsCopy(int partition, int64_t epoch, SparseShard::BackupCopy piece,
                               int index, bool last);

  // The chief's word that it knows of `drops` backups this task's streams
  // dropped (Status's backup_drops) and marked them out of step: the
  // answers the streams held since go. Any other number than there are
  // now (fewer: a drop since; more: counted before this task restarted):
  // nothing.
  void ConfirmDrops(int64_t drops);
  // The chief's word to a primary that was failed over while it did not
  // answer (stopped, not gone): its chunks and rows are served elsewhere
  // since `epoch`; from now on it serves none of them (Aborted "fenced",
  // which sends the clients on), and its Status says it holds no
  // parameters in step. Until a restore.
  absl::Status Fence(int64_t epoch);
  // The epoch this task knows for `owner`'s chunks and rows (1 before any
  // failover), and whether it serves them.
  int64_t epoch(int owner) const;
  bool serves(int owner) const;
  // Whether it serves any task's chunks now (its own, or a failed
  // primary's): a task that only follows (rejoined, or fenced) has no
  // replica to answer at the job's end.
  bool serves_any() const;
  // The tasks whose chunks or rows it holds backups of.
  std::vector<int> backup_owners() const;
  // The chunks this task holds backups of, in flat order, and one of them
  // (null for a chunk it holds no backup of).
  std::vector<int> backup_chunks() const;
  ParameterShard* backup(int chunk) const;
  // The same for the rows of task `partition` (a model with tables).
  absl::Status FollowRows(int partition, const RowsUpdate& update, int64_t epoch = 1);
  std::vector<int> backup_partitions() const;
  SparseShard* backup_rows(int partition) const;

  // Notes that `replica` was answered with `job_done` (after a Push or a
  // PushPull's read), so the task can exit once every replica knows.
  void NoteDone(int replica, bool job_done);

  PsStatus Status() const;
  // The status of task `owner`'s chunks and rows as this task holds them:
  // its own (Status), or a failed primary's it serves (ps_task is `owner`,
  // served_by this task). FailedPrecondition if it does not serve them.
  absl::StatusOr<PsStatus> StatusFor(int owner) const;
  // Ends the job on this task: later pushes answer job_done. Logs `reason`.
  void Shutdown(const std::string& reason);
  // Writes the task's range to model.ckpt-<step>.shard-<i>-of-<P> in its job
  // dir, and its rows (if any) beside it (TaskCheckpoint::Save); the files
  // record `global_step`.
  absl::StatusOr<ShardSaved> Save(int64_t step, int64_t global_step, absl::Duration wait);
  // The same for the chunks and rows of ps `owner`, which this task serves
  // after a failover, under `owner`'s file names: a checkpoint during a
  // failover is the same files as one without. FailedPrecondition if it
  // does not serve them.
  absl::StatusOr<ShardSaved> SaveFor(int owner, int64_t step, int64_t global_step,
                                     absl::Duration wait);
  // Loads the task's chunks, and its rows (if any), from the checkpoint
  // model.ckpt-<step> in its job dir (TaskCheckpoint::Restore); `model` and
  // `num_params` must be the task's. Returns the restored global step.
  absl::StatusOr<int64_t> Restore(const std::string& model, int64_t num_params, int64_t step,
                                  int64_t generation = 0);
  // Where the task's checkpoints are (empty if it was given none).
  const std::string& job_dir() const { return identity_.job_dir; }
  // The rows of embedding tables this task holds (SparseShard::Pull, `done`
  // called when answered; a replica of -1 is a read that never waits) and
  // a replica's gradient rows (SparseShard::Push). FailedPrecondition for a
  // model without tables.
  // `owner` (>= 0): the task whose rows they are (a replicated job routes
  // them to the task that serves them); -1: the ids' owner.
  void PullRows(int replica, int64_t step, int64_t generation, std::vector<RowsRef> parts,
                SparseShard::PullDone done, int owner = -1);
  // The push is applied at once (`parts` are not kept); `done` gets the
  // answer, with copies once the backups hold it (on a sender's thread).
  using RowsPushDone = std::function<void(absl::StatusOr<PushResult>)>;
  void PushRows(int replica, int64_t step, int64_t generation, absl::Span<const ConstRowsRef> parts,
                RowsPushDone done, int owner = -1);
  // The same, waiting for the answer.
  absl::StatusOr<PushResult> PushRows(int replica, int64_t step, int64_t generation,
                                      absl::Span<const ConstRowsRef> parts, int owner = -1);
  // Gives a task made by hand (tests) the rows of a model's embedding
  // tables; `optimizer` names their slots in checkpoints.
  void AttachSparse(std::unique_ptr<SparseShard> sparse, std::string optimizer);
  // A replicated ps: a backup of task `partition`'s rows.
  void AttachBackupRows(int partition, std::unique_ptr<SparseShard> rows);
  // This task's rows (null for a model without embedding tables).
  SparseShard* sparse() const { return sparse_.get(); }

  // Replica `replica` is stopping, or its input ended (`input_ended`, until
  // it pushes again: Status counts it in inputs_ended): sync steps stop
  // waiting for it.
  absl::Status Leave(int replica, const std::string& reason, bool input_ended);

  // This task is being stopped (SIGTERM): Status tells the chief, which
  // saves a checkpoint and ends the job.
  void SetPreempting() { preempting_ = true; }
  // Replicas that have been told the job is done.
  int replicas_told_done() const;
  // Blocks until the job was shut down or `timeout` passed; true if it was.
  bool WaitForShutdown(absl::Duration timeout) const;
  // Chunk 0's step and applied updates, with stale pushes, timed-out sync
  // steps and ssp waits summed over every engine (chunks and rows), for the
  // task's last log line.
  StepStats TotalStats() const;

  const PsIdentity& identity() const { return identity_; }
  // Copies of every chunk in the job (ps_replication).
  int copies() const { return copies_; }
  int total_replicas() const { return shards_.front()->options().rule.total_replicas; }
  const std::vector<ParameterShard*>& shards() const { return shard_ptrs_; }
  // Values in chunk `chunk`, or -1 if this task does not hold it.
  int64_t ChunkSize(int chunk) const;

 private:
  // A chunk this task holds, its own or a backup.
  absl::StatusOr<ParameterShard*> FindShard(int chunk) const;
  // One of its own: FailedPrecondition for a backup (the replicas' pushes
  // and reads go to the primary).
  absl::StatusOr<ParameterShard*> FindOwnShard(int chunk) const;
  // After a restore (every copy restored alike): each task serves its own
  // chunks again at epoch 1, with every backup in its streams; streams
  // before it fail their held answers as rolled back.
  void ResetRoles();
  // Sends the updates of `owner`'s chunks this task serves (its own, or
  // promoted backups) to their backups on `tasks_of[chunk]`, and the rows'
  // to `row_tasks`, carrying `epoch`.
  // Streams it replaces (a second promotion) are retired into the lists,
  // to be ended outside roles_mu_ (RetireStreams).
  struct Retired {
    std::vector<UpdateStream<ChunkUpdate>*> chunks;
    std::vector<UpdateStream<RowsUpdate>*> rows;
  };
  void StartStreams(int owner, int64_t epoch, const std::vector<std::vector<int>>& tasks_of,
                    const std::vector<int>& row_tasks, Retired* retired = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(roles_mu_);
  // Stops feeding the streams of `owner`'s chunks and rows served here and
  // moves them to the retired lists.
  void RetireStreamsOfLocked(int owner, Retired* retired) ABSL_EXCLUSIVE_LOCKS_REQUIRED(roles_mu_);
  // Logs what holds the answers its streams held 10 s or more (at most every
  // 10 s; Status's, as the chief probes).
  void LogStalledAnswersLocked() const ABSL_SHARED_LOCKS_REQUIRED(roles_mu_);
  // Keeps a stream's drops in the task's count as it is retired.
  template <class Update>
  void RetireDropsLocked(const UpdateStream<Update>& stream)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(roles_mu_) {
    retired_drops_ += stream.drops();
    for (int task : stream.dropped_tasks()) retired_dropped_tasks_.push_back(task);
  }
  // Fails what the retired streams hold with `why`; outside roles_mu_.
  static void EndStreams(const Retired& retired, const absl::Status& why);
  // The rows of `ids`' owner this task serves: its own, or a promoted
  // backup's; FailedPrecondition otherwise.
  // The rows of task `owner` if this task serves them: its own, or a
  // promoted backup's.
  absl::StatusOr<SparseShard*> RowsOf(int owner) const;
  absl::StatusOr<SparseShard*> ServingRows(absl::Span<const int64_t> ids, int table) const;
  // Aborted "fenced" once this task no longer serves its own
  // chunks (Fence, or a stream a promoted backup refused).
  absl::Status FencedLocked() const ABSL_SHARED_LOCKS_REQUIRED(roles_mu_);
  // The task that owns chunk `chunk` (the layout's).
  int OwnerOf(int chunk) const {
    const auto it = owner_of_.find(chunk);
    return it == owner_of_.end() ? identity_.ps_index : it->second;
  }
  // Refusal of a sender of `owner`'s updates at `epoch`: OK to follow.
  absl::Status CheckSender(int owner, int64_t epoch) const;
  // A rejoin: this task follows `owner`'s chunks and rows from the task
  // serving them at `epoch` (InstallChunkCopy); the streams of what it
  // served of them are retired.
  absl::Status FollowFrom(int owner, int64_t epoch);
  // The shards of `owner` this task holds: its own, or backups.
  std::vector<ParameterShard*> ShardsOf(int owner) const;
  // The status of `owner`'s `shards` and `rows` (may be null) here.
  PsStatus StatusOf(int owner, const std::vector<ParameterShard*>& shards,
                    const SparseShard* rows) const;
  // The task's checkpoint (its chunks and rows), for one save or restore.
  TaskCheckpoint Checkpoint() const;
  // The path of checkpoint model.ckpt-<step> (its index file's if `index`)
  // in the task's job dir; FailedPrecondition if it was given none.
  absl::StatusOr<std::string> CheckpointInJobDir(int64_t step, bool index) const;

  const PsIdentity identity_;
  const std::vector<std::unique_ptr<ParameterShard>> shards_;
  const std::vector<ParameterShard*> shard_ptrs_;
  const std::vector<std::unique_ptr<ParameterShard>> backups_;
  std::map<int, int> owner_of_;  // backup chunk -> the task that owns it
  // A model with tables: the backups of other tasks' rows by partition.
  std::map<int, std::unique_ptr<SparseShard>> backup_rows_;
  ReplicaLinks* links_ = nullptr;
  int copies_ = 1;
  // Who serves what (failovers), and the streams of what this task serves.
  mutable absl::Mutex roles_mu_;
  std::map<int, int64_t> epochs_ ABSL_GUARDED_BY(roles_mu_);  // owner -> epoch (absent: 1)
  std::set<int> promoted_ ABSL_GUARDED_BY(roles_mu_);         // owners served here
  int64_t fenced_epoch_ ABSL_GUARDED_BY(roles_mu_) = 0;       // Fence's (0: not fenced)
  // Rejoined as a backup of its own chunks and rows (served elsewhere at
  // epochs_[ps_index]): it refuses the replicas' requests as fenced.
  bool follows_own_ ABSL_GUARDED_BY(roles_mu_) = false;
  // Drops of the streams retired by restores (the count never goes back).
  int64_t retired_drops_ ABSL_GUARDED_BY(roles_mu_) = 0;
  std::vector<int> retired_dropped_tasks_ ABSL_GUARDED_BY(roles_mu_);  // one per drop
  // When Status last logged answers its streams held too long.
  mutable absl::Time stalls_logged_ ABSL_GUARDED_BY(stalls_mu_) = absl::InfinitePast();
  mutable absl::Mutex stalls_mu_;
  // Served chunk -> the stream of its updates to its backups (copies > 1).
  std::map<int, std::unique_ptr<UpdateStream<ChunkUpdate>>> streams_ ABSL_GUARDED_BY(roles_mu_);
  // Served partition -> the stream of its rows' updates.
  std::map<int, std::unique_ptr<UpdateStream<RowsUpdate>>> rows_streams_ ABSL_GUARDED_BY(roles_mu_);
  // Streams of the roles before the last restore: no longer fed, kept
  // until the task ends (a push may still hold one).
  std::vector<std::unique_ptr<UpdateStream<ChunkUpdate>>> retired_streams_
      ABSL_GUARDED_BY(roles_mu_);
  std::vector<std::unique_ptr<UpdateStream<RowsUpdate>>> retired_rows_streams_
      ABSL_GUARDED_BY(roles_mu_);
  // Where this task's own chunks' (by chunk) and rows' updates go when no
  // failover happened.
  std::vector<std::vector<int>> own_backups_of_;
  std::vector<int> own_row_backups_;
  // InstallRowsCopy's pieces so far, by partition.
  absl::Mutex pieces_mu_;
  std::map<int, SparseShard::BackupCopy> rows_pieces_ ABSL_GUARDED_BY(pieces_mu_);
  // Every engine's step rule: the chunks', then the rows' (if any).
  std::vector<StepBarrier*> barriers_;
  Env* const env_;
  std::atomic<bool> preempting_{false};
  std::atomic<int64_t> departures_{0};
  mutable absl::Mutex mu_;
  double loss_sum_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t loss_batches_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t examples_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<bool> told_done_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> input_ended_ ABSL_GUARDED_BY(mu_);
  // A restore alone; saves share it: after a failover the chief asks a task
  // for its own chunks' file and a failed primary's at once, and a sync save
  // waiting behind the other would copy its chunks a step late.
  absl::Mutex file_mu_;
  std::unique_ptr<SparseShard> sparse_;  // set by Create for a model with tables
  std::string embedding_optimizer_;      // the job's, named in rows files
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_PS_TASK_H_
