#ifndef PSTRAIN_PS_OPTIMIZER_H_
#define PSTRAIN_PS_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ps/learning_rate.h"

namespace pstrain {

enum class OptimizerType { kSgd, kMomentum, kAdam };

// "sgd", "momentum" or "adam", in any letter case. The error lists the valid
// names.
absl::StatusOr<OptimizerType> ParseOptimizerType(std::string_view name);

// The lower-case name ParseOptimizerType accepts.
std::string_view OptimizerTypeName(OptimizerType type);

// Hyperparameters, with TensorFlow 1.x's defaults and update rules.
struct OptimizerConfig {
  OptimizerType type = OptimizerType::kAdam;
  LearningRateSchedule learning_rate;  // constant 0.001 unless set

  // Momentum (tf.train.MomentumOptimizer). Finite, >= 0.
  float momentum = 0.9f;
  bool nesterov = false;

  // Adam (tf.train.AdamOptimizer, "epsilon hat" form: epsilon is added to
  // sqrt(v), after bias correction is folded into the learning rate).
  // beta1 and beta2 in [0, 1); epsilon finite and > 0.
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;

  // L2 regularization folded into the gradient: g += weight_decay * param,
  // the gradient of weight_decay * tf.nn.l2_loss(param). Finite, >= 0. It
  // goes through the optimizer's rule (for Adam this is L2, not AdamW).
  float weight_decay = 0.0f;
  // A variable whose name contains any of these substrings, or matches any
  // of them that is a shell pattern (has * ? or [: "*/gamma",
  // "conv2d_*/kernel"), gets no weight decay, e.g. {"bias", "batch_norm"}.
  // Entries must be non-empty.
  std::vector<std::string> weight_decay_exclusions;
};

// The part [begin, end) of a ps slice that belongs to `variable`; offsets are
// relative to the start of the slice.
struct Segment {
  std::string variable;
  int64_t begin = 0;
  int64_t end = 0;
  // A layer with `trainable: false`: its values stay as they are (no
  // update, no weight decay, no slot change).
  bool frozen = false;
};

// Applies gradient updates to one contiguous slice of the flat parameter
// vector and owns the optimizer's slot variables (momentum accumulator, Adam's
// m and v) for that slice.
//
// Apply splits the slice into blocks and updates them in parallel on the
// calling thread's oneTBB arena; each element's update depends only on that
// element, so the result does not depend on the split or the thread count.
//
// Thread safety: Apply and set_adam_step mutate state and must not run
// concurrently with each other or with reads of slot(); the caller (the
// parameter shard) serializes them, e.g. under its shard lock. The const
// accessors may run concurrently with each other.
class Optimizer {
 public:
  // `segments` must tile [0, size) exactly, in order, with no gaps or
  // overlaps (empty segments are allowed). Fails with InvalidArgument naming
  // the bad segment or hyperparameter.
  static absl::StatusOr<std::unique_ptr<Optimizer>> Create(const OptimizerConfig& config,
                                                           std::vector<Segment> segments,
                                                           int64_t size);

  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Applies one update to params[0, size) from grad[0, size). The learning
  // rate is config().learning_rate.At(global_step). Adam first increments its
  // step count t (one per optimizer, not per variable) and uses
  //   lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
  //   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g^2
  //   p -= lr_t * m / (sqrt(v) + epsilon)
  // Momentum: accum = momentum * accum + g, then p -= lr * accum, or with
  // Nesterov p -= lr * (g + momentum * accum). SGD: p -= lr * g.
  // `grad` and `params` must hold size() floats each and not overlap each
  // other or the slots; they may be null only when size() == 0. Allocates
  // nothing.
  void Apply(int64_t global_step, const float* grad, float* params);
  // Whether Apply with `grad` cannot move any parameter: every variable is
  // frozen, or plain SGD without weight decay gets an all-zero gradient on
  // its variables. (Momentum and Adam move parameters with zero gradients,
  // weight decay shrinks them.)
  bool LeavesParamsUnchanged(const float* grad) const;

  // Slot variables, for checkpoints: 0 for SGD, 1 for momentum ("momentum"),
  // 2 for Adam ("m", "v"). Each holds size() floats, zero after Create.
  int num_slots() const { return static_cast<int>(slots_.size()); }
  const std::string& slot_name(int i) const;
  float* slot(int i);
  const float* slot(int i) const;

  int64_t size() const { return size_; }
  const std::vector<Segment>& segments() const { return segments_; }
  const OptimizerConfig& config() const { return config_; }

  // Adam's step count t, the number of Apply calls since Create or the last
  // set_adam_step (saved in checkpoints as "iterations"). Always 0 for the
  // other optimizers. `step` must be >= 0; validate checkpoint data first.
  int64_t adam_step() const { return adam_step_; }
  void set_adam_step(int64_t step);

 private:
  // A maximal run of consecutive elements that share one weight-decay
  // setting, so Apply needs no per-element lookup.
  struct Run {
    int64_t begin;
    int64_t end;
    bool decay;
  };

  Optimizer(const OptimizerConfig& config, std::vector<Segment> segments, int64_t size);

  // Calls kernel(begin, end, decay) for every run piece in [lo, hi).
  template <typename Kernel>
  void ForEachRun(int64_t lo, int64_t hi, const Kernel& kernel) const;

  const OptimizerConfig config_;
  const std::vector<Segment> segments_;
  const int64_t size_;
  std::vector<Run> runs_;
  std::vector<std::string> slot_names_;
  std::vector<std::vector<float>> slots_;
  int64_t adam_step_ = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_OPTIMIZER_H_
