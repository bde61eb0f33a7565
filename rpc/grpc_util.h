#ifndef PSTRAIN_RPC_GRPC_UTIL_H_
#define PSTRAIN_RPC_GRPC_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "grpcpp/support/status.h"

namespace pstrain {

// Converts at the gRPC boundary, keeping the code and the message.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// Views the little-endian float32 payload of a `bytes` field. When the
// string's buffer is not 4-byte aligned (never seen with protobuf's heap
// strings, but not promised) the floats are copied into `scratch`.
// InvalidArgument, naming `what`, if the size is not a multiple of 4.
absl::Status FloatView(const std::string& bytes, const char* what, std::vector<float>* scratch,
                       absl::Span<const float>* view);

// Largest message a pstrain channel or server accepts: whole parameter slices
// travel in one message.
constexpr int kMaxMessageBytes = 1 << 30;

}  // namespace pstrain

#endif  // PSTRAIN_RPC_GRPC_UTIL_H_
