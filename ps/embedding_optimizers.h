#ifndef PSTRAIN_PS_EMBEDDING_OPTIMIZERS_H_
#define PSTRAIN_PS_EMBEDDING_OPTIMIZERS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace pstrain {

enum class EmbeddingOptimizerType { kAdagrad, kFtrl, kAdam };

// Per-row optimizers of an embedding table. Each row's slots are its own: a
// row not in a push is not touched (no decay of its slots, no step counted).
struct EmbeddingOptimizerOptions {
  EmbeddingOptimizerType type = EmbeddingOptimizerType::kAdagrad;

  // Adagrad and Adam. Finite, > 0.
  float learning_rate = 0.01f;

  // Adagrad, TF 1.x's rule (tf.train.AdagradOptimizer, no epsilon):
  //   accum += g^2;  w -= learning_rate * g / sqrt(accum)
  // Finite, > 0 (it is what keeps the first division finite).
  float initial_accumulator_value = 0.1f;

  // FTRL-Proximal, McMahan et al. 2013, "Ad Click Prediction: a View from the
  // Trenches", Algorithm 1, per coordinate with slots z and n (both start at 0):
  //   w     = 0                                             if |z| <= l1
  //         = -(z - sgn(z) l1) / ((beta + sqrt(n)) / alpha + l2)   otherwise
  //   sigma = (sqrt(n + g^2) - sqrt(n)) / alpha
  //   z    += g - sigma * w;   n += g^2
  // w is never stored: it is computed from z and n when read, as in the
  // paper. alpha finite > 0; beta, l1, l2 finite >= 0; beta > 0 or l2 > 0 (the
  // denominator must be > 0 while n = 0).
  float alpha = 0.05f;
  float beta = 1.0f;
  float l1 = 0.0f;
  float l2 = 0.0f;

  // Lazy Adam with a per-row step count t (the number of pushes that updated
  // this row) and TF's "epsilon hat" form:
  //   t += 1;  m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
  //   w -= learning_rate * sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + epsilon)
  // torch.optim.SparseAdam has the same update and epsilon placement, but its
  // t is one count per table (every step the table had any gradient), so a
  // row first touched at step 10000 gets almost no bias correction there,
  // while here its first update is corrected as a dense Adam's first step is.
  // (TF's LazyAdamOptimizer also counts per variable, not per row.) The two
  // agree for a row touched at every step since the table's first. t is kept
  // as a float slot and stops counting at 2^24, where 1 - beta^t is 1 in
  // float for any beta < 1 - 1e-6.
  // beta1, beta2 in [0, 1); epsilon finite > 0.
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
};

// InvalidArgument naming `table` and the bad field.
absl::Status ValidateEmbeddingOptimizer(std::string_view table,
                                        const EmbeddingOptimizerOptions& options);

// The update rule of one optimizer for rows of `dim` floats, over a row's
// stored floats: [weights (dim floats; none for FTRL)][slots]:
//   Adagrad: w, accum           FTRL: z, n           Adam: w, m, v, t (1 float)
// Stateless beyond its hyperparameters; safe to use from many threads on
// different rows.
class EmbeddingRowOptimizer {
 public:
  // `options` must have passed ValidateEmbeddingOptimizer.
  EmbeddingRowOptimizer(const EmbeddingOptimizerOptions& options, int64_t dim);

  EmbeddingOptimizerType type() const { return options_.type; }
  int64_t dim() const { return dim_; }
  // Weight floats stored per row: dim, or 0 for FTRL (derived from z and n).
  int64_t weight_floats() const { return weight_floats_; }
  int64_t slot_floats() const { return slot_floats_; }
  int64_t stored_floats() const { return weight_floats_ + slot_floats_; }

  // Sets a new row's stored floats so that its weights read back as
  // `initial` (dim floats). For FTRL, z is chosen so that w(z, n = 0) is
  // `initial` (up to rounding): z = -(w D + sgn(w) l1) for w != 0.
  void InitRow(const float* initial, float* stored) const;

  // Applies gradient `grad` (dim floats) to one row's stored floats.
  void Apply(const float* grad, float* stored) const;

  // The row's current weights (dim floats).
  void ReadWeights(const float* stored, float* out) const;

  // Restores a row from checkpointed weights and slots; `weights` is ignored
  // for FTRL (its weights are a function of z and n). Returns a message
  // naming the bad value, or "" when every value is finite and every slot is
  // in its domain (accum > 0; n, v >= 0; t an integer in [0, 2^24]).
  std::string CheckRestoredRow(absl::Span<const float> weights,
                               absl::Span<const float> slots) const;
  void RestoreRow(absl::Span<const float> weights, absl::Span<const float> slots,
                  float* stored) const;

 private:
  float FtrlWeight(float z, float n) const;

  EmbeddingOptimizerOptions options_;
  int64_t dim_;
  int64_t weight_floats_;
  int64_t slot_floats_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_EMBEDDING_OPTIMIZERS_H_
