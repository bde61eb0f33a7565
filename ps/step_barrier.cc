#include "ps/step_barrier.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

// Steps beyond this are refused, so step arithmetic never overflows.
constexpr int64_t kMaxStep = int64_t{1} << 62;

void RunAll(std::vector<StepBarrier::Done>& callbacks, const absl::Status& status,
            const PushResult& result) {
  for (auto& cb : callbacks) cb(status, result);
}

}  // namespace

absl::Status StepRule::Check() const {
  if (total_replicas < 1) return absl::InvalidArgumentError("total_replicas must be at least 1");
  if (sync && (replicas_to_aggregate < 1 || replicas_to_aggregate > total_replicas)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sync needs 1 <= replicas_to_aggregate <= total_replicas, got ",
                     replicas_to_aggregate, " and ", total_replicas));
  }
  return absl::OkStatus();
}

StepBarrier::StepBarrier(std::string name, const StepRule& rule, absl::Mutex* mu,
                         StepEngine* engine)
    : name_(std::move(name)), rule_(rule), mu_(mu), engine_(engine) {
  absl::MutexLock lock(mu_);
  last_async_step_.assign(rule_.total_replicas, -1);
  last_sync_step_.assign(rule_.total_replicas, -1);
  for (int r = 0; r < rule_.total_replicas; ++r) live_.insert(r);
  if (!rule_.sync && rule_.staleness >= 0) {
    ssp_ =
        std::make_unique<StalenessBound>(rule_.total_replicas, rule_.staleness, rule_.sync_timeout);
  }
  if (rule_.sync || ssp_ != nullptr) timer_ = std::thread([this] { TimerLoop(); });
}

StepBarrier::~StepBarrier() { Stop(); }

void StepBarrier::Stop() {
  std::vector<Waiter> pending;
  {
    absl::MutexLock lock(mu_);
    stopping_ = true;
    pending = std::move(waiters_);
    waiters_.clear();
  }
  if (timer_.joinable()) timer_.join();
  for (Waiter& w : pending) w.done(absl::CancelledError("the parameter server is stopping"), {});
}

absl::Status StepBarrier::ReadyLocked() const {
  if (restoring_) {
    return absl::UnavailableError(
        absl::StrCat(name_, " is being restored from a checkpoint; retry"));
  }
  if (initialized_) return absl::OkStatus();
  // Transient: a new or restarted ps waits for the chief to initialize or
  // restore it, which clients wait out by retrying.
  return absl::UnavailableError(
      absl::StrCat(name_, " is not initialized yet (the chief initializes or restores it); retry"));
}

bool StepBarrier::DoneLocked() const {
  return shutting_down_ || (rule_.train_steps > 0 && step_ >= rule_.train_steps);
}

PushResult StepBarrier::ResultLocked() const {
  PushResult r;
  r.global_step = step_;
  r.generation = generation_;
  r.job_done = DoneLocked();
  return r;
}

int StepBarrier::RequiredLocked() const {
  return std::max<int>(1, std::min<int>(rule_.replicas_to_aggregate, live_.size()));
}

int64_t StepBarrier::ResetLocked(int64_t step, int64_t generation, std::vector<Done>* abandoned) {
  step_ = step;
  initialized_ = true;
  restoring_ = false;
  generation_ = generation;
  while (generation_ == 0) generation_ = static_cast<int64_t>(random_() >> 1);
  // A new start (a restarted chief, a restore): nothing of the previous run
  // counts.
  std::fill(last_async_step_.begin(), last_async_step_.end(), -1);
  std::fill(last_sync_step_.begin(), last_sync_step_.end(), -1);
  sequence_ = 0;
  live_.clear();
  for (int r = 0; r < rule_.total_replicas; ++r) live_.insert(r);
  contributors_.clear();
  engine_->DiscardPendingLocked();
  if (ssp_ != nullptr) ssp_->Reset();
  for (Waiter& w : waiters_) abandoned->push_back(std::move(w.done));
  waiters_.clear();
  return generation_;
}

