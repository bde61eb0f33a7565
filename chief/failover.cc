#include "chief/failover.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"
#include "ps_protocol/shard_layout.h"

namespace pstrain {

FailoverPlanner::FailoverPlanner(int num_ps, int copies, absl::Duration failover_after,
                                 absl::Time now)
    : num_ps_(num_ps),
      copies_(copies),
      failover_after_(failover_after),
      last_ok_(num_ps, now),
      fresh_(num_ps, true),
      server_(num_ps),
      epoch_(num_ps, 1),
      drops_seen_(num_ps, 0),
      marks_(num_ps, 0),
      dropped_seen_(num_ps) {
  for (int i = 0; i < num_ps; ++i) server_[i] = i;
}

FailoverPlanner::Decision FailoverPlanner::Observe(
    const std::vector<absl::StatusOr<PsStatus>>& probe, absl::Time now) {
  std::vector<bool> answers(num_ps_, false);  // answered now, with parameters
  for (int t = 0; t < num_ps_ && t < static_cast<int>(probe.size()); ++t) {
    if (!probe[t].ok()) {
      ++marks_[t];
      continue;
    }
    const PsStatus& s = *probe[t];
    if (!s.initialized) {
      fresh_[t] = false;  // restarted: its copies are gone
      continue;
    }
    answers[t] = true;
    last_ok_[t] = now;
    // Backups its streams dropped are out of step (before the drop is
    // confirmed, so no answer goes out that they lack).
    if (s.backup_drops < drops_seen_[t]) {
      // Fewer drops than seen: the task restarted, and counts afresh.
      drops_seen_[t] = 0;
      dropped_seen_[t].clear();
    }
    if (s.backup_drops > drops_seen_[t]) {
      // Which tasks the new drops named: those named more often than before
      // (a rejoined task dropped before is in step until dropped again).
      std::map<int, int> named;
      for (int dropped : s.dropped_backups) ++named[dropped];
      for (const auto& [dropped, times] : named) {
        if (dropped < 0 || dropped >= num_ps_) continue;
        int& seen = dropped_seen_[t][dropped];
        if (times > seen) {
          fresh_[dropped] = false;
          ++marks_[dropped];
        }
        seen = times;
      }
      drops_seen_[t] = s.backup_drops;
    }
    // What the tasks say they serve wins over what this planner recorded
    // (a restarted chief learns the failovers before it).
    for (size_t k = 0; k < s.serves.size() && k < s.serves_epochs.size(); ++k) {
      const int owner = s.serves[k];
      if (owner >= 0 && owner < num_ps_ && s.serves_epochs[k] > epoch_[owner]) {
        server_[owner] = t;
        epoch_[owner] = s.serves_epochs[k];
      }
    }
  }
  for (int t = 0; t < num_ps_; ++t) {
    if (now - last_ok_[t] > failover_after_ / 2) fresh_[t] = false;
  }
  Decision decision;
  std::vector<std::string> lost;
  for (int owner = 0; owner < num_ps_; ++owner) {
    const int server = server_[owner];
    if (now - last_ok_[server] < failover_after_) continue;
    Promotion promotion;
    promotion.owner = owner;
    promotion.task = -1;
    promotion.epoch = epoch_[owner] + 1;
    for (int t : ReplicaTasks(owner, num_ps_, copies_)) {
      if (t == server || !fresh_[t] || !answers[t]) continue;
      if (promotion.task < 0) {
        promotion.task = t;
      } else {
        promotion.backups.push_back(t);
      }
    }
    if (promotion.task >= 0) {
      decision.promotions.push_back(std::move(promotion));
    } else {
      lost.push_back(absl::StrCat(
          "ps ", owner, "'s (served by ps ", server, ", silent for ",
          absl::FormatDuration(absl::Trunc(now - last_ok_[server], absl::Milliseconds(100))), ")"));
    }
  }
  for (int t = 0; t < num_ps_; ++t) {
    // A task that rejoined follows its own chunks at their epoch: no fence.
    if (answers[t] && server_[t] != t && probe[t]->epoch < epoch_[t]) {
      decision.fences.emplace_back(t, epoch_[t]);
    }
  }
  if (!lost.empty()) {
    decision.lost = absl::StrCat("every copy of the chunks and rows of ", absl::StrJoin(lost, ", "),
                                 " is gone or out of step");
    return decision;
  }
  if (!decision.promotions.empty() || !decision.fences.empty()) return decision;
  for (int t = 0; t < num_ps_ && t < static_cast<int>(probe.size()); ++t) {
    if (fresh_[t] || !probe[t].ok() || probe[t]->shutting_down) continue;
    Decision::Rejoin rejoin;
    rejoin.task = t;
    rejoin.mark = marks_[t];
    bool ready = true;
    for (int owner = 0; owner < num_ps_ && ready; ++owner) {
      const std::vector<int> copies = ReplicaTasks(owner, num_ps_, copies_);
      if (std::find(copies.begin(), copies.end(), t) == copies.end()) continue;
      const int server = server_[owner];
      // A task that serves chunks yet answers without them restarted
      // before its failover: that comes first.
      if (server == t) {
        ready = answers[t];
        continue;
      }
      ready = answers[server];
      rejoin.from.emplace_back(owner, server);
      rejoin.epochs.push_back(epoch_[owner]);
    }
    if (ready && !rejoin.from.empty()) decision.rejoins.push_back(std::move(rejoin));
  }
  return decision;
}

bool FailoverPlanner::Rejoined(const Decision::Rejoin& rejoin, absl::Time now) {
  if (marks_[rejoin.task] != rejoin.mark) return false;
  for (size_t k = 0; k < rejoin.from.size(); ++k) {
    const auto [owner, server] = rejoin.from[k];
    if (server_[owner] != server ||
        (k < rejoin.epochs.size() && epoch_[owner] != rejoin.epochs[k])) {
      return false;
    }
  }
  fresh_[rejoin.task] = true;
  last_ok_[rejoin.task] = now;
  return true;
}

bool FailoverPlanner::AllFresh() const {
  return std::all_of(fresh_.begin(), fresh_.end(), [](bool f) { return f; });
}

void FailoverPlanner::Promoted(const Promotion& promotion) {
  server_[promotion.owner] = promotion.task;
  epoch_[promotion.owner] = std::max(epoch_[promotion.owner], promotion.epoch);
}

void FailoverPlanner::Restored(absl::Time now) {
  for (int i = 0; i < num_ps_; ++i) {
    last_ok_[i] = now;
    fresh_[i] = true;
    server_[i] = i;
    epoch_[i] = 1;
  }
}

std::string FailoverPlanner::Describe() const {
  std::vector<std::string> parts;
  for (int owner = 0; owner < num_ps_; ++owner) {
    if (server_[owner] != owner) {
      parts.push_back(absl::StrCat("ps ", owner, "'s chunks on ps ", server_[owner], " (epoch ",
                                   epoch_[owner], ")"));
    }
  }
  std::vector<std::string> stale;
  for (int t = 0; t < num_ps_; ++t) {
    if (!fresh_[t]) stale.push_back(absl::StrCat(t));
  }
  if (!stale.empty()) {
    parts.push_back(absl::StrCat("copies out of step on ps ", absl::StrJoin(stale, ", "),
                                 " (until a restore)"));
  }
  return parts.empty() ? "every ps serves its own chunks, every copy in step"
                       : absl::StrJoin(parts, "; ");
}

FailoverWatch::FailoverWatch(std::unique_ptr<ParameterServers> servers, int copies,
                             absl::Duration failover_after, RollBack roll_back)
    : servers_(std::move(servers)),
      copies_(copies),
      failover_after_(failover_after),
      roll_back_(std::move(roll_back)),
      planner_(servers_->size(), copies, failover_after, absl::Now()) {
  thread_ = std::thread([this] { Loop(); });
  rejoin_thread_ = std::thread([this] { RejoinLoop(); });
}

FailoverWatch::~FailoverWatch() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  rejoin_thread_.join();
}

