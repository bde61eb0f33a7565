// PsTask's replication (issue 55): the streams of a primary's updates to
// its backups, a backup's side, failovers and saves for another owner.

#include <algorithm>
#include <iterator>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "ps/ps_task.h"
#include "ps_protocol/shard_layout.h"

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

// The link of a primary's stream to the backup of chunk `chunk` on `task`.
UpdateStream<ChunkUpdate>::Link ChunkLink(ReplicaLinks* links, int task, int chunk, int64_t epoch,
                                          ParameterShard* shard) {
  return [links, task, chunk, epoch, shard](const ChunkUpdate& update) {
    return SendUnlessObsolete(
        update, [shard] { return shard->generation(); },
        [&] { return links->SendChunkUpdate(task, chunk, epoch, update); });
  };
}

// The same for the rows of `owner` on `task`.
UpdateStream<RowsUpdate>::Link RowsLink(ReplicaLinks* links, int task, int owner, int64_t epoch,
                                        SparseShard* rows) {
  return [links, task, owner, epoch, rows](const RowsUpdate& update) {
    return SendUnlessObsolete(
        update, [rows] { return rows->barrier().generation(); },
        [&] { return links->SendRowsUpdate(task, owner, epoch, update); });
  };
}

// A copy of another generation than the values a task holds was taken
// before a restore that reached this task since (every copy is restored
// alike): refused. An engine with no values yet (a restarted task) takes
// any.
absl::Status CheckCopyGeneration(bool initialized, int64_t have, int64_t copy,
                                 const std::string& what) {
  if (!initialized || have == copy) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "a copy of ", what, " of generation ", copy, " reached a task that holds generation ", have,
      ": it was taken before a restore (nothing was installed)"));
}

absl::Status NotReplicated(int ps) {
  return absl::FailedPreconditionError(
      absl::StrCat("ps ", ps, " is not replicated (ps_replication 1): it takes no copies"));
}

}  // namespace

std::vector<SparseShard::BackupCopy> RowsCopyPieces(const SparseShard::BackupCopy& copy,
                                                    size_t rows_per_piece) {
  rows_per_piece = std::max<size_t>(rows_per_piece, 1);
  std::vector<SparseShard::BackupCopy> pieces;
  SparseShard::BackupCopy first = copy;
  first.rows.clear();
  pieces.push_back(std::move(first));
  for (size_t k = 0; k < copy.rows.size(); ++k) {
    if (pieces.back().rows.size() >= rows_per_piece) pieces.emplace_back();
    pieces.back().rows.push_back(copy.rows[k]);
  }
  return pieces;
}

void PsTask::StartStreams(int owner, int64_t epoch, const std::vector<std::vector<int>>& tasks_of,
                          const std::vector<int>& row_tasks, Retired* retired) {
  // What served these before (a second promotion) stops first.
  Retired replaced;
  RetireStreamsOfLocked(owner, retired != nullptr ? retired : &replaced);
  SparseShard* rows = owner == identity_.ps_index ? sparse_.get() : backup_rows(owner);
  if (rows != nullptr) {
    // Even with no backup now: one can rejoin it (AddBackup).
    std::vector<UpdateStream<RowsUpdate>::Link> to;
    for (int task : row_tasks) to.push_back(RowsLink(links_, task, owner, epoch, rows));
    auto stream = std::make_unique<UpdateStream<RowsUpdate>>(
        absl::StrCat("ps ", identity_.ps_index, " rows of task ", owner), std::move(to), row_tasks,
        /*held_after_drop=*/true);
    UpdateStream<RowsUpdate>* s = stream.get();
    rows_streams_[owner] = std::move(stream);
    rows->SetUpdateObserver([s](RowsUpdate update) { s->Enqueue(std::move(update)); });
  }
  for (ParameterShard* shard : ShardsOf(owner)) {
    const int chunk = shard->options().chunk;
    const std::vector<int> tasks =
        chunk < static_cast<int>(tasks_of.size()) ? tasks_of[chunk] : std::vector<int>();
    std::vector<UpdateStream<ChunkUpdate>::Link> to;
    for (int task : tasks) to.push_back(ChunkLink(links_, task, chunk, epoch, shard));
    auto stream = std::make_unique<UpdateStream<ChunkUpdate>>(
        absl::StrCat("ps ", identity_.ps_index, " chunk ", chunk), std::move(to), tasks,
        /*held_after_drop=*/true);
    UpdateStream<ChunkUpdate>* s = stream.get();
    streams_[chunk] = std::move(stream);
    shard->SetUpdateObserver([s](ChunkUpdate update) { s->Enqueue(std::move(update)); });
  }
  // Without a caller to end them (none replace anything but a promotion's).
  CHECK(retired != nullptr || (replaced.chunks.empty() && replaced.rows.empty()))
      << "streams replaced with no one to end them";
}