void StepBarrier::SetRestoringLocked(bool restoring) { restoring_ = restoring; }

BarrierProgress StepBarrier::ProgressLocked() const {
  BarrierProgress p;
  p.step = step_;
  p.generation = generation_;
  p.sequence = sequence_;
  p.applied = applied_;
  p.last_async_step = last_async_step_;
  p.last_sync_step = last_sync_step_;
  return p;
}

absl::Status StepBarrier::ResumeLocked(const BarrierProgress& progress,
                                       std::vector<Done>* abandoned) {
  if (progress.last_async_step.size() != last_async_step_.size() ||
      progress.last_sync_step.size() != last_sync_step_.size() || progress.generation == 0 ||
      progress.step < 0 || progress.sequence < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": a copy's progress for ", progress.last_async_step.size(),
                     " replicas at step ", progress.step, " (generation ", progress.generation,
                     ") does not fit ", last_async_step_.size(), " replicas"));
  }
  ResetLocked(progress.step, progress.generation, abandoned);
  sequence_ = progress.sequence;
  applied_ = progress.applied;
  last_async_step_ = progress.last_async_step;
  last_sync_step_ = progress.last_sync_step;
  return absl::OkStatus();
}

void StepBarrier::UninitializeLocked(std::vector<Done>* abandoned) {
  initialized_ = false;
  restoring_ = false;
  contributors_.clear();
  engine_->DiscardPendingLocked();
  for (Waiter& w : waiters_) abandoned->push_back(std::move(w.done));
  waiters_.clear();
}

void StepBarrier::AdvancedLocked() {
  engine_->AdvancedLocked(step_);
  if (snapshot_wanted_ && step_ >= snapshot_at_) {
    engine_->SnapshotLocked();
    snapshot_wanted_ = false;
  }
}

void StepBarrier::CompleteStepLocked() {
  absl::Status applied = engine_->ApplyPendingLocked(static_cast<int>(contributors_.size()));
  if (!applied.ok()) LOG(ERROR) << name_ << ": applying step " << step_ << " failed: " << applied;
  std::vector<std::pair<int, int64_t>> pushes;
  if (record_applies_) {
    for (int r : contributors_) pushes.emplace_back(r, step_);
  }
  contributors_.clear();
  ++applied_;
  ++step_;
  AdvancedLocked();
  RecordLocked(step_ - 1, std::move(pushes));
}

void StepBarrier::RecordLocked(int64_t step_before, std::vector<std::pair<int, int64_t>> pushes) {
  if (!record_applies_) return;
  AppliedPushes applied;
  applied.sequence = ++sequence_;
  applied.generation = generation_;
  applied.step_before = step_before;
  applied.step_after = step_;
  applied.pushes = std::move(pushes);
  engine_->AppliedLocked(applied);
}

absl::Status StepBarrier::CheckFollowLocked(const AppliedPushes& applied) const {
  PSTRAIN_RETURN_IF_ERROR(ReadyLocked());
  if (applied.generation != generation_) {
    return absl::FailedPreconditionError(
        absl::StrCat(name_, " holds generation ", generation_,
                     "; the update to follow was applied to generation ", applied.generation,
                     ": this replica needs the values copied again"));
  }
  if (applied.sequence != sequence_ + 1) {
    return absl::OutOfRangeError(absl::StrCat(name_, " followed ", sequence_,
                                              " updates; the next to follow is ", sequence_ + 1,
                                              ", not ", applied.sequence));
  }
  if (applied.step_before != step_) {
    return absl::FailedPreconditionError(absl::StrCat(
        name_, " is at step ", step_, "; update ", applied.sequence, " was applied at step ",
        applied.step_before, ": this replica needs the values copied again"));
  }
  if (applied.step_after < applied.step_before) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": an update to follow moves the step back from ", applied.step_before,
                     " to ", applied.step_after));
  }
  for (const auto& [replica, step] : applied.pushes) {
    if (replica < 0 || replica >= rule_.total_replicas || step < 0 || step > kMaxStep) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": an update to follow counts replica ", replica, " at step ", step));
    }
  }
  return absl::OkStatus();
}

