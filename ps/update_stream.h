#ifndef PSTRAIN_PS_UPDATE_STREAM_H_
#define PSTRAIN_PS_UPDATE_STREAM_H_

// A replicated ps (issue 55): a primary's updates of one engine (a chunk's
// ChunkUpdates, the rows' RowsUpdates) sent to its backups in the order
// applied, and the primary's answers held until every live backup holds
// the update they depend on: an acknowledged push is never lost with the
// primary.
//
// Primary-backup rather than a chain: the primary sends each update to every
// backup itself, so a backup's death costs one link, never the order of the
// others, and a failover needs no chain to be mended. A backup whose link
// fails is dropped from the stream (logged) and no longer waited for: it
// rejoins with a fresh copy of the engine (the generation and sequence
// checks of StepBarrier::CheckFollowLocked refuse anything else). A backup
// that answers ABORTED was promoted in this primary's place (a failover):
// the stream is fenced, and every answer it holds or is asked for fails.
//
// A stream made `held_after_drop` (a job's ps) answers nothing more after a
// backup leaves it until the drop is confirmed (ConfirmDrops): the chief
// must know the backup is out of step before this primary acknowledges an
// update it does not hold, or it could promote that backup and lose it.

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "glog/logging.h"

namespace pstrain {

// Sends updates of type `Update` to backups. Thread-safe.
template <class Update>
class UpdateStream {
 public:
  // Sends one update to one backup and returns once the backup holds it (OK)
  // or cannot (the backup is then dropped). Called on the stream's thread
  // for that backup, in sequence.
  using Link = std::function<absl::Status(const Update&)>;

  // `name` ("chunk 3") appears in logs; `links` are the backups', and
  // `tasks` (if given) the ps task each goes to (dropped_tasks).
  UpdateStream(std::string name, std::vector<Link> links, std::vector<int> tasks = {},
               bool held_after_drop = false)
      : name_(std::move(name)), held_after_drop_(held_after_drop) {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < links.size(); ++i) {
      AddBackupLocked(std::move(links[i]), i < tasks.size() ? tasks[i] : -1);
    }
  }

  // A backup that joins now (a rejoin: it holds a copy of the engine taken
  // under the engine's lock, from which this is called, so no update
  // slips between the copy and the join): it gets every update enqueued
  // from here on, and answers wait for it as for the others.
  void AddBackup(Link link, int task = -1) {
    absl::MutexLock lock(&mu_);
    AddBackupLocked(std::move(link), task);
  }