void FailoverWatch::NoteRollBack(bool done) {
  absl::MutexLock lock(&mu_);
  if (done) {
    restored_ = true;
  } else {
    rolling_back_ = true;
  }
}

void FailoverWatch::RejoinLoop() {
  // A copy of every chunk and row of a task can take a while: up to 30 s
  // each before the rejoin is given up (and tried again later). The job's
  // end waits for one under way.
  const absl::Duration timeout = std::max(absl::Seconds(30), failover_after_ * 10);
  while (true) {
    FailoverPlanner::Decision::Rejoin rejoin;
    int64_t restores = 0;
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || rejoin_.has_value();
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      rejoin = rejoin_->first;
      restores = rejoin_->second;
      rejoin_.reset();
    }
    LOG(INFO) << "ps " << rejoin.task << " rejoins: a fresh copy of the chunks and rows it holds "
              << "copies of, while training goes on";
    bool ok = true;
    for (const auto& [owner, server] : rejoin.from) {
      {
        // The job ends, or was restored: the rest of this rejoin is moot.
        absl::MutexLock lock(&mu_);
        if (stopping_ || restores_ != restores || restored_) {
          ok = false;
          break;
        }
      }
      absl::Status s = servers_->AddBackup(server, owner, rejoin.task, timeout);
      if (!s.ok()) {
        LOG(WARNING) << "ps " << rejoin.task << " could not rejoin (tried again in "
                     << absl::FormatDuration(failover_after_) << "): " << s.message();
        ok = false;
        break;
      }
    }
    absl::MutexLock lock(&mu_);
    rejoined_.push_back({rejoin, ok, restores});
    rejoining_ = false;
  }
}

