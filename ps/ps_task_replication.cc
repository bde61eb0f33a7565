// PsTask's replication (issue 55): the streams of a primary's updates to
// its backups, a backup's side, failovers and saves for another owner.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "ps/ps_task.h"

namespace pstrain {
namespace {

// An update of a generation the engine no longer holds (a restore or an
// initialization came after it, on the backups too) is not sent, and a
// backup's refusal of it once the engine moved on (the backup is at the new
// generation already) is no failure: the backup stays in the stream.
// `generation` reads the engine's now; `send` sends the update.
template <class Update>
absl::Status SendUnlessObsolete(const Update& update, absl::FunctionRef<int64_t()> generation,
                                absl::FunctionRef<absl::Status()> send) {
  if (update.applied.generation != generation()) return absl::OkStatus();
  absl::Status sent = send();
  if (absl::IsFailedPrecondition(sent) && update.applied.generation != generation()) {
    return absl::OkStatus();
  }
  return sent;
}

}  // namespace

void PsTask::StartStreams(int owner, int64_t epoch, const std::vector<std::vector<int>>& tasks_of,
                          const std::vector<int>& row_tasks) {
  ReplicaLinks* links = links_;
  SparseShard* rows = owner == identity_.ps_index ? sparse_.get() : backup_rows(owner);
  if (rows != nullptr && !row_tasks.empty()) {
    std::vector<UpdateStream<RowsUpdate>::Link> to;
    for (int task : row_tasks) {
      to.push_back([links, task, owner, epoch, rows](const RowsUpdate& update) {
        return SendUnlessObsolete(
            update, [rows] { return rows->barrier().generation(); },
            [&] { return links->SendRowsUpdate(task, owner, epoch, update); });
      });
    }
    auto stream = std::make_unique<UpdateStream<RowsUpdate>>(
        absl::StrCat("ps ", identity_.ps_index, " rows of task ", owner), std::move(to), row_tasks,
        /*held_after_drop=*/true);
    UpdateStream<RowsUpdate>* s = stream.get();
    rows_streams_[owner] = std::move(stream);
    rows->SetUpdateObserver([s](RowsUpdate update) { s->Enqueue(std::move(update)); });
  }
  std::vector<ParameterShard*> served;
  if (owner == identity_.ps_index) {
    served = shard_ptrs_;
  } else {
    for (const auto& b : backups_) {
      if (owner_of_.at(b->options().chunk) == owner) served.push_back(b.get());
    }
  }
  for (ParameterShard* shard : served) {
    const int chunk = shard->options().chunk;
    std::vector<UpdateStream<ChunkUpdate>::Link> to;
    for (int task : tasks_of[chunk]) {
      to.push_back([links, task, chunk, epoch, shard](const ChunkUpdate& update) {
        return SendUnlessObsolete(
            update, [shard] { return shard->generation(); },
            [&] { return links->SendChunkUpdate(task, chunk, epoch, update); });
      });
    }
    if (to.empty()) continue;
    auto stream = std::make_unique<UpdateStream<ChunkUpdate>>(
        absl::StrCat("ps ", identity_.ps_index, " chunk ", chunk), std::move(to), tasks_of[chunk],
        /*held_after_drop=*/true);
    UpdateStream<ChunkUpdate>* s = stream.get();
    streams_[chunk] = std::move(stream);
    shard->SetUpdateObserver([s](ChunkUpdate update) { s->Enqueue(std::move(update)); });
  }
}

void PsTask::ResetRoles() {
  std::vector<ParameterShard*> all = shard_ptrs_;
  for (const auto& b : backups_) all.push_back(b.get());
  // The old streams are retired (their held answers fail) once roles_mu_ is
  // released, for an answer calls back into this task; they are kept until
  // the task ends (a push may hold one).
  std::vector<UpdateStream<ChunkUpdate>*> retire;
  std::vector<UpdateStream<RowsUpdate>*> retire_rows;
  {
    absl::MutexLock lock(&roles_mu_);
    // No update reaches the old streams from here on.
    for (ParameterShard* shard : all) shard->SetUpdateObserver(nullptr);
    if (sparse_ != nullptr) sparse_->SetUpdateObserver(nullptr);
    for (auto& [partition, rows] : backup_rows_) rows->SetUpdateObserver(nullptr);
    for (auto& [chunk, stream] : streams_) {
      retired_drops_ += stream->drops();
      retire.push_back(stream.get());
      retired_streams_.push_back(std::move(stream));
    }
    for (auto& [partition, stream] : rows_streams_) {
      retired_drops_ += stream->drops();
      retire_rows.push_back(stream.get());
      retired_rows_streams_.push_back(std::move(stream));
    }
    streams_.clear();
    rows_streams_.clear();
    if (!promoted_.empty()) {
      LOG(INFO) << "ps " << identity_.ps_index << " serves only its own chunks again (restored)";
    }
    promoted_.clear();
    epochs_.clear();
    fenced_epoch_ = 0;
    if (links_ != nullptr) links_->Reset();
    StartStreams(identity_.ps_index, /*epoch=*/1, own_backups_of_, own_row_backups_);
  }
  const absl::Status rolled_back =
      absl::AbortedError(absl::StrCat("ps ", identity_.ps_index,
                                      " was restored from a checkpoint: the update "
                                      "was rolled back"));
  for (auto* stream : retire) stream->Retire(rolled_back);
  for (auto* stream : retire_rows) stream->Retire(rolled_back);
}

absl::Status PsTask::Promote(int owner, int64_t epoch, const std::vector<int>& backups) {
  bool holds = backup_rows_.contains(owner);
  std::vector<std::vector<int>> tasks_of;
  for (const auto& [chunk, of] : owner_of_) {
    if (of != owner) continue;
    holds = true;
    if (static_cast<int>(tasks_of.size()) <= chunk) tasks_of.resize(chunk + 1);
    tasks_of[chunk] = backups;
  }
  for (int task : backups) {
    if (task < 0 || task >= identity_.num_ps || task == identity_.ps_index || task == owner) {
      return absl::InvalidArgumentError(
          absl::StrCat("a promotion's backups must be other ps tasks in [0, ", identity_.num_ps,
                       "), not ", task, " (ps ", identity_.ps_index, ", owner ", owner, ")"));
    }
  }
  if (!holds) {
    return absl::InvalidArgumentError(absl::StrCat("ps task ", identity_.ps_index,
                                                   " holds no backup of task ", owner,
                                                   "'s chunks or rows to serve"));
  }
  absl::MutexLock lock(&roles_mu_);
  const auto known = epochs_.find(owner);
  const int64_t current = known == epochs_.end() ? 1 : known->second;
  if (epoch < current || (epoch == current && !promoted_.contains(owner))) {
    return absl::FailedPreconditionError(
        absl::StrCat("ps task ", identity_.ps_index, " knows task ", owner, "'s chunks at epoch ",
                     current, "; a promotion needs a later one, not ", epoch));
  }
  if (promoted_.contains(owner) && epoch == current) return absl::OkStatus();
  epochs_[owner] = epoch;
  promoted_.insert(owner);
  if (links_ != nullptr && !backups.empty()) StartStreams(owner, epoch, tasks_of, backups);
  LOG(WARNING) << "ps " << identity_.ps_index << " serves the chunks and rows of ps " << owner
               << " from epoch " << epoch << " (a failover)"
               << (backups.empty()
                       ? "; they have no other copy until one rejoins"
                       : absl::StrCat("; their updates go to ", absl::StrJoin(backups, ", ")));
  return absl::OkStatus();
}

int64_t PsTask::epoch(int owner) const {
  absl::ReaderMutexLock lock(&roles_mu_);
  const auto it = epochs_.find(owner);
  return it == epochs_.end() ? 1 : it->second;
}

bool PsTask::serves(int owner) const {
  absl::ReaderMutexLock lock(&roles_mu_);
  if (owner == identity_.ps_index) return FencedLocked().ok();
  return promoted_.contains(owner);
}

absl::Status PsTask::FencedLocked() const {
  if (fenced_epoch_ > 0) {
    return absl::AbortedError(absl::StrCat("fenced: ps ", identity_.ps_index,
                                           "'s chunks and rows are served by another ps since "
                                           "epoch ",
                                           fenced_epoch_, " (a failover); ask there"));
  }
  for (const auto& [chunk, stream] : streams_) {
    if (owner_of_.contains(chunk)) continue;  // a promoted backup's
    if (absl::Status f = stream->fenced(); !f.ok()) {
      return absl::AbortedError(absl::StrCat("fenced: ps ", identity_.ps_index,
                                             " no longer serves its chunks (", f.message(),
                                             "); ask the ps that does"));
    }
  }
  if (const auto rows = rows_streams_.find(identity_.ps_index); rows != rows_streams_.end()) {
    if (absl::Status f = rows->second->fenced(); !f.ok()) {
      return absl::AbortedError(absl::StrCat("fenced: ps ", identity_.ps_index,
                                             " no longer serves its rows (", f.message(),
                                             "); ask the ps that does"));
    }
  }
  return absl::OkStatus();
}

void PsTask::ConfirmDrops(int64_t drops) {
  // The answers released call back into this task (a PushPull's read): the
  // streams are confirmed outside roles_mu_ (they live as long as the task).
  std::vector<UpdateStream<ChunkUpdate>*> chunks;
  std::vector<UpdateStream<RowsUpdate>*> rows;
  {
    absl::ReaderMutexLock lock(&roles_mu_);
    int64_t now = retired_drops_;
    for (const auto& [chunk, stream] : streams_) now += stream->drops();
    for (const auto& [partition, stream] : rows_streams_) now += stream->drops();
    if (drops < now) return;  // a drop since the status the chief read: at its next
    for (const auto& [chunk, stream] : streams_) chunks.push_back(stream.get());
    for (const auto& [partition, stream] : rows_streams_) rows.push_back(stream.get());
  }
  for (auto* stream : chunks) stream->ConfirmDrops(stream->drops());
  for (auto* stream : rows) stream->ConfirmDrops(stream->drops());
}

absl::Status PsTask::Fence(int64_t epoch) {
  if (epoch < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("a fence needs the epoch of the failover (2 or more), not ", epoch));
  }
  absl::MutexLock lock(&roles_mu_);
  if (fenced_epoch_ == 0) {
    LOG(WARNING) << "ps " << identity_.ps_index << " is fenced: its chunks and rows are served by "
                 << "another ps since epoch " << epoch
                 << " (a failover while it did not answer); it serves nothing until a restore";
  }
  fenced_epoch_ = std::max(fenced_epoch_, epoch);
  return absl::OkStatus();
}

