#ifndef PSTRAIN_PS_PROTOCOL_BF16_H_
#define PSTRAIN_PS_PROTOCOL_BF16_H_

#include <cstdint>
#include <cstring>

namespace pstrain {

// bfloat16: the top 16 bits of a float32 (same exponent range, 8 bits of
// precision). Used on the wire to halve the bytes of gradients and pulled
// parameters; masters stay float32 on the parameter servers.

// Round to nearest, ties to even; NaN stays NaN.
inline uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  }
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float Bf16ToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Whole buffers; the loops vectorize.
void FloatsToBf16(const float* in, int64_t n, uint16_t* out);
void Bf16ToFloats(const uint16_t* in, int64_t n, float* out);

}  // namespace pstrain

#endif  // PSTRAIN_PS_PROTOCOL_BF16_H_