std::vector<ParameterShard*> PsTask::ShardsOf(int owner) const {
  if (owner == identity_.ps_index) return shard_ptrs_;
  std::vector<ParameterShard*> shards;
  for (const auto& b : backups_) {
    if (owner_of_.at(b->options().chunk) == owner) shards.push_back(b.get());
  }
  return shards;
}

void PsTask::RetireStreamsOfLocked(int owner, Retired* retired) {
  for (ParameterShard* shard : ShardsOf(owner)) {
    const auto it = streams_.find(shard->options().chunk);
    if (it == streams_.end()) continue;
    shard->SetUpdateObserver(nullptr);
    RetireDropsLocked(*it->second);
    retired->chunks.push_back(it->second.get());
    retired_streams_.push_back(std::move(it->second));
    streams_.erase(it);
  }
  if (const auto it = rows_streams_.find(owner); it != rows_streams_.end()) {
    SparseShard* rows = owner == identity_.ps_index ? sparse_.get() : backup_rows(owner);
    if (rows != nullptr) rows->SetUpdateObserver(nullptr);
    RetireDropsLocked(*it->second);
    retired->rows.push_back(it->second.get());
    retired_rows_streams_.push_back(std::move(it->second));
    rows_streams_.erase(it);
  }
}

void PsTask::EndStreams(const Retired& retired, const absl::Status& why) {
  for (auto* stream : retired.chunks) stream->Retire(why);
  for (auto* stream : retired.rows) stream->Retire(why);
}

void PsTask::ResetRoles() {
  std::vector<ParameterShard*> all = shard_ptrs_;
  for (const auto& b : backups_) all.push_back(b.get());
  // The old streams are retired (their held answers fail) once roles_mu_ is
  // released, for an answer calls back into this task; they are kept until
  // the task ends (a push may hold one).
  Retired retired;
  {
    absl::MutexLock lock(&roles_mu_);
    // No update reaches the old streams from here on.
    for (ParameterShard* shard : all) shard->SetUpdateObserver(nullptr);
    if (sparse_ != nullptr) sparse_->SetUpdateObserver(nullptr);
    for (auto& [partition, rows] : backup_rows_) rows->SetUpdateObserver(nullptr);
    for (auto& [chunk, stream] : streams_) {
      RetireDropsLocked(*stream);
      retired.chunks.push_back(stream.get());
      retired_streams_.push_back(std::move(stream));
    }
    for (auto& [partition, stream] : rows_streams_) {
      RetireDropsLocked(*stream);
      retired.rows.push_back(stream.get());
      retired_rows_streams_.push_back(std::move(stream));
    }
    streams_.clear();
    rows_streams_.clear();
    if (!promoted_.empty() || follows_own_) {
      LOG(INFO) << "ps " << identity_.ps_index << " serves only its own chunks again (restored)";
    }
    promoted_.clear();
    epochs_.clear();
    fenced_epoch_ = 0;
    follows_own_ = false;
    if (links_ != nullptr) links_->Reset();
    StartStreams(identity_.ps_index, /*epoch=*/1, own_backups_of_, own_row_backups_);
  }
  EndStreams(retired, absl::AbortedError(absl::StrCat("ps ", identity_.ps_index,
                                                      " was restored from a checkpoint: the update "
                                                      "was rolled back")));
}

