#ifndef PSTRAIN_SECURITY_KUBERNETES_SECRET_H_
#define PSTRAIN_SECURITY_KUBERNETES_SECRET_H_

// A job's credentials (security/job_credentials.h) as a Kubernetes Secret
// manifest, for `pstrain-certs --kubernetes`: the pods mount it as their
// training.tls_dir (deploy/kubernetes/, docs/kubernetes.md).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace pstrain {

struct KubernetesSecretOptions {
  std::string name = "pstrain-credentials";  // metadata.name: a DNS-1123 subdomain
  std::string namespace_;                    // metadata.namespace; empty: kubectl's current
};

// The Secret (apiVersion v1, kind Secret, type Opaque) whose data holds, read
// through `env` from `dir` as MakeJobCredentials wrote it: ca.crt, job.token
// and <name>.crt, <name>.key for each of `task_names` ("chief-0", "ps-1", ...;
// "client" is left out, as a pod never needs it). ca.key is never included:
// the cluster needs no power to sign. NotFound naming the file if one is
// missing; InvalidArgument for a name Kubernetes would refuse.
absl::StatusOr<std::string> KubernetesSecretYaml(Env* env, const std::string& dir,
                                                 const std::vector<std::string>& task_names,
                                                 const KubernetesSecretOptions& options);

// The file name `pstrain-certs --kubernetes` writes the Secret to, in its
// --out directory (0600: it holds the tasks' private keys).
inline constexpr char kKubernetesSecretFile[] = "kubernetes-secret.yaml";

}  // namespace pstrain

#endif  // PSTRAIN_SECURITY_KUBERNETES_SECRET_H_
