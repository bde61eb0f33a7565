// pstrain-certs: makes a job's certificate authority, a certificate and key
// per task, and the job token (docs/security.md).
//
//   pstrain-certs --config job.yaml --out DIR     # every task of the cluster
//   pstrain-certs --names chief-0,worker-0,ps-0 --out DIR
//
// Then give every task training.tls_dir: DIR and training.token_file:
// DIR/job.token (or --tls_dir / --token_file). Each task reads ca.crt and its
// own <job>-<index>.crt/.key; copy a machine only what its tasks need, and
// keep ca.key away from the cluster (it is needed only to add certificates).

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "common/version.h"
#include "config/cluster_config.h"
#include "gflags/gflags.h"
#include "security/job_credentials.h"

DEFINE_string(config, "", "A cluster YAML: one certificate per task of its cluster.");
DEFINE_string(names, "", "Comma-separated certificate names instead (chief-0,worker-0,ps-0).");
DEFINE_string(out, "", "The directory to write (made 0700; existing files are not replaced).");
DEFINE_int32(days, 3650, "Days the certificates are valid.");

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-certs")) return 0;
  gflags::SetUsageMessage("pstrain-certs --config job.yaml --out DIR | --names a,b --out DIR");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (argc != 1 || FLAGS_out.empty() || FLAGS_config.empty() == FLAGS_names.empty() ||
      FLAGS_days < 1) {
    std::fprintf(stderr,
                 "usage: pstrain-certs --config job.yaml --out DIR\n"
                 "       pstrain-certs --names chief-0,worker-0,ps-0 --out DIR\n");
    return 2;
  }
  std::vector<std::string> names;
  if (!FLAGS_config.empty()) {
    absl::StatusOr<pstrain::JobConfig> config =
        pstrain::LoadJobConfig(pstrain::Env::Default(), FLAGS_config);
    if (!config.ok()) {
      std::fprintf(stderr, "pstrain-certs: %s\n", std::string(config.status().message()).c_str());
      return 2;
    }
    names = pstrain::CredentialNames(config->cluster);
  } else {
    names = absl::StrSplit(FLAGS_names, ',', absl::SkipWhitespace());
  }
  if (absl::Status s = pstrain::MakeJobCredentials(FLAGS_out, names, FLAGS_days); !s.ok()) {
    std::fprintf(stderr, "pstrain-certs: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::printf(
      "wrote the job's CA, certificates for %s, and the job token to %s\n"
      "give every task: training.tls_dir: %s and training.token_file: %s/job.token\n",
      absl::StrJoin(names, ", ").c_str(), FLAGS_out.c_str(), FLAGS_out.c_str(), FLAGS_out.c_str());
  return 0;
}