absl::Status PsTask::CheckSender(int owner, int64_t epoch) const {
  absl::ReaderMutexLock lock(&roles_mu_);
  const auto it = epochs_.find(owner);
  const int64_t current = it == epochs_.end() ? 1 : it->second;
  if (promoted_.contains(owner) || epoch < current) {
    return absl::AbortedError(
        absl::StrCat("fenced: ps ", identity_.ps_index, " serves the chunks and rows of ps ", owner,
                     " since epoch ", current, "; an update of epoch ", epoch, " is not taken"));
  }
  return absl::OkStatus();
}

absl::Status PsTask::FollowChunk(int chunk, const ChunkUpdate& update, int64_t epoch) {
  for (const auto& b : backups_) {
    if (b->options().chunk != chunk) continue;
    PSTRAIN_RETURN_IF_ERROR(CheckSender(owner_of_.at(chunk), epoch));
    return b->ApplyReplicated(update);
  }
  return absl::InvalidArgumentError(absl::StrCat("ps task ", identity_.ps_index,
                                                 " holds no backup of chunk ", chunk,
                                                 "; check that every process uses the same "
                                                 "cluster, model and ps_replication"));
}

ParameterShard* PsTask::backup(int chunk) const {
  for (const auto& b : backups_) {
    if (b->options().chunk == chunk) return b.get();
  }
  return nullptr;
}

