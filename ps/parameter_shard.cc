#include "ps/parameter_shard.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
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
  PSTRAIN_RETURN_IF_ERROR(options.rule.Check());
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
      grad_sum_(options.rule.sync ? params_.size() : 0, 0.0f),
      stats_sum_(options.rule.sync ? state_.size() : 0, 0.0f),
      barrier_(absl::StrCat("chunk ", options.chunk), options.rule, &mu_, this) {}

ParameterShard::~ParameterShard() { barrier_.Stop(); }

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
  prev_step_ = -1;
  barrier_.ResetLocked(global_step, generation, &abandoned);
  return absl::OkStatus();
}

absl::StatusOr<PushResult> ParameterShard::Read(std::string* params, std::string* state, bool bf16,
                                                int64_t have_generation, int64_t have_version,
                                                int64_t at_step, int replica) const {
  absl::MutexLock lock(&mu_);
  PSTRAIN_RETURN_IF_ERROR(barrier_.ReadyLocked());
  PushResult r = barrier_.ResultLocked();
  r.params_version = params_version_;
  r.params_unchanged =
      have_version != 0 && have_generation == r.generation && have_version == params_version_;
  const std::vector<float>* values = &params_;
  const std::vector<float>* state_values = &state_;
  if (at_step >= 0 && at_step == prev_step_ && barrier_.step_locked() == at_step + 1 &&
      barrier_.CountedLocked(replica, at_step)) {
    values = &prev_params_;
    state_values = &prev_state_;
    r.global_step = at_step;
    // The step is still to be completed (by the pushes of the parts behind).
    r.job_done = barrier_.shutting_down_locked();
    r.params_version = 0;  // not the values a version names
    r.params_unchanged = false;
  }
  if (r.params_unchanged) {
    params->clear();
  } else if (bf16) {
    params->resize(values->size() * sizeof(uint16_t));
    FloatsToBf16(values->data(), static_cast<int64_t>(values->size()),
                 reinterpret_cast<uint16_t*>(params->data()));
  } else {
    params->resize(values->size() * sizeof(float));
    std::memcpy(params->data(), values->data(), params->size());
  }
  state->resize(state_values->size() * sizeof(float));
  if (!state_values->empty()) std::memcpy(state->data(), state_values->data(), state->size());
  return r;
}

void ParameterShard::ApplyLocked(const float* grads, const float* stats) {
  ScopedTraceEvent event(options_.trace, "ps", "apply");
  if (observer_) {
    last_grads_.assign(grads, grads + params_.size());
    last_stats_.assign(stats, stats + state_.size());
  }
  if (!optimizer_->LeavesParamsUnchanged(grads)) ++params_version_;
  optimizer_->Apply(barrier_.step_locked(), grads, params_.data());
  if (options_.state_decays.empty()) {
    const float d = options_.state_decay;
    for (size_t i = 0; i < state_.size(); ++i) state_[i] = d * state_[i] + (1.0f - d) * stats[i];
  } else {
    const float* d = options_.state_decays.data();
    for (size_t i = 0; i < state_.size(); ++i) {
      state_[i] = d[i] * state_[i] + (1.0f - d[i]) * stats[i];
    }
  }
}

absl::Status ParameterShard::ApplyPendingLocked(int contributors) {
  const float scale = 1.0f / static_cast<float>(std::max(1, contributors));
  for (float& g : grad_sum_) g *= scale;
  for (float& s : stats_sum_) s *= scale;
  // Kept for a replica that rejoins in the middle of this step (Read).
  prev_params_ = params_;
  prev_state_ = state_;
  prev_step_ = barrier_.step_locked();
  ApplyLocked(grad_sum_.data(), stats_sum_.data());
  DiscardPendingLocked();
  return absl::OkStatus();
}

void ParameterShard::DiscardPendingLocked() {
  std::fill(grad_sum_.begin(), grad_sum_.end(), 0.0f);
  std::fill(stats_sum_.begin(), stats_sum_.end(), 0.0f);
}

void ParameterShard::AdvancedLocked(int64_t step) {
  if (options_.trace != nullptr) options_.trace->SetStep(step);
}

void ParameterShard::SnapshotLocked() { snapshot_ = CopyLocked(); }

void ParameterShard::AppliedLocked(const AppliedPushes& applied) {
  if (!observer_) return;
  ChunkUpdate update;
  update.applied = applied;
  update.grads = std::move(last_grads_);
  update.stats = std::move(last_stats_);
  last_grads_.clear();
  last_stats_.clear();
  observer_(std::move(update));
}

void ParameterShard::SetUpdateObserver(UpdateObserver observer) {
  absl::MutexLock lock(&mu_);
  observer_ = std::move(observer);
  last_grads_.clear();
  last_stats_.clear();
  barrier_.SetRecordAppliesLocked(observer_ != nullptr);
}

