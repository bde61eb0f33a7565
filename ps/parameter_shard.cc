#include "ps/parameter_shard.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "ps_protocol/bf16.h"

namespace pstrain {

std::vector<Segment> SegmentsForRange(const Model& model, int64_t begin, int64_t end) {
  std::vector<Segment> segments;
  for (const VariableInfo& v : model.variables()) {
    if (!v.trainable) continue;
    const int64_t lo = std::max(begin, v.offset);
    const int64_t hi = std::min(end, v.offset + v.size);
    if (lo < hi) segments.push_back({v.name, lo - begin, hi - begin, v.spec.frozen});
  }
  if (segments.empty()) segments.push_back({"", 0, end - begin});
  return segments;
}

std::vector<float> StateDecays(const Model& model, float job_decay) {
  bool any = false;
  for (const VariableInfo& v : model.variables()) any = any || (!v.trainable && v.spec.decay >= 0);
  if (!any) return {};
  std::vector<float> decays(model.num_state(), job_decay);
  for (const VariableInfo& v : model.variables()) {
    if (v.trainable || v.spec.decay < 0) continue;
    std::fill(decays.begin() + v.offset, decays.begin() + v.offset + v.size, v.spec.decay);
  }
  return decays;
}

absl::StatusOr<std::unique_ptr<ParameterShard>> ParameterShard::Create(
    const ShardOptions& options) {
  if (options.num_chunks <= 0 || options.chunk < 0 || options.chunk >= options.num_chunks) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk ", options.chunk, " is outside [0, ", options.num_chunks, ")"));
  }
  if (options.begin < 0 || options.end < options.begin || options.num_state < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad shard range [", options.begin, ", ", options.end, ")"));
  }
  if (options.sync && (options.replicas_to_aggregate < 1 || options.total_replicas < 1 ||
                       options.replicas_to_aggregate > options.total_replicas)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sync needs 1 <= replicas_to_aggregate <= total_replicas, got ",
                     options.replicas_to_aggregate, " and ", options.total_replicas));
  }
  if (options.total_replicas < 1) {
    return absl::InvalidArgumentError("total_replicas must be at least 1");
  }
  if (!options.state_decays.empty() &&
      static_cast<int64_t>(options.state_decays.size()) != options.num_state) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.state_decays.size(), " state decays for ", options.num_state, " state values"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<Optimizer> optimizer,
      Optimizer::Create(options.optimizer, options.segments, options.end - options.begin));
  return std::unique_ptr<ParameterShard>(new ParameterShard(options, std::move(optimizer)));
}

ParameterShard::ParameterShard(const ShardOptions& options, std::unique_ptr<Optimizer> optimizer)
    : options_(options),
      optimizer_(std::move(optimizer)),
      params_(options.end - options.begin),
      state_(options.num_state),
      last_async_step_(options.total_replicas, -1),
      last_sync_step_(options.total_replicas, -1) {
  if (options_.sync) {
    grad_sum_.assign(params_.size(), 0.0f);
    stats_sum_.assign(state_.size(), 0.0f);
    for (int r = 0; r < options_.total_replicas; ++r) live_.insert(r);
    timer_ = std::thread([this] { TimerLoop(); });
  } else if (options_.staleness >= 0) {
    ssp_ = std::make_unique<StalenessBound>(options_.total_replicas, options_.staleness,
                                            options_.sync_timeout);
    timer_ = std::thread([this] { TimerLoop(); });
  }
}

ParameterShard::~ParameterShard() {
  std::vector<PushCallback> pending;
  {
    absl::MutexLock lock(&mu_);
    destroying_ = true;
    pending = std::move(waiting_);
    waiting_.clear();
    for (SspWaiter& w : ssp_waiting_) pending.push_back(std::move(w.done));
    ssp_waiting_.clear();
  }
  if (timer_.joinable()) timer_.join();
  for (auto& cb : pending) cb(absl::CancelledError("the parameter server is stopping"), {});
}

