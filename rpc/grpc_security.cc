#include "rpc/grpc_security.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "grpc/grpc_security_constants.h"

namespace pstrain {

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const WireSecurity& wire) {
  if (!wire.tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = wire.ca_pem;
  options.pem_key_cert_pairs.push_back({wire.key_pem, wire.cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const WireSecurity& wire,
                                                                const std::string& server_name,
                                                                grpc::ChannelArguments* args) {
  if (!wire.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = wire.ca_pem;
  options.pem_private_key = wire.key_pem;
  options.pem_cert_chain = wire.cert_pem;
  args->SetSslTargetNameOverride(server_name);
  return grpc::SslCredentials(options);
}

void AttachJobToken(const WireSecurity& wire, grpc::ClientContext* context) {
  if (!wire.token.empty()) context->AddMetadata(kJobTokenHeader, wire.token);
}

absl::Status CheckJobToken(const std::string& token, const grpc::ServerContextBase& context) {
  if (token.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(kJobTokenHeader);
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        absl::StrCat("the call carries no job token (metadata ", kJobTokenHeader,
                     "); this ps serves only its job's tasks: give them the job's "
                     "training.token_file"));
  }
  if (metadata.count(kJobTokenHeader) != 1 ||
      !TokenEquals(token, std::string_view(it->second.data(), it->second.size()))) {
    return absl::UnauthenticatedError(
        "the call carries a wrong job token: this ps belongs to another job, or the task was "
        "given another training.token_file");
  }
  return absl::OkStatus();
}

}  // namespace pstrain
