#include "ps_protocol/row_wire.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace pstrain {

void EncodeIds(absl::Span<const int64_t> ids, std::string* out) {
  out->resize(ids.size() * sizeof(int64_t));
  if (!ids.empty()) std::memcpy(out->data(), ids.data(), out->size());
}

void EncodeFloats(absl::Span<const float> values, std::string* out) {
  out->resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(out->data(), values.data(), out->size());
}

absl::Status DecodeIds(const std::string& bytes, const char* what, std::vector<int64_t>* ids) {
  if (bytes.size() % sizeof(int64_t) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", bytes.size(), " bytes are not a whole number of int64 ids"));
  }
  ids->resize(bytes.size() / sizeof(int64_t));
  if (!ids->empty()) std::memcpy(ids->data(), bytes.data(), bytes.size());
  return absl::OkStatus();
}

absl::Status DecodeFloats(const std::string& bytes, size_t expected, const char* what,
                          std::vector<float>* values) {
  if (bytes.size() != expected * sizeof(float)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", bytes.size(), " bytes, expected ", expected, " float32 values"));
  }
  values->resize(expected);
  if (expected > 0) std::memcpy(values->data(), bytes.data(), bytes.size());
  return absl::OkStatus();
}

absl::Status DecodeAllFloats(const std::string& bytes, const char* what,
                             std::vector<float>* values) {
  if (bytes.size() % sizeof(float) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", bytes.size(), " bytes are no whole number of float32 values"));
  }
  return DecodeFloats(bytes, bytes.size() / sizeof(float), what, values);
}

}  // namespace pstrain