absl::Status PsTask::FollowRows(int partition, const RowsUpdate& update, int64_t epoch) {
  const auto it = backup_rows_.find(partition);
  if (it == backup_rows_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ps task ", identity_.ps_index, " holds no backup of the rows of task ", partition,
        "; check that every process uses "
        "the same cluster, model and ps_replication"));
  }
  PSTRAIN_RETURN_IF_ERROR(CheckSender(partition, epoch));
  return it->second->ApplyReplicated(update);
}

std::vector<int> PsTask::backup_partitions() const {
  std::vector<int> partitions;
  for (const auto& [partition, rows] : backup_rows_) partitions.push_back(partition);
  return partitions;
}

SparseShard* PsTask::backup_rows(int partition) const {
  const auto it = backup_rows_.find(partition);
  return it == backup_rows_.end() ? nullptr : it->second.get();
}

std::vector<int> PsTask::backup_chunks() const {
  std::vector<int> chunks;
  for (const auto& b : backups_) chunks.push_back(b->options().chunk);
  return chunks;
}

absl::StatusOr<ShardSaved> PsTask::SaveFor(int owner, int64_t step, int64_t global_step,
                                           absl::Duration wait) {
  if (owner == identity_.ps_index) return Save(step, global_step, wait);
  if (!serves(owner)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ps ", identity_.ps_index, " does not serve the chunks of ps ", owner,
        " (no failover moved them here): ask that ps to save them (nothing was written)"));
  }
  if (step < 0 || wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Save needs a checkpoint step >= 0 and wait_ms >= 0, got step ", step,
                     " and wait_ms ", absl::ToInt64Milliseconds(wait), " (nothing was written)"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(const std::string path, CheckpointInJobDir(step, /*index=*/false));
  PsIdentity as_owner = identity_;
  as_owner.ps_index = owner;
  std::vector<ParameterShard*> shards;
  for (const auto& b : backups_) {
    if (owner_of_.at(b->options().chunk) == owner) shards.push_back(b.get());
  }
  absl::ReaderMutexLock file_lock(&file_mu_);  // beside Save's (other files)
  return TaskCheckpoint(env_, as_owner, shards, backup_rows(owner), embedding_optimizer_)
      .Save(path, step, global_step, wait);
}

}  // namespace pstrain
