#ifndef PSTRAIN_COMMON_CODING_H_
#define PSTRAIN_COMMON_CODING_H_

// Fixed-width integers as bytes, the one way pstrain's file formats spell
// them (the TFRecord framing of common/record_format.h, the rows files of
// io/row_checkpoint.h): little-endian, least significant byte first, whatever
// the host's byte order, as in leveldb's util/coding.h.
//
// Encode*/Decode* write or read exactly 4 or 8 bytes at the pointer, which
// must have that many; Put* append them to a string. No alignment is needed.

#include <cstdint>
#include <string>

namespace pstrain {

inline void EncodeFixed32(char* dst, uint32_t value) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<char>(value >> (8 * i));
}

inline void EncodeFixed64(char* dst, uint64_t value) {
  for (int i = 0; i < 8; ++i) dst[i] = static_cast<char>(value >> (8 * i));
}

inline uint32_t DecodeFixed32(const char* ptr) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(ptr[i]);
  return value;
}

inline uint64_t DecodeFixed64(const char* ptr) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(ptr[i]);
  return value;
}

inline void PutFixed32(std::string* dst, uint32_t value) {
  char buf[4];
  EncodeFixed32(buf, value);
  dst->append(buf, sizeof(buf));
}

inline void PutFixed64(std::string* dst, uint64_t value) {
  char buf[8];
  EncodeFixed64(buf, value);
  dst->append(buf, sizeof(buf));
}

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CODING_H_
