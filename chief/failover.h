#ifndef PSTRAIN_CHIEF_FAILOVER_H_
#define PSTRAIN_CHIEF_FAILOVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ps_protocol/parameter_servers.h"
#include "ps_protocol/ps_status.h"

namespace pstrain {

// The chief's side of a replicated ps (issue 55, docs/reliability.md): who
// serves each task's chunks and rows, which tasks hold copies that are in
// step, and when a failover is due. Pure logic: the time and the ps'
// answers are passed in, so every rule is unit-tested; FailoverWatch runs it.
//
// The rules:
// - A task whose Status has not answered as initialized for `failover_after`
//   while it serves some task's chunks (its own, or a failed primary's)
//   has failed: the next copy of those chunks on the ring that is fresh and
//   answers becomes their server, at the next epoch.
// - A copy is fresh from the job's start (every copy was initialized or
//   restored alike) until a primary drops it from its streams (its status
//   says so; the primary's answers wait until the next probe confirms the
//   drop, after this planner marked it), or its task misses answers for half of
//   `failover_after` (its primaries may have dropped it from their streams,
//   which they do after `failover_after` without an answer) or answers
//   without parameters (it restarted). A stale copy is never promoted; it
//   stays stale until the job is restored from a checkpoint.
// - A stale task that answers rejoins (Decision::rejoins): the server of
//   every task's chunks it holds copies of sends it a fresh copy, and once
//   every one is in and caught up (Rejoined) its copies are fresh again:
//   after a failover, a second failure costs no rollback either. Its own
//   chunks, served elsewhere, it follows as a backup until a failover of
//   their server hands them back.
// - When no fresh copy of some task's chunks answers, they are lost: the job
//   falls back to a rollback to the last checkpoint (Lost), after which
//   every copy is fresh again (Restored).
class FailoverPlanner {
 public:
  // `num_ps` tasks, `copies` of every chunk (ps_replication), at `now`.
  FailoverPlanner(int num_ps, int copies, absl::Duration failover_after, absl::Time now);

  // A failover to make: task `task` serves task `owner`'s chunks and rows at
  // `epoch`, sending their updates to `backups`.
  struct Promotion {
    int owner = 0;
    int task = 0;
    int64_t epoch = 0;
    std::vector<int> backups;
  };
  struct Decision {
    std::vector<Promotion> promotions;
    // Not empty: every copy of some task's chunks is gone (why, for the log
    // line of the rollback that must follow).
    std::string lost;
    // Failed-over primaries that answer again (stopped, not gone), each with
    // the epoch of their failover: to be fenced (ParameterServers::Fence).
    std::vector<std::pair<int, int64_t>> fences;
    // Stale tasks to rejoin, each with the (owner, server) of every task's
    // chunks it holds copies of (ParameterServers::AddBackup). Only in a
    // probe with nothing else to do.
    struct Rejoin {
      int task = 0;
      std::vector<std::pair<int, int>> from;
      int64_t mark = 0;             // for Rejoined
      std::vector<int64_t> epochs;  // of each `from` owner's chunks, for Rejoined
    };
    std::vector<Rejoin> rejoins;
  };

  // One probe of every task (ParameterServers::Probe), in task order.
  Decision Observe(const std::vector<absl::StatusOr<PsStatus>>& probe, absl::Time now);

  // The promotion was made (the task answered OK): routes follow it.
  void Promoted(const Promotion& promotion);
  // Every copy of `rejoin` was sent and caught up: the task's copies are
  // fresh again, unless since the decision a primary dropped the task, it
  // missed an answer, or some owner's chunks moved to another server or
  // epoch (then false: a copy may be out of step; it rejoins again).
  bool Rejoined(const Decision::Rejoin& rejoin, absl::Time now);
  // Every task's copies are fresh.
  bool AllFresh() const;

  // Every task was restored from a checkpoint (the rollback after Lost): each
  // serves its own chunks again at epoch 1, every copy fresh.
  void Restored(absl::Time now);

  // What the next probe confirms of each task's dropped backups: the drops
  // this planner saw, whose backups it marked out of step.
  const std::vector<int64_t>& confirm_drops() const { return drops_seen_; }

  int serving(int owner) const { return server_[owner]; }
  int64_t epoch(int owner) const { return epoch_[owner]; }
  bool fresh(int task) const { return fresh_[task]; }
  // One line: who serves what and which copies are stale, for logs.
  std::string Describe() const;

 private:
  const int num_ps_;
  const int copies_;
  const absl::Duration failover_after_;
  std::vector<absl::Time> last_ok_;  // per task: its last initialized answer
  std::vector<bool> fresh_;          // per task: its copies are in step
  std::vector<int> server_;          // per owner
  std::vector<int64_t> epoch_;       // per owner
  std::vector<int64_t> drops_seen_;  // per task: its streams' drops this planner saw
  std::vector<int64_t> marks_;       // per task: drops of it and missed answers seen
  // Per task: how many of its streams' drops named each backup task.
  std::vector<std::map<int, int>> dropped_seen_;
};

// Runs a FailoverPlanner on a thread of its own: probes every ps each 200
// ms (each answer within half of failover_after), makes the promotions it
// calls for, and when some chunks lost every copy asks for a rollback
// (`roll_back(why, restored)`, once until `restored` is called). Rejoins
// run on a second thread, one at a time (the copies take a while; the
// probes go on meanwhile), each task's tried again no sooner than
// failover_after after a failure.
class FailoverWatch {
 public:
  using RollBack = std::function<void(const std::string& why, std::function<void()> restored)>;
  // `servers` is the watch's own handle.
  FailoverWatch(std::unique_ptr<ParameterServers> servers, int copies,
                absl::Duration failover_after, RollBack roll_back);
  ~FailoverWatch();  // stops the thread

  // Any rollback of the job (Checkpointer::SetRollBackListener): while the
  // ps are restored the watch does nothing (`done` false), then every ps
  // serves its own chunks again, every copy in step (`done` true).
  void NoteRollBack(bool done);

 private:
  void Loop();
  void RejoinLoop();

  const std::unique_ptr<ParameterServers> servers_;
  const int copies_;
  const absl::Duration failover_after_;
  const RollBack roll_back_;
  FailoverPlanner planner_;  // the thread's
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool rolling_back_ ABSL_GUARDED_BY(mu_) = false;
  bool restored_ ABSL_GUARDED_BY(mu_) = false;
  // The rejoin thread's work and results; `restores_` tells results from
  // before a restore apart.
  int64_t restores_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<std::pair<FailoverPlanner::Decision::Rejoin, int64_t>> rejoin_ ABSL_GUARDED_BY(mu_);
  bool rejoining_ ABSL_GUARDED_BY(mu_) = false;
  struct RejoinDone {
    FailoverPlanner::Decision::Rejoin rejoin;
    bool ok;
    int64_t restores;
  };
  std::vector<RejoinDone> rejoined_ ABSL_GUARDED_BY(mu_);
  std::map<int, absl::Time> retry_rejoin_at_;  // the loop's: per task, after a failure
  std::thread thread_;
  std::thread rejoin_thread_;
};

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_FAILOVER_H_
