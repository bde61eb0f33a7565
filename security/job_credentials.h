#ifndef PSTRAIN_SECURITY_JOB_CREDENTIALS_H_
#define PSTRAIN_SECURITY_JOB_CREDENTIALS_H_

// The credentials of one job: a certificate authority of its own, a
// certificate and key per task signed by it, and a random job token.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/cluster_config.h"

namespace pstrain {

// One name per task of the cluster ("chief-0", "worker-0", ..., "ps-0", ...;
// TaskCredentialName), plus "client" for tools that are not a task.
std::vector<std::string> CredentialNames(const ClusterSpec& cluster);

// Writes into the local directory `dir` (made 0700 if missing):
//   ca.crt, ca.key            the job's CA (ECDSA P-256), valid `days`
//   <name>.crt, <name>.key    per name: a certificate for the DNS name
//                             <name> (a task's identity, whatever its
//                             address), for TLS servers and clients
//   job.token                 64 random hex digits
// Keys and the token are 0600. An existing file is an error (AlreadyExists,
// naming it): the credentials of a running job are never replaced by
// accident.
absl::Status MakeJobCredentials(const std::string& dir, const std::vector<std::string>& names,
                                int days = 3650);

// Creates the local file `path`, which must not exist (AlreadyExists, naming
// it, if it does), with permissions `mode`, and writes `contents`.
absl::Status WriteNewFile(const std::string& path, const std::string& contents, int mode);

// The subject's DNS names of a PEM certificate (for tests and `pstrain-certs
// --show`), and whether it was signed by the CA in `ca_pem`.
struct CertificateInfo {
  std::vector<std::string> dns_names;
  bool signed_by_ca = false;
};
absl::StatusOr<CertificateInfo> InspectCertificate(const std::string& cert_pem,
                                                   const std::string& ca_pem);

}  // namespace pstrain

#endif  // PSTRAIN_SECURITY_JOB_CREDENTIALS_H_
