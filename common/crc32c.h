#ifndef PSTRAIN_COMMON_CRC32C_H_
#define PSTRAIN_COMMON_CRC32C_H_

#include <cstddef>
#include <cstdint>

// CRC-32C (Castagnoli), the checksum of TFRecord framing, TensorBoard event
// files and pstrain's checkpoints.

namespace pstrain {
namespace crc32c {

// The CRC of data[0, n) continuing from the CRC `crc` of earlier bytes
// (Extend(Extend(0, a), b) == Value(a + b)).
uint32_t Extend(uint32_t crc, const char* data, size_t n);

inline uint32_t Value(const char* data, size_t n) { return Extend(0, data, n); }

namespace internal {
// The table-driven form Extend uses on CPUs without SSE4.2 (exposed to test).
uint32_t ExtendPortable(uint32_t crc, const char* data, size_t n);
}  // namespace internal

// TFRecord's masking of a CRC stored next to the data it covers (so that a
// CRC of data that itself holds CRCs is not trivially related to them).
constexpr uint32_t kMaskDelta = 0xa282ead8u;
inline uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }
inline uint32_t Unmask(uint32_t masked) {
  const uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace crc32c
}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CRC32C_H_
