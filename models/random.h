#ifndef PSTRAIN_MODELS_RANDOM_H_
#define PSTRAIN_MODELS_RANDOM_H_

#include <cstdint>

#include "common/hash.h"

namespace pstrain {

// A small, fast 64-bit generator (Steele et al.'s SplitMix64); good enough for
// dropout masks and initialization, and cheap to seed per example.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() { return SplitMix64Next(&state_); }

  // Uniform in [0, 1) with 24 bits of resolution.
  float Uniform() { return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f); }

 private:
  uint64_t state_;
};

// Derives an independent seed from two values (e.g. step seed and example).
inline uint64_t MixSeeds(uint64_t a, uint64_t b) {
  SplitMix64 g(a ^ (b * 0xD1B54A32D192ED03ull));
  g.Next();
  return g.Next();
}

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_RANDOM_H_