void StepBarrier::FollowLocked(const AppliedPushes& applied) {
  for (const auto& [replica, step] : applied.pushes) {
    if (rule_.sync) {
      last_sync_step_[replica] = step;
    } else {
      last_async_step_[replica] = std::max(last_async_step_[replica], step);
    }
  }
  ++applied_;
  sequence_ = applied.sequence;
  if (applied.step_after != step_) MoveToLocked(applied.step_after);
  if (record_applies_) engine_->AppliedLocked(applied);
}

void StepBarrier::MoveToLocked(int64_t step) {
  step_ = step;
  AdvancedLocked();
}

void StepBarrier::Push(int replica, int64_t step, int64_t generation,
                       absl::FunctionRef<absl::Status()> add, Done done, bool hold_until_applied) {
  absl::Status error;
  PushResult result;
  std::vector<Done> ready;
  {
    absl::MutexLock lock(mu_);
    if (absl::Status s = ReadyLocked(); !s.ok()) {
      error = s;
    } else if (replica < 0 || replica >= rule_.total_replicas) {
      error = absl::InvalidArgumentError(
          absl::StrCat("replica ", replica, " is outside [0, ", rule_.total_replicas, ")"));
    } else if (step < 0 || step > kMaxStep) {
      error = absl::InvalidArgumentError(absl::StrCat("step ", step, " is out of range"));
    } else if (generation != 0 && generation != generation_) {
      error = absl::AbortedError(absl::StrCat(
          "push for step ", step, " computed from values ", name_,
          " no longer holds (the job was rolled back to a checkpoint since): not applied; pull "
          "and go on"));
    } else if (step > step_ && !rule_.follows_pushed_steps) {
      // Possible only after the job was rolled back to a checkpoint (the
      // replica computed it from values the engine no longer holds).
      error = absl::AbortedError(
          absl::StrCat("push for step ", step, " but ", name_, " is at step ", step_,
                       " (the job was rolled back to a checkpoint): not applied; pull and go on"));
    } else if (DoneLocked()) {
      result.job_done = true;
    } else if (!rule_.sync) {
      // A retried push (same replica, same step) is applied once.
      if (step > last_async_step_[replica]) {
        error = add();
        if (error.ok()) {
          last_async_step_[replica] = step;
          ++applied_;
          const int64_t before = step_;
          const int64_t next = rule_.follows_pushed_steps ? std::max(step_, step + 1) : step_ + 1;
          if (next > step_) MoveToLocked(next);
          RecordLocked(before, {{replica, step}});
          if (ssp_ != nullptr) {
            const int64_t clock = ssp_->Tick(replica, absl::Now());
            if (hold_until_applied && !ssp_->MayProceed(clock) && !DoneLocked()) {
              ++ssp_waits_;
              waiters_.push_back({replica, 0, clock, absl::InfiniteFuture(), std::move(done)});
              done = nullptr;
            }
          }
        }
      }
      if (ssp_ != nullptr) ready = TakeReadyLocked();
    } else {
      if (step > step_) {
        // (follows_pushed_steps) The job's step moved on without this ps
        // hearing of it: what is pending belongs to the past.
        if (!contributors_.empty()) CompleteStepLocked();
        if (step > step_) {
          const int64_t before = step_;
          MoveToLocked(step);
          RecordLocked(before, {});  // a move with nothing applied, followed as one
        }
      }
      // Any push shows the replica is alive: wait for it again.
      live_.insert(replica);
      if (step < step_) {
        if (step != last_sync_step_[replica]) {
          ++stale_;
          result.stale = true;
        }  // Else a retry of a push that was counted in a completed step.
      } else {
        if (!contributors_.count(replica)) {
          error = add();
          if (error.ok()) {
            contributors_.insert(replica);
            last_sync_step_[replica] = step;
            if (contributors_.size() == 1) first_push_ = absl::Now();
          }
        }
        if (error.ok()) {
          if (hold_until_applied) {
            waiters_.push_back({replica, step + 1, 0, absl::InfiniteFuture(), std::move(done)});
            done = nullptr;
          }
          if (static_cast<int>(contributors_.size()) >= RequiredLocked()) CompleteStepLocked();
          ready = TakeReadyLocked();
        }
      }
    }
    const bool job_done = result.job_done;
    const bool stale = result.stale;
    result = ResultLocked();
    result.job_done = result.job_done || job_done;
    result.stale = stale;
  }
  if (done) done(error, result);
  PushResult released = result;
  released.stale = false;
  RunAll(ready, absl::OkStatus(), released);
}