absl::Status PsTask::Promote(int owner, int64_t epoch, const std::vector<int>& backups) {
  const bool own = owner == identity_.ps_index;
  bool holds = own || backup_rows_.contains(owner);
  std::vector<std::vector<int>> tasks_of(own_backups_of_.size());
  for (ParameterShard* shard : ShardsOf(owner)) {
    holds = true;
    const int chunk = shard->options().chunk;
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
  Retired replaced;
  {
    absl::MutexLock lock(&roles_mu_);
    const auto known = epochs_.find(owner);
    const int64_t current = known == epochs_.end() ? 1 : known->second;
    // Its own chunks: once it follows them (a rejoin), a failover of their
    // server hands them back to it.
    const bool serving = own ? !follows_own_ : promoted_.contains(owner);
    if (own && serving && epoch <= current) {
      return absl::FailedPreconditionError(
          absl::StrCat("ps task ", identity_.ps_index, " serves its own chunks (epoch ", current,
                       "); a promotion of them needs a later epoch, not ", epoch));
    }
    if (epoch < current || (epoch == current && !serving)) {
      return absl::FailedPreconditionError(
          absl::StrCat("ps task ", identity_.ps_index, " knows task ", owner, "'s chunks at epoch ",
                       current, "; a promotion needs a later one, not ", epoch));
    }
    if (serving && epoch == current) return absl::OkStatus();
    epochs_[owner] = epoch;
    if (own) {
      follows_own_ = false;
      fenced_epoch_ = 0;
    } else {
      promoted_.insert(owner);
    }
    if (links_ != nullptr) StartStreams(owner, epoch, tasks_of, backups, &replaced);
  }
  EndStreams(replaced, absl::AbortedError(absl::StrCat("fenced: ps ", identity_.ps_index,
                                                       " serves the chunks of ps ", owner,
                                                       " at epoch ", epoch,
                                                       " now; an update of the epoch before is not "
                                                       "acknowledged")));
  LOG(WARNING) << "ps " << identity_.ps_index << " serves the chunks and rows of ps " << owner
               << " from epoch " << epoch << " (a failover)"
               << (backups.empty()
                       ? "; they have no other copy until one rejoins"
                       : absl::StrCat("; their updates go to ", absl::StrJoin(backups, ", ")));
  return absl::OkStatus();
}

absl::Status PsTask::AddBackup(int owner, int task, absl::Duration timeout) {
  const std::vector<int> holders = ReplicaTasks(owner, identity_.num_ps, copies_);
  if (links_ == nullptr || copies_ < 2 || task == identity_.ps_index ||
      std::find(holders.begin(), holders.end(), task) == holders.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ps task ", task, " holds no copy of the chunks of ps ", owner,
                     " to rejoin with (", copies_, " copies, on ps ", absl::StrJoin(holders, ", "),
                     "; asked of ps ", identity_.ps_index, ")"));
  }
  std::vector<std::pair<ParameterShard*, UpdateStream<ChunkUpdate>*>> chunks;
  SparseShard* rows = nullptr;
  UpdateStream<RowsUpdate>* rows_stream = nullptr;
  int64_t epoch = 1;
  {
    absl::ReaderMutexLock lock(&roles_mu_);
    const bool own = owner == identity_.ps_index;
    if (own ? (follows_own_ || !FencedLocked().ok()) : !promoted_.contains(owner)) {
      return absl::FailedPreconditionError(
          absl::StrCat("ps ", identity_.ps_index, " does not serve the chunks of ps ", owner,
                       ": ask the ps that does to send them to ps ", task));
    }
    if (const auto it = epochs_.find(owner); it != epochs_.end()) epoch = it->second;
    for (ParameterShard* shard : ShardsOf(owner)) {
      const auto it = streams_.find(shard->options().chunk);
      if (it != streams_.end()) chunks.emplace_back(shard, it->second.get());
    }
    if (const auto it = rows_streams_.find(owner); it != rows_streams_.end()) {
      rows = own ? sparse_.get() : backup_rows(owner);
      rows_stream = it->second.get();
    }
  }
  // The streams stay alive (a retired one until the task ends), so the
  // copies travel with roles_mu_ released. What the streams still send the
  // task from before stops first: it would reach the task before its copy.
  for (auto [shard, stream] : chunks) stream->RemoveBackup(task);
  if (rows_stream != nullptr) rows_stream->RemoveBackup(task);
  const absl::Time deadline = absl::Now() + timeout;
  // Each copy is taken while this task still serves `owner` at `epoch` with
  // the same stream (a restore or a failover since would make it another
  // generation's, or another epoch's): roles_mu_ before the engine's lock,
  // as a push takes them.
  const auto still_serving = [&](auto* stream, auto& streams, int key) {
    roles_mu_.AssertReaderHeld();
    const auto it = streams.find(key);
    const auto e = epochs_.find(owner);
    const bool serving = owner == identity_.ps_index ? !follows_own_ && FencedLocked().ok()
                                                     : promoted_.contains(owner);
    if (serving && it != streams.end() && it->second.get() == stream &&
        (e == epochs_.end() ? 1 : e->second) == epoch) {
      return absl::OkStatus();
    }
    return absl::AbortedError(absl::StrCat("ps ", identity_.ps_index,
                                           " no longer serves the chunks of ps ", owner,
                                           " at epoch ", epoch,
                                           " (a restore or a failover "
                                           "since): the rejoin of ps ",
                                           task, " stops"));
  };
  for (const auto& joining : chunks) {
    ParameterShard* shard = joining.first;
    UpdateStream<ChunkUpdate>* stream = joining.second;
    const int chunk = shard->options().chunk;
    absl::StatusOr<ParameterShard::BackupCopy> copy;
    {
      absl::ReaderMutexLock lock(&roles_mu_);
      PSTRAIN_RETURN_IF_ERROR(still_serving(stream, streams_, chunk));
      copy = shard->CopyForBackup(
          [&] { stream->AddJoiningBackup(ChunkLink(links_, task, chunk, epoch, shard), task); });
    }
    if (!copy.ok()) return copy.status();
    const absl::Status sent = links_->SendChunkCopy(task, chunk, epoch, *copy, deadline);
    stream->Joined(task, sent);
    if (!sent.ok()) {
      return absl::Status(sent.code(), absl::StrCat("the copy of chunk ", chunk, " for ps ", task,
                                                    ": ", sent.message()));
    }
  }
  if (rows != nullptr) {
    absl::StatusOr<SparseShard::BackupCopy> copy;
    {
      absl::ReaderMutexLock lock(&roles_mu_);
      PSTRAIN_RETURN_IF_ERROR(still_serving(rows_stream, rows_streams_, owner));
      copy = rows->CopyForBackup(
          [&] { rows_stream->AddJoiningBackup(RowsLink(links_, task, owner, epoch, rows), task); });
    }
    if (!copy.ok()) return copy.status();
    const absl::Status sent = links_->SendRowsCopy(task, owner, epoch, *copy, deadline);
    rows_stream->Joined(task, sent);
    if (!sent.ok()) {
      return absl::Status(sent.code(), absl::StrCat("the copy of the rows of ps ", owner,
                                                    " for ps ", task, ": ", sent.message()));
    }
  }
  for (auto [shard, stream] : chunks) {
    PSTRAIN_RETURN_IF_ERROR(stream->WaitCaughtUp(task, deadline));
  }
  if (rows_stream != nullptr) PSTRAIN_RETURN_IF_ERROR(rows_stream->WaitCaughtUp(task, deadline));
  LOG(INFO) << "ps " << task << " holds a copy of the chunks and rows of ps " << owner
            << " again (served by ps " << identity_.ps_index << " at epoch " << epoch << ")";
  return absl::OkStatus();
}

