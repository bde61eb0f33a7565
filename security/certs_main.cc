// pstrain-certs: makes a job's certificate authority, a certificate and key
// per task, and the job token (docs/security.md).
//
//   pstrain-certs --config job.yaml --out DIR     # every task of the cluster
//   pstrain-certs --names chief-0,worker-0,ps-0 --out DIR
//   pstrain-certs --workers 2 --ps 1 --out DIR    # the chief, 2 workers, 1 ps
//
// Then give every task training.tls_dir: DIR and training.token_file:
// DIR/job.token (or --tls_dir / --token_file). Each task reads ca.crt and its
// own <job>-<index>.crt/.key; copy a machine only what its tasks need, and
// keep ca.key away from the cluster (it is needed only to add certificates).
//
// --kubernetes also writes DIR/kubernetes-secret.yaml, a Secret holding what
// the tasks read (not ca.key) for the pods to mount as their tls_dir
// (docs/kubernetes.md).

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "common/version.h"
#include "config/cluster_config.h"
#include "config/wire_security.h"
#include "gflags/gflags.h"
#include "security/job_credentials.h"
#include "security/kubernetes_secret.h"

DEFINE_string(config, "", "A cluster YAML: one certificate per task of its cluster.");
DEFINE_string(names, "", "Comma-separated certificate names instead (chief-0,worker-0,ps-0).");
DEFINE_int32(workers, -1, "Or: the chief, this many workers and --ps parameter servers.");
DEFINE_int32(ps, -1, "With --workers: the number of parameter servers.");
DEFINE_string(out, "", "The directory to write (made 0700; existing files are not replaced).");
DEFINE_int32(days, 3650, "Days the certificates are valid.");
DEFINE_bool(kubernetes, false,
            "Also write OUT/kubernetes-secret.yaml: a Secret of the tasks' credentials (not "
            "ca.key) for the pods to mount as training.tls_dir.");
DEFINE_string(secret_name, "pstrain-credentials", "--kubernetes: the Secret's name.");
DEFINE_string(namespace, "", "--kubernetes: the Secret's namespace (default: kubectl's).");

namespace {

constexpr char kUsage[] =
    "usage: pstrain-certs --config job.yaml --out DIR [--kubernetes]\n"
    "       pstrain-certs --names chief-0,worker-0,ps-0 --out DIR [--kubernetes]\n"
    "       pstrain-certs --workers N --ps P --out DIR [--kubernetes]\n";

int Fail(const std::string& message) {
  std::fprintf(stderr, "pstrain-certs: %s\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-certs")) return 0;
  gflags::SetUsageMessage(kUsage);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  const bool by_count = FLAGS_workers >= 0 || FLAGS_ps >= 0;
  const int sources = !FLAGS_config.empty() + !FLAGS_names.empty() + by_count;
  if (argc != 1 || FLAGS_out.empty() || sources != 1 || FLAGS_days < 1) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::vector<std::string> names;
  if (!FLAGS_config.empty()) {
    absl::StatusOr<pstrain::JobConfig> config =
        pstrain::LoadJobConfig(pstrain::Env::Default(), FLAGS_config);
    if (!config.ok()) return Fail(std::string(config.status().message()));
    names = pstrain::CredentialNames(config->cluster);
  } else if (by_count) {
    if (FLAGS_workers < 0 || FLAGS_ps < 1) {
      return Fail("--workers N (0 or more) and --ps P (1 or more) go together");
    }
    names.push_back(pstrain::TaskCredentialName("chief", 0));
    for (int i = 0; i < FLAGS_workers; ++i)
      names.push_back(pstrain::TaskCredentialName("worker", i));
    for (int i = 0; i < FLAGS_ps; ++i) names.push_back(pstrain::TaskCredentialName("ps", i));
    names.push_back("client");
  } else {
    names = absl::StrSplit(FLAGS_names, ',', absl::SkipWhitespace());
  }
  pstrain::KubernetesSecretOptions secret;
  secret.name = FLAGS_secret_name;
  secret.namespace_ = FLAGS_namespace;
  if (FLAGS_kubernetes) {
    // Refuse a bad name before making anything.
    absl::StatusOr<std::string> check =
        pstrain::KubernetesSecretYaml(pstrain::Env::Default(), "", {}, secret);
    if (absl::IsInvalidArgument(check.status())) return Fail(std::string(check.status().message()));
  }
  if (absl::Status s = pstrain::MakeJobCredentials(FLAGS_out, names, FLAGS_days); !s.ok()) {
    std::fprintf(stderr, "pstrain-certs: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::printf(
      "wrote the job's CA, certificates for %s, and the job token to %s\n"
      "give every task: training.tls_dir: %s and training.token_file: %s/job.token\n",
      absl::StrJoin(names, ", ").c_str(), FLAGS_out.c_str(), FLAGS_out.c_str(), FLAGS_out.c_str());
  if (FLAGS_kubernetes) {
    absl::StatusOr<std::string> yaml =
        pstrain::KubernetesSecretYaml(pstrain::Env::Default(), FLAGS_out, names, secret);
    const std::string path = pstrain::JoinPath(FLAGS_out, pstrain::kKubernetesSecretFile);
    absl::Status written = yaml.ok() ? pstrain::WriteNewFile(path, *yaml, 0600) : yaml.status();
    if (!written.ok()) {
      std::fprintf(stderr, "pstrain-certs: %s\n", std::string(written.message()).c_str());
      return 1;
    }
    std::printf(
        "wrote the Secret %s to %s (ca.key stays out of it)\n"
        "apply it with: kubectl apply -f %s; the pods mount it as their tls_dir "
        "(deploy/kubernetes/)\n",
        secret.name.c_str(), path.c_str(), path.c_str());
  }
  return 0;
}