void StepBarrier::WaitToRead(int replica, int64_t step, int64_t generation, Done done) {
  PushResult result;
  absl::Status ready;
  {
    absl::MutexLock lock(mu_);
    ready = ReadyLocked();
    result = ResultLocked();
    const bool may_wait = ready.ok() && replica >= 0 && replica < rule_.total_replicas &&
                          (generation == 0 || generation == generation_) && !DoneLocked() &&
                          !stopping_;
    if (may_wait && rule_.sync && step_ < step) {
      waiters_.push_back({replica, step, 0, absl::Now() + rule_.sync_timeout, std::move(done)});
      return;
    }
    if (may_wait && ssp_ != nullptr) {
      const int64_t clock = ssp_->clock(replica);
      if (!ssp_->MayProceed(clock)) {
        ++ssp_waits_;
        waiters_.push_back({replica, 0, clock, absl::InfiniteFuture(), std::move(done)});
        return;
      }
    }
  }
  done(ready, result);
}

std::vector<StepBarrier::Done> StepBarrier::TakeReadyLocked() {
  std::vector<Done> ready;
  const bool all = DoneLocked();
  auto keep = waiters_.begin();
  for (Waiter& w : waiters_) {
    const bool go = all || (ssp_ != nullptr ? ssp_->MayProceed(w.clock) : w.step <= step_);
    if (go) {
      ready.push_back(std::move(w.done));
    } else {
      *keep++ = std::move(w);
    }
  }
  waiters_.erase(keep, waiters_.end());
  return ready;
}

void StepBarrier::ReplicaLeft(int replica) {
  if (replica < 0 || replica >= rule_.total_replicas) return;
  std::vector<Done> ready;
  PushResult result;
  {
    absl::MutexLock lock(mu_);
    if (ssp_ != nullptr) {
      ssp_->Leave(replica);
    } else if (!rule_.sync || !live_.erase(replica)) {
      return;
    } else if (ReadyLocked().ok() && !contributors_.empty() &&
               static_cast<int>(contributors_.size()) >= RequiredLocked()) {
      CompleteStepLocked();
    }
    ready = TakeReadyLocked();
    result = ResultLocked();
  }
  RunAll(ready, absl::OkStatus(), result);
}

void StepBarrier::Shutdown() {
  std::vector<Done> pending;
  PushResult result;
  {
    absl::MutexLock lock(mu_);
    shutting_down_ = true;
    for (Waiter& w : waiters_) pending.push_back(std::move(w.done));
    waiters_.clear();
    contributors_.clear();
    engine_->DiscardPendingLocked();
    result = ResultLocked();
  }
  RunAll(pending, absl::OkStatus(), result);
}

bool StepBarrier::WaitForShutdown(absl::Duration timeout) const {
  absl::MutexLock lock(mu_);
  return mu_->AwaitWithTimeout(absl::Condition(&shutting_down_), timeout);
}

absl::Status StepBarrier::RequestSnapshot(int64_t at_step) {
  absl::MutexLock lock(mu_);
  if (!ReadyLocked().ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(name_, " is not initialized; there is nothing to save"));
  }
  snapshot_at_ = at_step;
  snapshot_wanted_ = rule_.sync && step_ < at_step;
  if (!snapshot_wanted_) engine_->SnapshotLocked();
  return absl::OkStatus();
}

