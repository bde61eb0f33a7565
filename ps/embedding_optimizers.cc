#include "ps/embedding_optimizers.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

// Adam's t stops counting here (see EmbeddingOptimizerOptions): every
// integer up to it is exact in float.
constexpr float kMaxAdamStep = 16777216.0f;  // 2^24

absl::Status Bad(std::string_view table_name, std::string_view field_name,
                 std::string_view rule_text, float value) {
  // Debian's abseil has its own string_view type, distinct from std's.
  const absl::string_view table(table_name.data(), table_name.size());
  const absl::string_view field(field_name.data(), field_name.size());
  const absl::string_view rule(rule_text.data(), rule_text.size());
  return absl::InvalidArgumentError(absl::StrCat("embedding table '", table, "': optimizer ", field,
                                                 " must be ", rule, ", got ", value));
}

bool Positive(float x) { return std::isfinite(x) && x > 0.0f; }
bool NonNegative(float x) { return std::isfinite(x) && x >= 0.0f; }
bool Beta(float x) { return std::isfinite(x) && x >= 0.0f && x < 1.0f; }

}  // namespace

absl::Status ValidateEmbeddingOptimizer(std::string_view table,
                                        const EmbeddingOptimizerOptions& o) {
  switch (o.type) {
    case EmbeddingOptimizerType::kAdagrad:
      if (!Positive(o.learning_rate)) {
        return Bad(table, "learning_rate", "finite and > 0", o.learning_rate);
      }
      if (!Positive(o.initial_accumulator_value)) {
        return Bad(table, "initial_accumulator_value", "finite and > 0",
                   o.initial_accumulator_value);
      }
      return absl::OkStatus();
    case EmbeddingOptimizerType::kFtrl:
      if (!Positive(o.alpha)) return Bad(table, "alpha", "finite and > 0", o.alpha);
      if (!NonNegative(o.beta)) return Bad(table, "beta", "finite and >= 0", o.beta);
      if (!NonNegative(o.l1)) return Bad(table, "l1", "finite and >= 0", o.l1);
      if (!NonNegative(o.l2)) return Bad(table, "l2", "finite and >= 0", o.l2);
      if (o.beta == 0.0f && o.l2 == 0.0f) {
        return Bad(table, "beta", "> 0 when l2 is 0 (FTRL's denominator is 0 while n = 0)", o.beta);
      }
      return absl::OkStatus();
    case EmbeddingOptimizerType::kAdam:
      if (!Positive(o.learning_rate)) {
        return Bad(table, "learning_rate", "finite and > 0", o.learning_rate);
      }
      if (!Beta(o.beta1)) return Bad(table, "beta1", "in [0, 1)", o.beta1);
      if (!Beta(o.beta2)) return Bad(table, "beta2", "in [0, 1)", o.beta2);
      if (!Positive(o.epsilon)) return Bad(table, "epsilon", "finite and > 0", o.epsilon);
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("embedding table '", std::string(table),
                                                 "': unknown optimizer type ",
                                                 static_cast<int>(o.type)));
}

EmbeddingRowOptimizer::EmbeddingRowOptimizer(const EmbeddingOptimizerOptions& options, int64_t dim)
    : options_(options), dim_(dim) {
  switch (options.type) {
    case EmbeddingOptimizerType::kAdagrad:
      weight_floats_ = dim;
      slot_floats_ = dim;
      break;
    case EmbeddingOptimizerType::kFtrl:
      weight_floats_ = 0;
      slot_floats_ = 2 * dim;
      break;
    case EmbeddingOptimizerType::kAdam:
      weight_floats_ = dim;
      slot_floats_ = 2 * dim + 1;
      break;
  }
}

float EmbeddingRowOptimizer::FtrlWeight(float z, float n) const {
  const float l1 = options_.l1;
  if (std::fabs(z) <= l1) return 0.0f;
  const float denominator = (options_.beta + std::sqrt(n)) / options_.alpha + options_.l2;
  return -(z - std::copysign(l1, z)) / denominator;
}

