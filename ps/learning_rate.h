#ifndef PSTRAIN_PS_LEARNING_RATE_H_
#define PSTRAIN_PS_LEARNING_RATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain {

// A learning rate as a function of the global step: a constant, or piecewise
// constant with TensorFlow's tf.train.piecewise_constant semantics. With
// boundaries b_0 < b_1 < ... < b_{k-1} and values v_0 .. v_k:
//   step <= b_0             -> v_0
//   b_{i-1} < step <= b_i   -> v_i
//   step > b_{k-1}          -> v_k
// so the step equal to a boundary still uses the earlier value.
//
// A value type; the factories check the invariants, so every instance is
// valid (boundaries strictly increasing, one more value than boundaries, every
// value finite and >= 0). Immutable after construction, so it is safe to read
// from any number of threads.
class LearningRateSchedule {
 public:
  // A constant 0.001, the default of tf.train.AdamOptimizer.
  LearningRateSchedule();

  static absl::StatusOr<LearningRateSchedule> Constant(float value);
  static absl::StatusOr<LearningRateSchedule> Piecewise(std::vector<int64_t> boundaries,
                                                        std::vector<float> values);

  // The learning rate at global step `step`.
  float At(int64_t step) const;

  const std::vector<int64_t>& boundaries() const { return boundaries_; }
  const std::vector<float>& values() const { return values_; }

  // "0.1" for a constant, "0.1 until step 1000, 0.01 until step 2000, then
  // 0.001" for a piecewise schedule; for logs.
  std::string ToString() const;

 private:
  LearningRateSchedule(std::vector<int64_t> boundaries, std::vector<float> values);

  std::vector<int64_t> boundaries_;
  std::vector<float> values_;  // boundaries_.size() + 1 entries
};

// Builds a schedule from a command-line style spec. "" gives the constant
// `base_lr`; "1000:0.1,2000:0.01" gives base_lr up to step 1000, base_lr * 0.1
// up to step 2000 and base_lr * 0.01 after (each "step:factor" pair starts a
// new piece after `step`). Whitespace around tokens is ignored. Errors are
// InvalidArgument and quote the offending token.
absl::StatusOr<LearningRateSchedule> ParseLearningRateSchedule(float base_lr,
                                                               const std::string& spec);

}  // namespace pstrain

#endif  // PSTRAIN_PS_LEARNING_RATE_H_
