#ifndef PSTRAIN_COMMON_HASH_H_
#define PSTRAIN_COMMON_HASH_H_

// Hashes that are the same in every process and build (absl::Hash is salted
// per process): what places a row on a ps, seeds a stream or an initializer.

#include <cstdint>
#include <string_view>

namespace pstrain {

// SplitMix64's increment (the golden ratio in 64 bits).
inline constexpr uint64_t kSplitMix64Gamma = 0x9e3779b97f4a7c15ULL;

// SplitMix64's output function (Steele, Lea and Flood, "Fast splittable
// pseudorandom number generators", 2014): a bijective mix of 64 bits.
inline uint64_t MixBits64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// One step of a SplitMix64 stream: advances `*state` by kSplitMix64Gamma and
// returns the mix of the new state.
inline uint64_t SplitMix64Next(uint64_t* state) {
  *state += kSplitMix64Gamma;
  return MixBits64(*state);
}

// FNV-1a of the bytes of `s`, then MixBits64: a hash of a name (a table's)
// that is the same in every process and build.
inline uint64_t StableNameHash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;  // FNV-1a 64 prime
  }
  return MixBits64(h);
}

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_HASH_H_
