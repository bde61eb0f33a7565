#ifndef PSTRAIN_CONFIG_WIRE_SECURITY_H_
#define PSTRAIN_CONFIG_WIRE_SECURITY_H_

// What one task needs to speak to the others securely: the job's CA, its own
// certificate and key (mutual TLS), and the job token every RPC carries.
// Plain data; the gRPC credentials are built from it in
// rpc/grpc_security.h.

#include <string>
#include <string_view>

namespace pstrain {

struct WireSecurity {
  bool tls = false;      // mutual TLS; false: plaintext (training.insecure)
  std::string ca_pem;    // the job's CA certificate
  std::string cert_pem;  // this task's certificate, signed by the CA
  std::string key_pem;   // its private key
  std::string token;     // the job token; empty: none sent or checked

  friend bool operator==(const WireSecurity&, const WireSecurity&) = default;
};

// The name a task's certificate carries and its files are called by:
// "ps-0", "chief-0", "worker-1".
std::string TaskCredentialName(std::string_view job_name, int task_index);

// True if `given` is the job token `expected`, comparing in time that does
// not depend on where they differ.
bool TokenEquals(std::string_view expected, std::string_view given);

}  // namespace pstrain

#endif  // PSTRAIN_CONFIG_WIRE_SECURITY_H_
