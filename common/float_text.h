#ifndef PSTRAIN_COMMON_FLOAT_TEXT_H_
#define PSTRAIN_COMMON_FLOAT_TEXT_H_

// Numbers written as text to be read back (model specs, job configs): the
// shortest decimal form that reads back as the same value (std::to_chars'
// round-trip guarantee), so 0.9f is written "0.9", not "0.899999976".

#include <charconv>
#include <string>

namespace pstrain {

// Reads back (strtof, absl::SimpleAtof) as exactly `v`.
inline std::string ShortestFloatText(float v) {
  char buffer[32];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), v);
  return std::string(buffer, result.ptr);
}

// Reads back (strtod, absl::SimpleAtod) as exactly `v`.
inline std::string ShortestDoubleText(double v) {
  char buffer[64];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), v);
  return std::string(buffer, result.ptr);
}

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_FLOAT_TEXT_H_
