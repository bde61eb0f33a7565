#include "security/kubernetes_secret.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

// A DNS-1123 subdomain (Secret names) or label (namespaces): lowercase
// letters, digits, '-' (and '.' in a subdomain), starting and ending with a
// letter or digit.
bool IsDnsName(const std::string& name, bool allow_dots, size_t max_size) {
  if (name.empty() || name.size() > max_size) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  for (char c : name) {
    if (!alnum(c) && c != '-' && !(allow_dots && c == '.')) return false;
  }
  return alnum(name.front()) && alnum(name.back());
}

}  // namespace

absl::StatusOr<std::string> KubernetesSecretYaml(Env* env, const std::string& dir,
                                                 const std::vector<std::string>& task_names,
                                                 const KubernetesSecretOptions& options) {
  if (!IsDnsName(options.name, /*allow_dots=*/true, 253)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", options.name,
                     "\" is not a Kubernetes Secret name: lowercase letters, digits, '-' and "
                     "'.', starting and ending with a letter or digit"));
  }
  if (!options.namespace_.empty() && !IsDnsName(options.namespace_, /*allow_dots=*/false, 63)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", options.namespace_,
                     "\" is not a Kubernetes namespace: at most 63 lowercase letters, digits "
                     "and '-', starting and ending with a letter or digit"));
  }
  std::vector<std::string> files = {"ca.crt", "job.token"};
  for (const std::string& name : task_names) {
    if (name == "client") continue;
    files.push_back(name + ".crt");
    files.push_back(name + ".key");
  }
  std::string yaml = absl::StrCat(
      "# The credentials of a pstrain job's tasks (pstrain-certs --kubernetes): the CA\n"
      "# certificate, each task's certificate and key, and the job token. Mount it as\n"
      "# training.tls_dir; token_file is job.token in it. ca.key is not here: keep it\n"
      "# off the cluster. Apply with: kubectl apply -f ",
      kKubernetesSecretFile,
      "\n"
      "apiVersion: v1\n"
      "kind: Secret\n"
      "metadata:\n"
      "  name: ",
      options.name, "\n");
  if (!options.namespace_.empty())
    absl::StrAppend(&yaml, "  namespace: ", options.namespace_, "\n");
  absl::StrAppend(&yaml,
                  "  labels:\n"
                  "    app.kubernetes.io/part-of: pstrain\n"
                  "type: Opaque\n"
                  "data:\n");
  for (const std::string& file : files) {
    const std::string path = JoinPath(dir, file);
    absl::StatusOr<std::string> contents = env->ReadFile(path);
    if (!contents.ok()) {
      return absl::NotFoundError(
          absl::StrCat("cannot read ", path, " for the Secret: ", contents.status().message()));
    }
    absl::StrAppend(&yaml, "  ", file, ": ", absl::Base64Escape(*contents), "\n");
  }
  return yaml;
}

}  // namespace pstrain