absl::Status PsTask::FollowFrom(int owner, int64_t epoch) {
  const bool own = owner == identity_.ps_index;
  Retired retired;
  {
    absl::MutexLock lock(&roles_mu_);
    const auto it = epochs_.find(owner);
    const int64_t current = it == epochs_.end() ? 1 : it->second;
    const bool serving = own ? !follows_own_ && fenced_epoch_ == 0 : promoted_.contains(owner);
    if (epoch < current || (own && epoch < 2) || (serving && epoch == current)) {
      return absl::FailedPreconditionError(
          absl::StrCat("ps ", identity_.ps_index, " knows the chunks of ps ", owner, " at epoch ",
                       current, serving ? " and serves them" : "",
                       ": a copy from their server at epoch ", epoch, " is not taken"));
    }
    epochs_[owner] = epoch;
    if (own) {
      if (!follows_own_) {
        LOG(WARNING) << "ps " << identity_.ps_index << " follows its own chunks and rows as a "
                     << "backup: they are served by another ps since epoch " << epoch;
      }
      follows_own_ = true;
    } else {
      promoted_.erase(owner);
    }
    RetireStreamsOfLocked(owner, &retired);
  }
  EndStreams(retired, absl::AbortedError(absl::StrCat(
                          "fenced: ps ", identity_.ps_index, " follows the chunks of ps ", owner,
                          " from the ps serving them at epoch ", epoch, "; ask there")));
  return absl::OkStatus();
}

absl::Status PsTask::InstallChunkCopy(int chunk, int64_t epoch,
                                      const ParameterShard::BackupCopy& copy) {
  if (copies_ < 2) return NotReplicated(identity_.ps_index);
  absl::StatusOr<ParameterShard*> shard = FindShard(chunk);
  if (!shard.ok()) return shard.status();
  PSTRAIN_RETURN_IF_ERROR(CheckCopyGeneration((*shard)->GetStats().initialized,
                                              (*shard)->generation(), copy.progress.generation,
                                              absl::StrCat("chunk ", chunk)));
  PSTRAIN_RETURN_IF_ERROR(FollowFrom(OwnerOf(chunk), epoch));
  return (*shard)->InstallCopy(copy);
}

