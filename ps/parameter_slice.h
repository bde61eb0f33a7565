#ifndef PSTRAIN_PS_PARAMETER_SLICE_H_
#define PSTRAIN_PS_PARAMETER_SLICE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "ps/optimizer.h"

namespace pstrain {

// One contiguous slice of the flat parameter vector with its optimizer, plus
// the model's non-trainable state (batch-norm moving statistics), and the
// global step. This is what a parameter server owns; a local trainer uses one
// slice that covers the whole vector.
//
// Thread-safe: updates and reads are serialized by an internal mutex.
class ParameterSlice {
 public:
  // `segments` tile [0, num_params) (see Optimizer::Create). `state_decay` is
  // the moving-average decay applied to pushed batch statistics.
  static absl::StatusOr<std::unique_ptr<ParameterSlice>> Create(const OptimizerConfig& config,
                                                                std::vector<Segment> segments,
                                                                int64_t num_params,
                                                                int64_t num_state,
                                                                float state_decay);

  // Replaces parameters, state and step. InvalidArgument on a size mismatch.
  absl::Status Initialize(const std::vector<float>& params, const std::vector<float>& state,
                          int64_t global_step);

  // Applies one update from `grads` (num_params floats) and folds
  // `batch_stats` (num_state floats; may be null when num_state is 0) into the
  // moving state; returns the new global step. FailedPrecondition before
  // Initialize.
  absl::StatusOr<int64_t> Apply(const float* grads, const float* batch_stats);

  // Copies the current values out; returns the global step they belong to.
  int64_t Read(float* params, float* state) const;

  // Direct read access for a trainer that shares the process and calls Apply
  // itself between reads (no copy per step). Valid until the slice is destroyed;
  // must not be read concurrently with Apply.
  const float* params_unlocked() const { return params_.data(); }
  const float* state_unlocked() const { return state_.data(); }

  int64_t global_step() const;
  int64_t num_params() const { return static_cast<int64_t>(params_.size()); }
  int64_t num_state() const { return static_cast<int64_t>(state_.size()); }
  const Optimizer& optimizer() const { return *optimizer_; }

 private:
  ParameterSlice(std::unique_ptr<Optimizer> optimizer, int64_t num_params, int64_t num_state,
                 float state_decay);

  mutable absl::Mutex mu_;
  std::unique_ptr<Optimizer> optimizer_ ABSL_GUARDED_BY(mu_);
  std::vector<float> params_;  // Written only under mu_.
  std::vector<float> state_;   // Written only under mu_.
  const float state_decay_;
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  int64_t global_step_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_PARAMETER_SLICE_H_
