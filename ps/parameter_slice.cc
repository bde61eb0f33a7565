#include "ps/parameter_slice.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<ParameterSlice>> ParameterSlice::Create(
    const OptimizerConfig& config, std::vector<Segment> segments, int64_t num_params,
    int64_t num_state, float state_decay) {
  if (!(state_decay >= 0.0f && state_decay <= 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("moving-average decay must be in [0, 1], got ", state_decay));
  }
  if (num_state < 0) return absl::InvalidArgumentError("negative state size");
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer,
                           Optimizer::Create(config, std::move(segments), num_params));
  return std::unique_ptr<ParameterSlice>(
      new ParameterSlice(std::move(optimizer), num_params, num_state, state_decay));
}

ParameterSlice::ParameterSlice(std::unique_ptr<Optimizer> optimizer, int64_t num_params,
                               int64_t num_state, float state_decay)
    : optimizer_(std::move(optimizer)),
      params_(num_params),
      state_(num_state),
      state_decay_(state_decay) {}

absl::Status ParameterSlice::Initialize(const std::vector<float>& params,
                                        const std::vector<float>& state, int64_t global_step) {
  absl::MutexLock lock(&mu_);
  if (params.size() != params_.size() || state.size() != state_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("initial values have ", params.size(), " parameters and ", state.size(),
                     " state values; this slice holds ", params_.size(), " and ", state_.size()));
  }
  if (global_step < 0) return absl::InvalidArgumentError("negative global step");
  params_ = params;
  state_ = state;
  global_step_ = global_step;
  initialized_ = true;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ParameterSlice::Apply(const float* grads, const float* batch_stats) {
  absl::MutexLock lock(&mu_);
  if (!initialized_) {
    return absl::FailedPreconditionError("parameters are not initialized yet");
  }
  optimizer_->Apply(global_step_, grads, params_.data());
  if (!state_.empty()) {
    for (size_t i = 0; i < state_.size(); ++i) {
      state_[i] = state_decay_ * state_[i] + (1.0f - state_decay_) * batch_stats[i];
    }
  }
  return ++global_step_;
}

int64_t ParameterSlice::Read(float* params, float* state) const {
  absl::MutexLock lock(&mu_);
  std::copy(params_.begin(), params_.end(), params);
  std::copy(state_.begin(), state_.end(), state);
  return global_step_;
}

int64_t ParameterSlice::global_step() const {
  absl::MutexLock lock(&mu_);
  return global_step_;
}

}  // namespace pstrain