absl::Status PsTask::InstallRowsCopy(int partition, int64_t epoch, SparseShard::BackupCopy piece,
                                     int index, bool last) {
  if (copies_ < 2) return NotReplicated(identity_.ps_index);
  SparseShard* rows = partition == identity_.ps_index ? sparse_.get() : backup_rows(partition);
  if (rows == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("ps task ", identity_.ps_index, " holds no copy of the rows of ps ", partition,
                     "; check that every process uses the same cluster, model and ps_replication"));
  }
  SparseShard::BackupCopy whole;
  {
    absl::MutexLock lock(&pieces_mu_);
    auto it = rows_pieces_.find(partition);
    if (index == 0) {
      // A new copy (one cut short before is dropped).
      rows_pieces_[partition] = std::move(piece);
      it = rows_pieces_.find(partition);
    } else if (it == rows_pieces_.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "piece ", index, " of a copy of the rows of ps ", partition, " came without its first"));
    } else {
      std::move(piece.rows.begin(), piece.rows.end(), std::back_inserter(it->second.rows));
    }
    if (!last) return absl::OkStatus();
    whole = std::move(it->second);
    rows_pieces_.erase(it);
  }
  PSTRAIN_RETURN_IF_ERROR(
      CheckCopyGeneration(rows->barrier().GetStats().initialized, rows->barrier().generation(),
                          whole.progress.generation, absl::StrCat("the rows of ps ", partition)));
  PSTRAIN_RETURN_IF_ERROR(FollowFrom(partition, epoch));
  return rows->InstallCopy(whole);
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

bool PsTask::serves_any() const {
  absl::ReaderMutexLock lock(&roles_mu_);
  return FencedLocked().ok() || !promoted_.empty();
}

std::vector<int> PsTask::backup_owners() const {
  std::set<int> owners;
  for (const auto& [chunk, owner] : owner_of_) owners.insert(owner);
  for (const auto& [partition, rows] : backup_rows_) owners.insert(partition);
  return std::vector<int>(owners.begin(), owners.end());
}

absl::Status PsTask::FencedLocked() const {
  if (follows_own_) {
    const auto it = epochs_.find(identity_.ps_index);
    return absl::AbortedError(absl::StrCat("fenced: ps ", identity_.ps_index,
                                           "'s chunks and rows are served by another ps since "
                                           "epoch ",
                                           it == epochs_.end() ? 1 : it->second,
                                           " (it holds a copy); ask there"));
  }
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
    // A drop since the status the chief read: at its next. More than there
    // are: counted before this task restarted, so not these.
    if (drops != now) return;
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
  const bool serving = owner == identity_.ps_index ? !follows_own_ : promoted_.contains(owner);
  if (epoch < current || (serving && epoch == current)) {
    return absl::AbortedError(
        absl::StrCat("fenced: ps ", identity_.ps_index, " serves the chunks and rows of ps ", owner,
                     " since epoch ", current, "; an update of epoch ", epoch, " is not taken"));
  }
  if (serving) {
    // A later epoch than it knows while it serves them: it restarted (or
    // missed a failover) and holds no copy in step. Not a fence of the
    // sender, whose stream drops it until it rejoins.
    return absl::FailedPreconditionError(absl::StrCat(
        "ps ", identity_.ps_index, " knows the chunks of ps ", owner, " at epoch ", current,
        ", not ", epoch, " (it restarted?): it needs a fresh copy (a rejoin)"));
  }
  return absl::OkStatus();
}

absl::Status PsTask::FollowChunk(int chunk, const ChunkUpdate& update, int64_t epoch) {
  for (const auto& b : backups_) {
    if (b->options().chunk != chunk) continue;
    PSTRAIN_RETURN_IF_ERROR(CheckSender(owner_of_.at(chunk), epoch));
    return b->ApplyReplicated(update);
  }
  for (ParameterShard* own : shard_ptrs_) {
    // Its own chunk, after a rejoin (served elsewhere): CheckSender refuses
    // it while this task serves it.
    if (own->options().chunk != chunk || copies_ < 2) continue;
    PSTRAIN_RETURN_IF_ERROR(CheckSender(identity_.ps_index, epoch));
    return own->ApplyReplicated(update);
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
  if (partition == identity_.ps_index && sparse_ != nullptr && copies_ > 1) {
    PSTRAIN_RETURN_IF_ERROR(CheckSender(partition, epoch));
    return sparse_->ApplyReplicated(update);
  }
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
