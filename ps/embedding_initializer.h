#ifndef PSTRAIN_PS_EMBEDDING_INITIALIZER_H_
#define PSTRAIN_PS_EMBEDDING_INITIALIZER_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/hash.h"  // MixBits64, StableNameHash (also for this header's older users)

namespace pstrain {

// The starting value of an embedding row.
enum class EmbeddingInitializerType {
  kZeros,
  kUniform,          // uniform in [-scale, scale)
  kTruncatedNormal,  // normal(0, scale), redrawn while |x| > 2 * scale (TensorFlow's rule)
};

struct EmbeddingInitializerOptions {
  EmbeddingInitializerType type = EmbeddingInitializerType::kZeros;
  // The bound a of uniform(-a, a), or the stddev of truncated_normal. Finite,
  // > 0 for those two; ignored for zeros.
  float scale = 0.05f;
  uint64_t seed = 0;
};

// InvalidArgument naming `table` and the bad field.
absl::Status ValidateEmbeddingInitializer(std::string_view table,
                                          const EmbeddingInitializerOptions& options);

// Computes the starting values of rows. A row's value is a function of
// (seed, table name, id) only: element j is drawn from a SplitMix64 stream
// whose state starts at MixBits64(key + MixBits64(id)), key = seed ^
// StableNameHash(name). So it never depends on the order rows are touched in,
// on which ps holds the row, or on the ps count. The values are bit-identical
// across processes of one build; truncated_normal uses std::log and std::cos
// and may differ in the last bit under another libm.
//
// Immutable after construction; safe to use from many threads.
class EmbeddingInitializer {
 public:
  // `options` must have passed ValidateEmbeddingInitializer.
  EmbeddingInitializer(std::string_view table, const EmbeddingInitializerOptions& options);

  // Writes row `id`'s starting value to `out` (out.size() = the row's dim).
  void Fill(int64_t id, absl::Span<float> out) const;

 private:
  EmbeddingInitializerType type_;
  float scale_;
  uint64_t key_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_EMBEDDING_INITIALIZER_H_
