#ifndef PSTRAIN_PS_PROTOCOL_ROW_WIRE_H_
#define PSTRAIN_PS_PROTOCOL_ROW_WIRE_H_

// The bytes of TableRows (proto/parameter_server.proto): ids as
// little-endian int64, rows as little-endian float32. Copies, so neither
// side depends on a string buffer's alignment. Free of gRPC.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace pstrain {

void EncodeIds(absl::Span<const int64_t> ids, std::string* out);
void EncodeFloats(absl::Span<const float> values, std::string* out);

// InvalidArgument naming `what` if the size is not a whole number of values
// (or, for DecodeFloats, not `expected` values).
absl::Status DecodeIds(const std::string& bytes, const char* what, std::vector<int64_t>* ids);
absl::Status DecodeFloats(const std::string& bytes, size_t expected, const char* what,
                          std::vector<float>* values);
// All of `bytes` as float32 values (InvalidArgument naming `what` if they are
// no whole number of them).
absl::Status DecodeAllFloats(const std::string& bytes, const char* what,
                             std::vector<float>* values);

}  // namespace pstrain

#endif  // PSTRAIN_PS_PROTOCOL_ROW_WIRE_H_
