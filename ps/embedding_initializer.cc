#include "ps/embedding_initializer.h"

#include <cmath>
#include <numbers>
#include <string>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

// SplitMix64: a counter-based generator; the n-th output is
// MixBits64(state0 + n * gamma).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t Next() { return SplitMix64Next(&state_); }
  // Uniform in [0, 1) with 53 random bits.
  double NextDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

}  // namespace

absl::Status ValidateEmbeddingInitializer(std::string_view table,
                                          const EmbeddingInitializerOptions& options) {
  if (options.type == EmbeddingInitializerType::kZeros) return absl::OkStatus();
  if (!std::isfinite(options.scale) || options.scale <= 0.0f) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding table '", std::string(table), "': initializer scale must be finite and > 0 (",
        options.type == EmbeddingInitializerType::kUniform ? "the bound a of uniform(-a, a)"
                                                           : "the stddev of truncated_normal",
        "), got ", options.scale));
  }
  return absl::OkStatus();
}

EmbeddingInitializer::EmbeddingInitializer(std::string_view table,
                                           const EmbeddingInitializerOptions& options)
    : type_(options.type), scale_(options.scale), key_(options.seed ^ StableNameHash(table)) {}

void EmbeddingInitializer::Fill(int64_t id, absl::Span<float> out) const {
  if (type_ == EmbeddingInitializerType::kZeros) {
    for (float& x : out) x = 0.0f;
    return;
  }
  SplitMix64 rng(MixBits64(key_ + MixBits64(static_cast<uint64_t>(id))));
  if (type_ == EmbeddingInitializerType::kUniform) {
    const double a = scale_;
    for (float& x : out) x = static_cast<float>(-a + 2.0 * a * rng.NextDouble());
    return;
  }
  // Truncated normal by Box-Muller (the cosine half only) and rejection beyond
  // two stddevs, as tf.random.truncated_normal; about 4.6% of draws are redrawn.
  for (float& x : out) {
    double z;
    do {
      const double u1 = 1.0 - rng.NextDouble();  // (0, 1]: log(u1) is finite
      const double u2 = rng.NextDouble();
      z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    } while (std::fabs(z) > 2.0);
    x = static_cast<float>(z * scale_);
  }
}

}  // namespace pstrain