absl::Status ParameterShard::Initialize(absl::Span<const float> params,
                                        absl::Span<const float> state, int64_t global_step,
                                        const std::vector<absl::Span<const float>>& slots,
                                        int64_t optimizer_step, int64_t generation) {
  std::vector<PushCallback> abandoned;
  absl::Status status =
      InitializeLocked(params, state, global_step, slots, optimizer_step, generation, abandoned);
  for (auto& cb : abandoned) {
    cb(absl::AbortedError("the parameters were initialized again; push again"), {});
  }
  return status;
}

absl::Status ParameterShard::InitializeLocked(absl::Span<const float> params,
                                              absl::Span<const float> state, int64_t global_step,
                                              const std::vector<absl::Span<const float>>& slots,
                                              int64_t optimizer_step, int64_t generation,
                                              std::vector<PushCallback>& abandoned) {
  absl::MutexLock lock(&mu_);
  if (params.size() != params_.size() || state.size() != state_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "initial values for chunk ", options_.chunk, " have ", params.size(), " parameters and ",
        state.size(), " state values; the shard holds ", params_.size(), " parameters [",
        options_.begin, ", ", options_.end, ") and ", state_.size(),
        " state values (do all processes use the same model and number of ps?)"));
  }
  if (global_step < 0 || optimizer_step < 0) {
    return absl::InvalidArgumentError("negative global or optimizer step");
  }
  if (!slots.empty()) {
    if (static_cast<int>(slots.size()) != optimizer_->num_slots()) {
      return absl::InvalidArgumentError(absl::StrCat(slots.size(), " optimizer slots for ps shard ",
                                                     options_.chunk, ", whose optimizer has ",
                                                     optimizer_->num_slots()));
    }
    for (const auto& slot : slots) {
      if (slot.size() != params_.size()) {
        return absl::InvalidArgumentError(absl::StrCat("an optimizer slot of ", slot.size(),
                                                       " values for ps shard ", options_.chunk,
                                                       ", which holds ", params_.size()));
      }
    }
  }
  for (int k = 0; k < optimizer_->num_slots(); ++k) {
    float* slot = optimizer_->slot(k);
    if (slots.empty()) {
      std::fill(slot, slot + params_.size(), 0.0f);
    } else {
      std::copy(slots[k].begin(), slots[k].end(), slot);
    }
  }
  optimizer_->set_adam_step(optimizer_step);
  std::copy(params.begin(), params.end(), params_.begin());
  std::copy(state.begin(), state.end(), state_.begin());
  ++params_version_;
  step_ = global_step;
  initialized_ = true;
  generation_ = generation;
  while (generation_ == 0) generation_ = static_cast<int64_t>(random_() >> 1);
  // A new start (a restarted chief): nothing of the previous run counts.
  std::fill(last_async_step_.begin(), last_async_step_.end(), -1);
  std::fill(last_sync_step_.begin(), last_sync_step_.end(), -1);
  contributors_.clear();
  std::fill(grad_sum_.begin(), grad_sum_.end(), 0.0f);
  std::fill(stats_sum_.begin(), stats_sum_.end(), 0.0f);
  abandoned = std::move(waiting_);
  waiting_.clear();
  for (SspWaiter& w : ssp_waiting_) abandoned.push_back(std::move(w.done));
  ssp_waiting_.clear();
  if (ssp_ != nullptr) ssp_->Reset();
  return absl::OkStatus();
}

absl::StatusOr<PushResult> ParameterShard::Read(std::string* params, std::string* state, bool bf16,
                                                int64_t have_generation,
                                                int64_t have_version) const {
  absl::MutexLock lock(&mu_);
  if (!initialized_) return NotInitializedLocked();
  PushResult r;
  r.params_version = params_version_;
  r.params_unchanged =
      have_version != 0 && have_generation == generation_ && have_version == params_version_;
  if (r.params_unchanged) {
    params->clear();
  } else if (bf16) {
    params->resize(params_.size() * sizeof(uint16_t));
    FloatsToBf16(params_.data(), static_cast<int64_t>(params_.size()),
                 reinterpret_cast<uint16_t*>(params->data()));
  } else {
    params->resize(params_.size() * sizeof(float));
    std::memcpy(params->data(), params_.data(), params->size());
  }
  state->resize(state_.size() * sizeof(float));
  if (!state_.empty()) std::memcpy(state->data(), state_.data(), state->size());
  r.global_step = step_;
  r.job_done = DoneLocked();
  r.generation = generation_;
  return r;
}

