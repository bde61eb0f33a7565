// PsTask's embedding rows (its SparseShard, and those it serves for another
// task after a failover): pulls and pushes of rows.

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "ps/ps_task.h"
#include "ps_protocol/shard_layout.h"

namespace pstrain {

void PsTask::PullRows(int replica, int64_t step, int64_t generation, std::vector<RowsRef> parts,
                      SparseShard::PullDone done, int owner) {
  if (sparse_ == nullptr) {
    done(absl::FailedPreconditionError(absl::StrCat("ps ", identity_.ps_index, ": model ",
                                                    identity_.model, " has no embedding tables")));
    return;
  }
  if (replica < -1 || replica >= total_replicas()) {
    done(absl::InvalidArgumentError(
        absl::StrCat("replica ", replica, " is not in [-1, ", total_replicas(), ")")));
    return;
  }
  absl::StatusOr<SparseShard*> rows = owner >= 0 ? RowsOf(owner)
                                      : parts.empty()
                                          ? sparse_.get()
                                          : ServingRows(parts.front().ids, parts.front().table);
  if (!rows.ok()) {
    done(rows.status());
    return;
  }
  (*rows)->Pull(replica, step, std::move(parts), std::move(done), generation);
}

absl::StatusOr<SparseShard*> PsTask::RowsOf(int owner) const {
  if (owner == identity_.ps_index) {
    absl::ReaderMutexLock lock(&roles_mu_);
    PSTRAIN_RETURN_IF_ERROR(FencedLocked());
    return sparse_.get();
  }
  const auto it = backup_rows_.find(owner);
  if (it == backup_rows_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ps task ", identity_.ps_index, " holds no copy of the rows of ps ", owner));
  }
  if (!serves(owner)) {
    return absl::FailedPreconditionError(absl::StrCat("ps task ", identity_.ps_index,
                                                      " holds a backup of the rows of ps ", owner,
                                                      "; pulls and pushes go to their primary"));
  }
  return it->second.get();
}

absl::StatusOr<SparseShard*> PsTask::ServingRows(absl::Span<const int64_t> ids, int table) const {
  if (ids.empty() || table < 0 || table >= static_cast<int>(sparse_->layout().size())) {
    return sparse_.get();  // its own: they refuse what is wrong
  }
  const int owner = RowOwner(sparse_->layout()[table].key, ids.front(), identity_.num_ps);
  if (owner == identity_.ps_index) return RowsOf(owner);
  const auto it = backup_rows_.find(owner);
  if (it != backup_rows_.end() && serves(owner)) return it->second.get();
  if (it != backup_rows_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("ps task ", identity_.ps_index,
                                                      " holds a backup of the rows of ps ", owner,
                                                      "; pulls and pushes go to their primary"));
  }
  return sparse_.get();  // not its rows: refused there, naming the id
}

void PsTask::PushRows(int replica, int64_t step, int64_t generation,
                      absl::Span<const ConstRowsRef> parts, RowsPushDone done, int owner) {
  if (sparse_ == nullptr) {
    done(absl::FailedPreconditionError(absl::StrCat("ps ", identity_.ps_index, ": model ",
                                                    identity_.model, " has no embedding tables")));
    return;
  }
  absl::StatusOr<SparseShard*> rows = owner >= 0 ? RowsOf(owner)
                                      : parts.empty()
                                          ? sparse_.get()
                                          : ServingRows(parts.front().ids, parts.front().table);
  if (!rows.ok()) {
    done(rows.status());
    return;
  }
  UpdateStream<RowsUpdate>* backups = nullptr;
  {
    absl::ReaderMutexLock lock(&roles_mu_);
    for (auto& [partition, stream] : rows_streams_) {
      SparseShard* served =
          partition == identity_.ps_index ? sparse_.get() : backup_rows_.at(partition).get();
      if (served == *rows) backups = stream.get();
    }
  }
  if (backups != nullptr) {
    // A fenced primary takes nothing more: a failover moved the rows.
    if (absl::Status fenced = backups->fenced(); !fenced.ok()) {
      done(fenced);
      return;
    }
  }
  if (backups == nullptr) {
    done((*rows)->Push(replica, step, generation, parts));
    return;
  }
  // Answered once the backups hold it (or failed: this primary was fenced).
  // A sync push is in no update until its step is applied: it is answered
  // then, or a failover in between would lose a push its replica saw taken.
  (*rows)->Push(
      replica, step, generation, parts,
      [backups, done = std::move(done)](absl::StatusOr<PushResult> pushed) {
        if (!pushed.ok()) {
          done(pushed);
          return;
        }
        backups->WhenAcknowledged([pushed, done](absl::Status fenced) {
          if (fenced.ok()) {
            done(pushed);
          } else {
            done(fenced);
          }
        });
      },
      /*hold_until_applied=*/shard_ptrs_.front()->options().rule.sync);
}

absl::StatusOr<PushResult> PsTask::PushRows(int replica, int64_t step, int64_t generation,
                                            absl::Span<const ConstRowsRef> parts, int owner) {
  absl::Notification answered;
  absl::StatusOr<PushResult> result;
  PushRows(
      replica, step, generation, parts,
      [&](absl::StatusOr<PushResult> r) {
        result = std::move(r);
        answered.Notify();
      },
      owner);
  answered.WaitForNotification();
  return result;
}

}  // namespace pstrain