void EmbeddingRowOptimizer::InitRow(const float* initial, float* stored) const {
  const int64_t d = dim_;
  switch (options_.type) {
    case EmbeddingOptimizerType::kAdagrad:
      std::copy(initial, initial + d, stored);
      std::fill(stored + d, stored + 2 * d, options_.initial_accumulator_value);
      return;
    case EmbeddingOptimizerType::kFtrl: {
      const float denominator = options_.beta / options_.alpha + options_.l2;
      for (int64_t i = 0; i < d; ++i) {
        const float w = initial[i];
        stored[i] = w == 0.0f ? 0.0f : -(w * denominator + std::copysign(options_.l1, w));
        stored[d + i] = 0.0f;
      }
      return;
    }
    case EmbeddingOptimizerType::kAdam:
      std::copy(initial, initial + d, stored);
      std::fill(stored + d, stored + 3 * d + 1, 0.0f);
      return;
  }
}

void EmbeddingRowOptimizer::Apply(const float* grad, float* stored) const {
  const int64_t d = dim_;
  switch (options_.type) {
    case EmbeddingOptimizerType::kAdagrad: {
      float* w = stored;
      float* accum = stored + d;
      const float lr = options_.learning_rate;
      for (int64_t i = 0; i < d; ++i) {
        accum[i] += grad[i] * grad[i];
        w[i] -= lr * grad[i] / std::sqrt(accum[i]);
      }
      return;
    }
    case EmbeddingOptimizerType::kFtrl: {
      float* z = stored;
      float* n = stored + d;
      const float inv_alpha = 1.0f / options_.alpha;
      for (int64_t i = 0; i < d; ++i) {
        const float g = grad[i];
        const float w = FtrlWeight(z[i], n[i]);
        const float n_new = n[i] + g * g;
        const float sigma = (std::sqrt(n_new) - std::sqrt(n[i])) * inv_alpha;
        z[i] += g - sigma * w;
        n[i] = n_new;
      }
      return;
    }
    case EmbeddingOptimizerType::kAdam: {
      float* w = stored;
      float* m = stored + d;
      float* v = stored + 2 * d;
      float& t = stored[3 * d];
      t = std::min(t + 1.0f, kMaxAdamStep);
      const double b1 = options_.beta1;
      const double b2 = options_.beta2;
      const float lr_t = static_cast<float>(
          options_.learning_rate * std::sqrt(1.0 - std::pow(b2, t)) / (1.0 - std::pow(b1, t)));
      const float beta1 = options_.beta1;
      const float beta2 = options_.beta2;
      const float eps = options_.epsilon;
      for (int64_t i = 0; i < d; ++i) {
        const float g = grad[i];
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        w[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps);
      }
      return;
    }
  }
}

void EmbeddingRowOptimizer::ReadWeights(const float* stored, float* out) const {
  if (options_.type == EmbeddingOptimizerType::kFtrl) {
    for (int64_t i = 0; i < dim_; ++i) out[i] = FtrlWeight(stored[i], stored[dim_ + i]);
    return;
  }
  std::copy(stored, stored + dim_, out);
}

std::string EmbeddingRowOptimizer::CheckRestoredRow(absl::Span<const float> weights,
                                                    absl::Span<const float> slots) const {
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!std::isfinite(weights[i])) return absl::StrCat("weight ", i, " is ", weights[i]);
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!std::isfinite(slots[i])) return absl::StrCat("slot ", i, " is ", slots[i]);
  }
  const size_t d = static_cast<size_t>(dim_);
  switch (options_.type) {
    case EmbeddingOptimizerType::kAdagrad:
      for (size_t i = 0; i < d; ++i) {
        if (slots[i] <= 0.0f) return absl::StrCat("Adagrad accumulator ", i, " is ", slots[i]);
      }
      break;
    case EmbeddingOptimizerType::kFtrl:
      for (size_t i = d; i < 2 * d; ++i) {
        if (slots[i] < 0.0f) return absl::StrCat("FTRL n ", i - d, " is ", slots[i]);
      }
      break;
    case EmbeddingOptimizerType::kAdam: {
      for (size_t i = d; i < 2 * d; ++i) {  // slots: m, v, t
        if (slots[i] < 0.0f) return absl::StrCat("Adam v ", i - d, " is ", slots[i]);
      }
      const float t = slots[2 * d];
      if (t < 0.0f || t > kMaxAdamStep || t != std::floor(t)) {
        return absl::StrCat("Adam step count is ", t, ", not an integer in [0, 2^24]");
      }
      break;
    }
  }
  return "";
}

void EmbeddingRowOptimizer::RestoreRow(absl::Span<const float> weights,
                                       absl::Span<const float> slots, float* stored) const {
  std::copy(weights.begin(), weights.begin() + weight_floats_, stored);
  std::copy(slots.begin(), slots.end(), stored + weight_floats_);
}

}  // namespace pstrain
