#include "rpc/grpc_util.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace pstrain {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

absl::Status FloatView(const std::string& bytes, const char* what, std::vector<float>* scratch,
                       absl::Span<const float>* view) {
  if (bytes.size() % sizeof(float) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", bytes.size(), " bytes, not a whole number of float32s"));
  }
  const size_t n = bytes.size() / sizeof(float);
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) == 0) {
    *view = absl::Span<const float>(reinterpret_cast<const float*>(bytes.data()), n);
  } else {
    scratch->resize(n);
    std::memcpy(scratch->data(), bytes.data(), bytes.size());
    *view = absl::Span<const float>(scratch->data(), n);
  }
  return absl::OkStatus();
}

}  // namespace pstrain
