#ifndef PSTRAIN_RPC_GRPC_SECURITY_H_
#define PSTRAIN_RPC_GRPC_SECURITY_H_

// WireSecurity as gRPC credentials: the adapter between a task's
// certificates and token and the channels and servers that carry them.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "config/wire_security.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/channel_arguments.h"

namespace pstrain {

// The metadata key the job token travels under.
inline constexpr char kJobTokenHeader[] = "x-pstrain-job-token";

// A server that presents this task's certificate and accepts only clients
// with a certificate the job's CA signed; plaintext when !wire.tls.
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const WireSecurity& wire);

// A channel that presents this task's certificate and accepts only a server
// whose certificate the job's CA signed for `server_name` (e.g. "ps-1":
// checked whatever address the task has); plaintext when !wire.tls.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const WireSecurity& wire,
                                                                const std::string& server_name,
                                                                grpc::ChannelArguments* args);

// Puts the job token (if any) on a call.
void AttachJobToken(const WireSecurity& wire, grpc::ClientContext* context);

// OK if the call carries `token` (or `token` is empty); else Unauthenticated
// saying what was wrong (no token, or another one).
absl::Status CheckJobToken(const std::string& token, const grpc::ServerContextBase& context);

}  // namespace pstrain

#endif  // PSTRAIN_RPC_GRPC_SECURITY_H_
