#include "config/wire_security.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "config/cluster_config.h"

namespace pstrain {

std::string TaskCredentialName(std::string_view job_name, int task_index) {
  const std::string_view job = job_name == "master" ? std::string_view("chief") : job_name;
  return std::string(job) + "-" + std::to_string(task_index);
}

bool TokenEquals(std::string_view expected, std::string_view given) {
  unsigned char differ = expected.size() == given.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) {
    differ |= static_cast<unsigned char>(given[i]) ^
              static_cast<unsigned char>(expected.empty() ? 0 : expected[i % expected.size()]);
  }
  return differ == 0 && !expected.empty();
}

namespace {

constexpr size_t kMinTokenChars = 16;

constexpr char kHowToMake[] =
    "make the job's certificates and token with `pstrain-certs --config JOB.yaml --out DIR`, "
    "then set training.tls_dir: DIR and training.token_file: DIR/job.token (or --tls_dir, "
    "--token_file)";

absl::StatusOr<std::string> ReadCredential(Env* env, const std::string& path, const char* key) {
  absl::StatusOr<std::string> contents = env->ReadFile(path);
  if (!contents.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("training.", key, ": cannot read ", path, ": ",
                                                   contents.status().message(), "; ", kHowToMake));
  }
  return contents;
}

}  // namespace

absl::StatusOr<WireSecurity> LoadWireSecurity(Env* env, const TrainingSpec& t,
                                              const TaskSpec& task) {
  if (t.insecure && !t.tls_dir.empty()) {
    return absl::InvalidArgumentError(
        "training.insecure is true and training.tls_dir is set: choose mutual TLS (drop "
        "insecure) or plaintext (drop tls_dir)");
  }
  if (!t.insecure && (t.tls_dir.empty() || t.token_file.empty())) {
    const char* missing = t.tls_dir.empty() && t.token_file.empty() ? "training.tls_dir and "
                                                                      "training.token_file are"
                          : t.tls_dir.empty()                       ? "training.tls_dir is"
                                                                    : "training.token_file is";
    return absl::InvalidArgumentError(absl::StrCat(
        missing,
        " not set, so this task's RPCs would be plaintext and unauthenticated: ", kHowToMake,
        "; or set training.insecure: true (--insecure) to run without, only on a "
        "network you trust"));
  }
  WireSecurity wire;
  if (!t.tls_dir.empty()) {
    const std::string name = TaskCredentialName(task.job_name, task.task_index);
    wire.tls = true;
    PSTRAIN_ASSIGN_OR_RETURN(wire.ca_pem,
                             ReadCredential(env, JoinPath(t.tls_dir, "ca.crt"), "tls_dir"));
    PSTRAIN_ASSIGN_OR_RETURN(wire.cert_pem,
                             ReadCredential(env, JoinPath(t.tls_dir, name + ".crt"), "tls_dir"));
    PSTRAIN_ASSIGN_OR_RETURN(wire.key_pem,
                             ReadCredential(env, JoinPath(t.tls_dir, name + ".key"), "tls_dir"));
  }
  if (!t.token_file.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(std::string token, ReadCredential(env, t.token_file, "token_file"));
    wire.token = std::string(absl::StripAsciiWhitespace(token));
    if (wire.token.size() < kMinTokenChars) {
      return absl::InvalidArgumentError(
          absl::StrCat("training.token_file: ", t.token_file, " holds a token of ",
                       wire.token.size(), " characters; a job token has at least ", kMinTokenChars,
                       " (pstrain-certs writes 64 hex digits)"));
    }
    for (char c : wire.token) {
      if (c < 0x21 || c > 0x7e) {
        return absl::InvalidArgumentError(absl::StrCat(
            "training.token_file: ", t.token_file,
            " holds a character that is not printable ASCII; a job token is letters, digits "
            "and punctuation (pstrain-certs writes 64 hex digits)"));
      }
    }
  }
  return wire;
}

}  // namespace pstrain