absl::Status ParameterShard::NotInitializedLocked() const {
  // Transient: a new or restarted ps waits for the chief to initialize or
  // restore it, which clients wait out by retrying.
  return absl::UnavailableError(absl::StrCat("chunk ", options_.chunk,
                                             " is not initialized yet (the chief initializes or "
                                             "restores it); retry"));
}

bool ParameterShard::DoneLocked() const {
  return shutting_down_ || (options_.train_steps > 0 && step_ >= options_.train_steps);
}

int ParameterShard::RequiredLocked() const {
  return std::max<int>(1, std::min<int>(options_.replicas_to_aggregate, live_.size()));
}

void ParameterShard::ApplyLocked(const float* grads, const float* stats) {
  ScopedTraceEvent event(options_.trace, "ps", "apply");
  if (!optimizer_->LeavesParamsUnchanged(grads)) ++params_version_;
  optimizer_->Apply(step_, grads, params_.data());
  if (options_.state_decays.empty()) {
    const float d = options_.state_decay;
    for (size_t i = 0; i < state_.size(); ++i) state_[i] = d * state_[i] + (1.0f - d) * stats[i];
  } else {
    const float* d = options_.state_decays.data();
    for (size_t i = 0; i < state_.size(); ++i) {
      state_[i] = d[i] * state_[i] + (1.0f - d[i]) * stats[i];
    }
  }
  ++applied_;
  ++step_;
  if (options_.trace != nullptr) options_.trace->SetStep(step_);
  if (snapshot_wanted_ && step_ >= snapshot_at_) {
    snapshot_ = CopyLocked();
    snapshot_wanted_ = false;
    snapshot_ready_ = true;
  }
}

ShardSnapshot ParameterShard::CopyLocked() const {
  ScopedTraceEvent event(options_.trace, "checkpoint", "copy chunk for checkpoint");
  const absl::Time start = absl::Now();
  ShardSnapshot s;
  s.step = step_;
  s.optimizer_step = optimizer_->adam_step();
  s.params = params_;
  s.state = state_;
  for (int k = 0; k < optimizer_->num_slots(); ++k) {
    const float* slot = optimizer_->slot(k);
    s.slots.emplace_back(slot, slot + params_.size());
  }
  s.copy_time = absl::Now() - start;
  return s;
}

absl::Status ParameterShard::RequestSnapshot(int64_t at_step) {
  absl::MutexLock lock(&mu_);
  if (!initialized_) {
    return absl::FailedPreconditionError(
        absl::StrCat("chunk ", options_.chunk, " is not initialized; there is nothing to save"));
  }
  snapshot_at_ = at_step;
  snapshot_ready_ = !options_.sync || step_ >= at_step;
  snapshot_wanted_ = !snapshot_ready_;
  if (snapshot_ready_) snapshot_ = CopyLocked();
  return absl::OkStatus();
}

absl::StatusOr<ShardSnapshot> ParameterShard::AwaitSnapshot(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !snapshot_wanted_ || shutting_down_ || destroying_;
  };
  mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
  if (snapshot_wanted_) {
    snapshot_wanted_ = false;
    LOG(WARNING) << "chunk " << options_.chunk << " did not reach step " << snapshot_at_
                 << (shutting_down_ ? " before the job ended" : " in time")
                 << "; copying it at step " << step_;
    snapshot_ = CopyLocked();
  }
  snapshot_ready_ = false;
  return std::move(snapshot_);
}

absl::StatusOr<ShardSnapshot> ParameterShard::Snapshot(int64_t at_step, absl::Duration wait) {
  const absl::Time deadline = absl::Now() + wait;
  PSTRAIN_RETURN_IF_ERROR(RequestSnapshot(at_step));
  return AwaitSnapshot(deadline);
}

std::vector<std::string> ParameterShard::slot_names() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  for (int k = 0; k < optimizer_->num_slots(); ++k) names.push_back(optimizer_->slot_name(k));
  return names;
}