  // A rejoin over the wire: the backup on ps task `task` gets a fresh copy
  // of the engine, taken under the engine's lock, from which this is called
  // (no update slips between the copy and the join). It is sent every update
  // enqueued from here on once Joined(task, OK) says it holds the copy.
  // Until it has caught up, answers do not wait for it (training goes on
  // while the copy travels); from then on they do, as for every backup. A
  // backup of `task` already in the stream leaves it first (no drop).
  void AddJoiningBackup(Link link, int task) {
    RemoveBackup(task);
    absl::MutexLock lock(&mu_);
    AddBackupLocked(std::move(link), task);
    Backup& b = *backups_.back();
    b.live = false;
    b.joining = true;
  }
  // The backup on ps task `task` leaves the stream, as no drop: answers no
  // longer wait for it (a rejoin is coming, so the chief holds it out of
  // step already). Nothing if it is not in the stream.
  void RemoveBackup(int task) {
    absl::MutexLock lock(&mu_);
    for (auto& b : backups_) {
      if (b->task == task && (b->live || b->joining)) {
        b->live = false;
        b->joining = false;
        b->left = true;
      }
    }
  }
  // The joining backup of `task` holds its copy (`installed` OK: it follows
  // from here), or could not take it (it leaves the stream: no drop, as no
  // answer waited for it).
  void Joined(int task, const absl::Status& installed) {
    absl::MutexLock lock(&mu_);
    Backup* b = JoiningLocked(task);
    if (b == nullptr) return;
    if (installed.ok()) {
      b->ready = true;
    } else {
      b->joining = false;
      b->left = true;
    }
  }
  // Waits until the backup of `task` has caught up (OK: answers wait for it
  // from now on), or it left the stream, the stream stopped (Unavailable),
  // or `deadline` passed or the job ended (DeadlineExceeded: it leaves).
  absl::Status WaitCaughtUp(int task, absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    const auto settled = [this, task]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return stopping_ || ended_ || JoiningLocked(task) == nullptr;
    };
    mu_.AwaitWithDeadline(absl::Condition(&settled), deadline);
    if (Backup* b = JoiningLocked(task); b != nullptr) {
      // It leaves (a backlog that never shrinks would grow without bound);
      // a later rejoin starts again.
      b->joining = false;
      b->left = true;
      return absl::DeadlineExceededError(absl::StrCat(
          name_, ": ps ", task, " had not caught up with the updates since its copy in time",
          ended_ ? " (the job ended)" : ""));
    }
    for (const auto& b : backups_) {
      if (b->task == task && b->live && !stopping_) return absl::OkStatus();
    }
    return absl::UnavailableError(
        absl::StrCat(name_, ": ps ", task, " left the stream before it caught up"));
  }
  ~UpdateStream() {
    std::vector<std::thread*> threads;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      for (auto& b : backups_) threads.push_back(&b->thread);
    }
    for (std::thread* t : threads) t->join();
    // Answers still held: their updates may be lost with this primary. The
    // callers' own shutdown (the job's end) makes that moot; say so.
    std::vector<Answer> held;
    {
      absl::MutexLock lock(&mu_);
      for (Waiter& w : waiters_) held.push_back(std::move(w.fn));
      waiters_.clear();
    }
    if (!held.empty()) {
      LOG(WARNING) << name_ << ": " << held.size()
                   << " answers released unacknowledged as the stream stops";
    }
    for (auto& fn : held) fn(absl::OkStatus());
  }
  UpdateStream(const UpdateStream&) = delete;
  UpdateStream& operator=(const UpdateStream&) = delete;

  // Queues `update` for every live backup (cheap: called under the
  // engine's lock, in the order applied).
  void Enqueue(Update update) {
    absl::MutexLock lock(&mu_);
    ++enqueued_;
    bool any = false;
    for (const auto& b : backups_) any = any || b->live || b->joining;
    if (any) queue_.push_back(std::make_shared<const Update>(std::move(update)));
  }

  // Calls `fn` with OK once every update enqueued so far is held by every
  // live backup (at once when it already is), on this thread or a sender's;
  // with the Aborted error of a backup that fenced this primary (it serves
  // the engine now: what it does not hold must not be acknowledged), at
  // once or when that happens.
  using Answer = std::function<void(absl::Status)>;
  void WhenAcknowledged(Answer fn) {
    absl::Status fenced;
    {
      absl::MutexLock lock(&mu_);
      fenced = fenced_;
      if (fenced.ok() && !ended_ && (AcknowledgedLocked() < enqueued_ || HeldLocked())) {
        waiters_.push_back({enqueued_, std::move(fn), absl::Now()});
        return;
      }
    }
    fn(fenced);
  }

  // The engine was restored (a rollback): nothing more is sent, and every
  // answer held or asked for from now on gets `why` (an Aborted error: what
  // it acknowledges was rolled back). The threads end by the destructor.
  void Retire(absl::Status why) {
    std::vector<Answer> held;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      if (fenced_.ok()) fenced_ = why;
      for (Waiter& w : waiters_) held.push_back(std::move(w.fn));
      waiters_.clear();
    }
    for (auto& fn : held) fn(why);
  }

  // The job ended: the answers held now, and any asked for later, go at
  // once (what they acknowledge is moot; the chief that would confirm a
  // drop may be gone already). Updates are still sent.
  void EndOfJob() {
    std::vector<Answer> held;
    absl::Status answer;
    {
      absl::MutexLock lock(&mu_);
      ended_ = true;
      for (Waiter& w : waiters_) held.push_back(std::move(w.fn));
      waiters_.clear();
      answer = fenced_;
    }
    for (auto& fn : held) fn(answer);
  }

  // Backups dropped so far (failed links; not a fence), and their tasks.
  int64_t drops() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int64_t>(dropped_.size());
  }
  std::vector<int> dropped_tasks() const {
    absl::MutexLock lock(&mu_);
    return dropped_;
  }
  // The first `drops` drops are known where it matters (the chief marked
  // those backups out of step): answers held for them go.
  void ConfirmDrops(int64_t drops) {
    std::vector<Answer> ready;
    absl::Status answer;
    {
      absl::MutexLock lock(&mu_);
      if (drops <= confirmed_) return;
      confirmed_ = std::min<int64_t>(drops, static_cast<int64_t>(dropped_.size()));
      ready = ReleaseLocked();
      answer = fenced_;
    }
    for (auto& fn : ready) fn(answer);
  }

  // What holds the oldest answer if it has waited `after` or longer (for a
  // log: a step that stalls says why); empty if none has.
  std::string Stalled(absl::Duration after) const {
    absl::MutexLock lock(&mu_);
    if (waiters_.empty()) return "";
    const Waiter& oldest = waiters_.front();
    const absl::Duration waited = absl::Now() - oldest.since;
    if (waited < after) return "";
    std::vector<std::string> why;
    if (HeldLocked()) {
      why.push_back(absl::StrCat("the chief to confirm a drop (", confirmed_, " of ",
                                 dropped_.size(), " confirmed)"));
    }
    for (const auto& b : backups_) {
      if (b->live && b->acked < oldest.sequence) {
        why.push_back(absl::StrCat("ps ", b->task, " to acknowledge update ", oldest.sequence,
                                   " (it holds ", b->acked, ")"));
      }
    }
    return absl::StrCat(name_, ": ", waiters_.size(), " answer(s) held for ",
                        absl::FormatDuration(absl::Trunc(waited, absl::Seconds(1))),
                        ", waiting for ",
                        why.empty() ? "nothing (a release was missed)" : absl::StrJoin(why, "; "),
                        "; ", enqueued_, " updates enqueued");
  }

  // OK, or the Aborted error of the backup that fenced this primary.
  absl::Status fenced() const {
    absl::MutexLock lock(&mu_);
    return fenced_;
  }

  // Backups still in the stream.
  int live_backups() const {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const auto& b : backups_) n += b->live;
    return n;
  }
  // How many of the updates enqueued every live backup holds. (The stream
  // counts them itself: an engine's sequence starts again at every
  // initialization or restore.)
  int64_t acknowledged() const {
    absl::MutexLock lock(&mu_);
    return AcknowledgedLocked();
  }

 private:
  struct Backup {
    Link link;
    std::thread thread;
    int index = 0;      // for logs
    int task = -1;      // the ps task it goes to (-1: not said)
    int64_t acked = 0;  // updates held, counted from the stream's start
    size_t next = 0;    // index into queue_ (from queue_base_) of the next to send
    bool live = true;
    // A rejoin (AddJoiningBackup): not live until it caught up; sends once
    // `ready` (its copy installed). `left`: replaced or failed to join.
    bool joining = false;
    bool ready = false;
    bool left = false;
  };

  Backup* JoiningLocked(int task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto& b : backups_) {
      if (b->task == task && b->joining) return b.get();
    }
    return nullptr;
  }
  struct Waiter {
    int64_t sequence;
    Answer fn;
    absl::Time since;  // when it began to wait
  };

  bool HeldLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return held_after_drop_ && confirmed_ < static_cast<int64_t>(dropped_.size());
  }

  int64_t AcknowledgedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int64_t acked = enqueued_;
    for (const auto& b : backups_) {
      if (b->live) acked = std::min(acked, b->acked);
    }
    return acked;
  }

  // Releases the waiters whose updates are acknowledged (all of them, to
  // fail, once fenced), and the queue's front every live backup has sent.
  std::vector<Answer> ReleaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int64_t acked = AcknowledgedLocked();
    std::vector<Answer> ready;
    std::deque<Waiter> waiting;
    // A drop not yet confirmed holds every answer (not a fence's failures).
    const bool held = fenced_.ok() && HeldLocked();
    for (Waiter& w : waiters_) {
      if (!fenced_.ok() || (!held && w.sequence <= acked)) {
        ready.push_back(std::move(w.fn));
      } else {
        waiting.push_back(std::move(w));
      }
    }
    waiters_ = std::move(waiting);
    size_t sent = queue_.size();
    for (const auto& b : backups_) {
      if (b->live || b->joining) sent = std::min(sent, b->next);
    }
    for (size_t k = 0; k < sent; ++k) queue_.pop_front();
    for (auto& b : backups_) b->next = b->next >= sent ? b->next - sent : 0;
    return ready;
  }

  void AddBackupLocked(Link link, int task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto backup = std::make_unique<Backup>();
    Backup* b = backup.get();
    b->link = std::move(link);
    b->task = task;
    b->index = static_cast<int>(backups_.size());
    b->acked = enqueued_;
    b->next = queue_.size();
    backups_.push_back(std::move(backup));
    b->thread = std::thread([this, b] { SendLoop(*b); });
  }

  void SendLoop(Backup& b) {
    const int index = b.index;
    for (;;) {
      std::shared_ptr<const Update> update;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this, &b]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return stopping_ || b.left || (b.joining && b.ready && b.next == queue_.size()) ||
                 ((b.live || (b.joining && b.ready)) && b.next < queue_.size());
        };
        mu_.Await(absl::Condition(&ready));
        if (stopping_ || b.left) return;
        if (b.joining && b.next == queue_.size()) {
          // Caught up: from here on answers wait for it.
          b.joining = false;
          b.live = true;
          LOG(INFO) << name_ << ": ps " << b.task << " rejoined as a backup (caught up)";
          continue;
        }
        update = queue_[b.next];
      }
      const absl::Status sent = b.link(*update);
      std::vector<Answer> ready;
      absl::Status answer;
      bool stop = false;
      {
        absl::MutexLock lock(&mu_);
        if (b.left) {
          // Replaced by a newer join of its task while this update was out.
        } else if (sent.ok()) {
          ++b.acked;
          ++b.next;
        } else if (b.joining) {
          LOG(WARNING) << name_ << ": ps " << b.task << " did not take update "
                       << update->applied.sequence << " while it rejoined (" << sent
                       << "); it leaves the stream";
          b.joining = false;
          b.left = true;
        } else if (absl::IsAborted(sent)) {
          LOG(WARNING) << name_ << ": fenced by backup " << index << " (" << sent
                       << "): this primary no longer serves it; its unacknowledged answers fail";
          if (fenced_.ok()) fenced_ = sent;
          b.live = false;
        } else {
          LOG(WARNING) << name_ << ": backup " << index << " did not take update "
                       << update->applied.sequence << " (" << sent
                       << "); it leaves the stream until it rejoins with a fresh copy"
                       << (held_after_drop_ ? "; answers wait until the chief knows" : "");
          b.live = false;
          dropped_.push_back(b.task);
        }
        stop = !sent.ok() || b.left;
        ready = ReleaseLocked();
        answer = fenced_;
      }
      for (auto& fn : ready) fn(answer);
      if (stop) return;
    }
  }

  const std::string name_;
  mutable absl::Mutex mu_;
  // The Backups stay where they are; the vector and their fields are under
  // mu_ (a sender reads its own link, which never changes, without it).
  std::vector<std::unique_ptr<Backup>> backups_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<const Update>> queue_ ABSL_GUARDED_BY(mu_);
  int64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;  // updates, counted from the stream's start
  std::deque<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status fenced_ ABSL_GUARDED_BY(mu_);
  const bool held_after_drop_;
  std::vector<int> dropped_ ABSL_GUARDED_BY(mu_);  // the tasks of the backups dropped
  int64_t confirmed_ ABSL_GUARDED_BY(mu_) = 0;     // drops confirmed (ConfirmDrops)
  bool ended_ ABSL_GUARDED_BY(mu_) = false;        // EndOfJob
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_UPDATE_STREAM_H_