absl::StatusOr<ParameterShard::BackupCopy> ParameterShard::CopyForBackup(
    absl::FunctionRef<void()> then) {
  absl::MutexLock lock(&mu_);
  PSTRAIN_RETURN_IF_ERROR(barrier_.ReadyLocked());
  BackupCopy copy;
  copy.values = CopyLocked();
  copy.progress = barrier_.ProgressLocked();
  copy.prev_params = prev_params_;
  copy.prev_state = prev_state_;
  copy.prev_step = prev_step_;
  then();
  return copy;
}

absl::Status ParameterShard::InstallCopy(const BackupCopy& copy) {
  const ShardSnapshot& v = copy.values;
  const bool prev_fits = copy.prev_step < 0 || (copy.prev_params.size() == params_.size() &&
                                                copy.prev_state.size() == state_.size());
  if (v.params.size() != params_.size() || v.state.size() != state_.size() || !prev_fits) {
    return absl::InvalidArgumentError(
        absl::StrCat("a copy of ", v.params.size(), " parameters and ", v.state.size(),
                     " state values for chunk ", options_.chunk, ", which holds ", params_.size(),
                     " and ", state_.size()));
  }
  std::vector<absl::Span<const float>> slots(v.slots.begin(), v.slots.end());
  std::vector<PushCallback> abandoned;
  absl::Status status = InitializeLocked(v.params, v.state, v.step, slots, v.optimizer_step,
                                         copy.progress.generation, abandoned);
  if (status.ok()) {
    absl::MutexLock lock(&mu_);
    status = barrier_.ResumeLocked(copy.progress, &abandoned);
    prev_params_ = copy.prev_params;
    prev_state_ = copy.prev_state;
    prev_step_ = copy.prev_step;
  }
  for (auto& cb : abandoned) cb(absl::AbortedError("the chunk was copied from its primary"), {});
  return status;
}

absl::Status ParameterShard::ApplyReplicated(const ChunkUpdate& update) {
  absl::MutexLock lock(&mu_);
  PSTRAIN_RETURN_IF_ERROR(barrier_.CheckFollowLocked(update.applied));
  const bool moved_only = update.grads.empty() && update.stats.empty();
  if (!moved_only && (static_cast<int64_t>(update.grads.size()) != size() ||
                      static_cast<int64_t>(update.stats.size()) != options_.num_state)) {
    return absl::InvalidArgumentError(
        absl::StrCat("an update of ", update.grads.size(), " gradients and ", update.stats.size(),
                     " statistics for chunk ", options_.chunk, ", which holds ", size(), " and ",
                     options_.num_state));
  }
  if (!moved_only) {
    if (options_.rule.sync) {
      prev_params_ = params_;
      prev_state_ = state_;
      prev_step_ = barrier_.step_locked();
    }
    ApplyLocked(update.grads.data(), update.stats.data());
  }
  barrier_.FollowLocked(update.applied);
  return absl::OkStatus();
}

ShardSnapshot ParameterShard::CopyLocked() const {
  ScopedTraceEvent event(options_.trace, "checkpoint", "copy chunk for checkpoint");
  const absl::Time start = absl::Now();
  ShardSnapshot s;
  s.step = barrier_.step_locked();
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
  return barrier_.RequestSnapshot(at_step);
}

absl::StatusOr<ShardSnapshot> ParameterShard::AwaitSnapshot(absl::Time deadline) {
  barrier_.AwaitSnapshot(deadline);
  absl::MutexLock lock(&mu_);
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

void ParameterShard::Push(int replica, int64_t step, absl::Span<const float> grads,
                          absl::Span<const float> batch_stats, PushCallback done,
                          int64_t generation) {
  if (static_cast<int64_t>(grads.size()) != size()) {
    done(absl::InvalidArgumentError(absl::StrCat(
             "push of ", grads.size(), " gradients to chunk ", options_.chunk, ", which holds ",
             size(), " parameters [", options_.begin, ", ", options_.end, ")")),
         {});
    return;
  }
  if (static_cast<int64_t>(batch_stats.size()) != options_.num_state) {
    done(absl::InvalidArgumentError(absl::StrCat("push of ", batch_stats.size(),
                                                 " batch statistics to ps shard ", options_.chunk,
                                                 ", which holds ", options_.num_state)),
         {});
    return;
  }
  // Called with mu_ held when the push counts: applied now (async) or added
  // to the step's sums (sync).
  auto add = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (!options_.rule.sync) {
      ApplyLocked(grads.data(), batch_stats.data());
      return absl::OkStatus();
    }
    for (size_t i = 0; i < grads.size(); ++i) grad_sum_[i] += grads[i];
    for (size_t i = 0; i < batch_stats.size(); ++i) stats_sum_[i] += batch_stats[i];
    return absl::OkStatus();
  };
  barrier_.Push(replica, step, generation, add, std::move(done), /*hold_until_applied=*/true);
}

}  // namespace pstrain