void ParameterShard::ReplicaLeft(int replica) {
  std::vector<PushCallback> ready;
  PushResult result;
  {
    absl::MutexLock lock(&mu_);
    if (ssp_ != nullptr) {
      ssp_->Leave(replica);
      ready = ReleaseSspLocked();
    } else if (!options_.sync || !live_.erase(replica)) {
      return;
    } else if (!contributors_.empty() &&
               static_cast<int>(contributors_.size()) >= RequiredLocked()) {
      ready = CompleteStepLocked();
    }
    result.global_step = step_;
    result.generation = generation_;
    result.job_done = DoneLocked();
  }
  for (auto& cb : ready) cb(absl::OkStatus(), result);
}

std::vector<ParameterShard::PushCallback> ParameterShard::CompleteStepLocked() {
  const float scale = 1.0f / static_cast<float>(contributors_.size());
  for (float& g : grad_sum_) g *= scale;
  for (float& s : stats_sum_) s *= scale;
  ApplyLocked(grad_sum_.data(), stats_sum_.data());
  std::fill(grad_sum_.begin(), grad_sum_.end(), 0.0f);
  std::fill(stats_sum_.begin(), stats_sum_.end(), 0.0f);
  contributors_.clear();
  std::vector<PushCallback> ready = std::move(waiting_);
  waiting_.clear();
  return ready;
}

void ParameterShard::Push(int replica, int64_t step, absl::Span<const float> grads,
                          absl::Span<const float> batch_stats, PushCallback done,
                          int64_t generation) {
  absl::Status error;
  PushResult result;
  std::vector<PushCallback> ready;
  {
    absl::MutexLock lock(&mu_);
    if (!initialized_) {
      error = NotInitializedLocked();
    } else if (grads.size() != params_.size()) {
      error = absl::InvalidArgumentError(absl::StrCat(
          "push of ", grads.size(), " gradients to chunk ", options_.chunk, ", which holds ",
          params_.size(), " parameters [", options_.begin, ", ", options_.end, ")"));
    } else if (batch_stats.size() != state_.size()) {
      error = absl::InvalidArgumentError(
          absl::StrCat("push of ", batch_stats.size(), " batch statistics to ps shard ",
                       options_.chunk, ", which holds ", state_.size()));
    } else if (replica < 0 || replica >= options_.total_replicas) {
      error = absl::InvalidArgumentError(
          absl::StrCat("replica ", replica, " is outside [0, ", options_.total_replicas, ")"));
    } else if (generation != 0 && generation != generation_) {
      error = absl::AbortedError(absl::StrCat(
          "push for step ", step, " computed from parameters ps shard ", options_.chunk,
          " no longer holds (the job was rolled back to a checkpoint since): not applied; pull "
          "and go on"));
    } else if (step > step_) {
      // Possible only after the job was rolled back to a checkpoint (the
      // replica computed it from values the shard no longer holds).
      error = absl::AbortedError(absl::StrCat(
          "push for step ", step, " but ps shard ", options_.chunk, " is at step ", step_,
          " (the job was rolled back to a checkpoint): not applied; pull and go on"));
    } else if (DoneLocked()) {
      result.job_done = true;
    } else if (!options_.sync) {
      // A retried push (same replica, same step) is applied once.
      if (step > last_async_step_[replica]) {
        last_async_step_[replica] = step;
        ApplyLocked(grads.data(), batch_stats.data());
        if (ssp_ != nullptr) SspPushedLocked(replica, &done);
      }
      if (ssp_ != nullptr) ready = ReleaseSspLocked();
    } else if (step < step_) {
      // Any push shows the replica is alive: wait for it again.
      live_.insert(replica);
      if (step != last_sync_step_[replica]) {
        ++stale_;
        result.stale = true;
      }  // Else a retry of a push that was counted in a completed step.
    } else {
      live_.insert(replica);
      last_sync_step_[replica] = step;
      if (contributors_.insert(replica).second) {
        if (contributors_.size() == 1) first_push_ = absl::Now();
        for (size_t i = 0; i < grads.size(); ++i) grad_sum_[i] += grads[i];
        for (size_t i = 0; i < batch_stats.size(); ++i) stats_sum_[i] += batch_stats[i];
      }
      waiting_.push_back(std::move(done));
      done = nullptr;
      if (static_cast<int>(contributors_.size()) >= RequiredLocked()) {
        ready = CompleteStepLocked();
      }
    }
    result.global_step = step_;
    result.generation = generation_;
    result.job_done = result.job_done || DoneLocked();
  }
  if (done) done(error, result);
  for (auto& cb : ready) cb(absl::OkStatus(), result);
}