void FailoverWatch::Loop() {
  const absl::Duration deadline = std::min(failover_after_ / 2, absl::Seconds(1));
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(200))) return;
      if (restored_) {
        restored_ = false;
        rolling_back_ = false;
        ++restores_;
        planner_.Restored(absl::Now());
        LOG(INFO) << "failover watch: the job was restored; " << planner_.Describe();
      }
      for (const RejoinDone& done : rejoined_) {
        if (done.restores != restores_) continue;  // a restore made it moot
        const int task = done.rejoin.task;
        if (!done.ok) {
          retry_rejoin_at_[task] = absl::Now() + failover_after_;
          continue;
        }
        retry_rejoin_at_.erase(task);
        if (!planner_.Rejoined(done.rejoin, absl::Now())) {
          LOG(WARNING) << "ps " << task << " was dropped or missed an answer while it rejoined: "
                       << "it rejoins again";
          continue;
        }
        LOG(INFO) << "ps " << task << " rejoined: its copies are in step again"
                  << (planner_.AllFresh()
                          ? absl::StrCat("; every chunk and row has its ", copies_, " copies again")
                          : absl::StrCat("; ", planner_.Describe()));
      }
      rejoined_.clear();
      if (rolling_back_) continue;
    }
    const std::vector<absl::StatusOr<PsStatus>> probe =
        servers_->Probe(deadline, planner_.confirm_drops());
    // The job is ending: the ps leave, which is no failure.
    bool ending = false;
    for (const auto& s : probe) ending = ending || (s.ok() && s->shutting_down);
    if (ending) continue;
    const FailoverPlanner::Decision decision = planner_.Observe(probe, absl::Now());
    for (const FailoverPlanner::Promotion& p : decision.promotions) {
      LOG(WARNING) << "ps " << planner_.serving(p.owner) << " has not answered for "
                   << absl::FormatDuration(failover_after_) << ": ps " << p.task
                   << " serves the chunks and rows of ps " << p.owner << " from epoch " << p.epoch
                   << " (a failover; no rollback)";
      absl::Status s = servers_->Promote(p.task, p.owner, p.epoch, p.backups, deadline * 2);
      if (!s.ok()) {
        LOG(WARNING) << "the failover of ps " << p.owner << "'s chunks to ps " << p.task
                     << " failed (tried again at the next probe): " << s.message();
        continue;
      }
      planner_.Promoted(p);
      LOG(INFO) << "failover done: " << planner_.Describe();
    }
    for (const auto& [task, epoch] : decision.fences) {
      LOG(WARNING) << "ps " << task << " answers again after its failover: fencing it (epoch "
                   << epoch << ")";
      if (absl::Status s = servers_->Fence(task, epoch, deadline * 2); !s.ok()) {
        LOG(WARNING) << "could not fence ps " << task
                     << " (tried again at the next probe): " << s.message();
      }
    }
    for (const FailoverPlanner::Decision::Rejoin& r : decision.rejoins) {
      const auto retry = retry_rejoin_at_.find(r.task);
      if (retry != retry_rejoin_at_.end() && absl::Now() < retry->second) continue;
      absl::MutexLock lock(&mu_);
      if (rejoining_) break;  // one at a time
      rejoining_ = true;
      rejoin_.emplace(r, restores_);
    }
    if (!decision.lost.empty()) {
      LOG(ERROR) << decision.lost << ": the job rolls back to its last checkpoint";
      {
        absl::MutexLock lock(&mu_);
        rolling_back_ = true;
      }
      roll_back_(decision.lost, [this] {
        absl::MutexLock lock(&mu_);
        restored_ = true;
      });
    }
  }
}

}  // namespace pstrain