void StepBarrier::AwaitSnapshot(absl::Time deadline) {
  absl::MutexLock lock(mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) {
    return !snapshot_wanted_ || shutting_down_ || stopping_;
  };
  mu_->AwaitWithDeadline(absl::Condition(&done), deadline);
  if (snapshot_wanted_) {
    snapshot_wanted_ = false;
    LOG(WARNING) << name_ << " did not reach step " << snapshot_at_
                 << (shutting_down_ ? " before the job ended" : " in time")
                 << "; copying it at step " << step_;
    engine_->SnapshotLocked();
  }
}

void StepBarrier::TimerLocked() {
  const absl::Time now = absl::Now();
  if (!ReadyLocked().ok() || DoneLocked()) return;
  if (ssp_ != nullptr) {
    for (const Waiter& w : waiters_) ssp_->Seen(w.replica, now);
    const std::vector<int> silent = ssp_->DropSilent(now);
    if (!silent.empty()) {
      LOG(WARNING) << name_ << ": replicas " << absl::StrJoin(silent, ", ")
                   << " pushed nothing for " << absl::FormatDuration(rule_.sync_timeout)
                   << "; the others no longer wait for them (ssp) until they push again";
    }
    return;
  }
  if (!contributors_.empty() && now >= first_push_ + rule_.sync_timeout) {
    std::vector<int> missing;
    for (int r : live_) {
      if (!contributors_.count(r)) missing.push_back(r);
    }
    for (int r : missing) live_.erase(r);
    ++timed_out_;
    LOG(WARNING) << name_ << ": sync step " << step_ << " waited "
                 << absl::FormatDuration(rule_.sync_timeout) << " for " << RequiredLocked()
                 << " replicas; applying the " << contributors_.size()
                 << " that arrived. Missing replicas (treated as gone until they push again): "
                 << absl::StrJoin(missing, ", ");
    CompleteStepLocked();
  }
  if (!rule_.follows_pushed_steps) return;
  // A read that waited out the timeout with nothing pending: nobody will
  // push the steps in between (they timed out elsewhere), so move there.
  int64_t latest = step_;
  for (const Waiter& w : waiters_) {
    if (w.give_up <= now) latest = std::max(latest, w.step);
  }
  if (latest <= step_) return;
  LOG(WARNING) << name_ << ": a read for step " << latest << " waited "
               << absl::FormatDuration(rule_.sync_timeout) << " at step " << step_
               << "; applying the " << contributors_.size()
               << " pushes pending and moving on to step " << latest;
  if (!contributors_.empty()) CompleteStepLocked();
  if (latest > step_) {
    const int64_t before = step_;
    MoveToLocked(latest);
    RecordLocked(before, {});
  }
}

void StepBarrier::TimerLoop() {
  while (true) {
    std::vector<Done> ready;
    PushResult result;
    {
      absl::MutexLock lock(mu_);
      // Poll at a fine grain: simpler than tracking every deadline change.
      mu_->AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(50));
      if (stopping_) return;
      TimerLocked();
      ready = TakeReadyLocked();
      result = ResultLocked();
    }
    RunAll(ready, absl::OkStatus(), result);
  }
}

StepStats StepBarrier::GetStats() const {
  absl::MutexLock lock(mu_);
  StepStats s;
  s.initialized = initialized_;
  s.global_step = step_;
  s.applied_updates = applied_;
  s.stale_pushes = stale_;
  s.timed_out_steps = timed_out_;
  s.ssp_waits = ssp_waits_;
  s.shutting_down = shutting_down_;
  s.job_done = DoneLocked();
  return s;
}

int64_t StepBarrier::step() const {
  absl::MutexLock lock(mu_);
  return step_;
}

int64_t StepBarrier::generation() const {
  absl::MutexLock lock(mu_);
  return generation_;
}

}  // namespace pstrain