void ParameterShard::SspPushedLocked(int replica, PushCallback* done) {
  const int64_t clock = ssp_->Tick(replica, absl::Now());
  if (ssp_->MayProceed(clock) || DoneLocked()) return;
  ++ssp_waits_;
  ssp_waiting_.push_back(SspWaiter{replica, clock, std::move(*done)});
  *done = nullptr;
}

std::vector<ParameterShard::PushCallback> ParameterShard::ReleaseSspLocked() {
  std::vector<PushCallback> ready;
  const bool all = DoneLocked();
  auto waiting = ssp_waiting_.begin();
  for (SspWaiter& entry : ssp_waiting_) {
    if (all || ssp_->MayProceed(entry.clock)) {
      ready.push_back(std::move(entry.done));
    } else {
      *waiting++ = std::move(entry);
    }
  }
  ssp_waiting_.erase(waiting, ssp_waiting_.end());
  return ready;
}

void ParameterShard::SspTimerLocked(std::vector<PushCallback>* ready) {
  const absl::Time now = absl::Now();
  for (const SspWaiter& w : ssp_waiting_) ssp_->Seen(w.replica, now);
  const std::vector<int> silent = ssp_->DropSilent(now);
  if (silent.empty()) return;
  LOG(WARNING) << "chunk " << options_.chunk << ": replicas " << absl::StrJoin(silent, ", ")
               << " pushed nothing for " << absl::FormatDuration(options_.sync_timeout)
               << "; the others no longer wait for them (ssp) until they push again";
  *ready = ReleaseSspLocked();
}

void ParameterShard::SyncTimerLocked(std::vector<PushCallback>* ready) {
  if (contributors_.empty() || absl::Now() < first_push_ + options_.sync_timeout) return;
  std::vector<int> missing;
  for (int r : live_) {
    if (!contributors_.count(r)) missing.push_back(r);
  }
  for (int r : missing) live_.erase(r);
  ++timed_out_;
  LOG(WARNING) << "chunk " << options_.chunk << ": sync step " << step_ << " waited "
               << absl::FormatDuration(options_.sync_timeout) << " for " << RequiredLocked()
               << " replicas; applying the " << contributors_.size()
               << " that arrived. Missing replicas (treated as gone until they push again): "
               << absl::StrJoin(missing, ", ");
  *ready = CompleteStepLocked();
}

void ParameterShard::TimerLoop() {
  while (true) {
    std::vector<PushCallback> ready;
    PushResult result;
    {
      absl::MutexLock lock(&mu_);
      // Poll at a fine grain: simpler than tracking every deadline change.
      mu_.AwaitWithTimeout(absl::Condition(&destroying_), absl::Milliseconds(50));
      if (destroying_) return;
      if (ssp_ != nullptr) {
        SspTimerLocked(&ready);
      } else {
        SyncTimerLocked(&ready);
      }
      result.global_step = step_;
      result.generation = generation_;
      result.job_done = DoneLocked();
    }
    for (auto& cb : ready) cb(absl::OkStatus(), result);
  }
}

int64_t ParameterShard::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

ParameterShard::Stats ParameterShard::GetStats() const {
  absl::MutexLock lock(&mu_);
  Stats s;
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

void ParameterShard::Shutdown() {
  std::vector<PushCallback> pending;
  PushResult result;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    pending = std::move(waiting_);
    waiting_.clear();
    for (SspWaiter& w : ssp_waiting_) pending.push_back(std::move(w.done));
    ssp_waiting_.clear();
    contributors_.clear();
    std::fill(grad_sum_.begin(), grad_sum_.end(), 0.0f);
    std::fill(stats_sum_.begin(), stats_sum_.end(), 0.0f);
    result.global_step = step_;
    result.generation = generation_;
    result.job_done = true;
  }
  for (auto& cb : pending) cb(absl::OkStatus(), result);
}

bool ParameterShard::WaitForShutdown(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&shutting_down_), timeout);
}

}  // namespace pstrain
