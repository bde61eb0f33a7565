// pstrain-gce: a pstrain job on Compute Engine, from a cluster YAML with a
// gce: section (launch/gce_plan.h).
//   pstrain-gce up --config job.yaml [--dry_run]   creates the job's VMs
//   pstrain-gce status --config job.yaml           its instances and whether it is COMPLETED
//   pstrain-gce down --config job.yaml             deletes everything `up` made
//   pstrain-gce tensorboard --config job.yaml      how to watch it with TensorBoard
// Runs gcloud (--gcloud) with your credentials; --dry_run prints the commands.
// Unless the job is plaintext, `up` first makes the job's certificates here
// (--credentials_dir) and uploads each VM's share to the job dir
// (launch/gce_credentials.h), and `down` deletes both.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cloud/gcs_env.h"
#include "common/env.h"
#include "common/version.h"
#include "config/model_spec.h"
#include "gflags/gflags.h"
#include "launch/gce_credentials.h"
#include "launch/gce_plan.h"
#include "role/model_source.h"

DEFINE_string(config, "", "The job's YAML: a gce section and a training section.");
DEFINE_bool(dry_run, false, "Print the gcloud commands instead of running them.");
DEFINE_string(gcloud, "gcloud", "The gcloud command.");
DEFINE_string(scripts_dir, "",
              "Where startup.sh and shutdown.sh are (default: the package's "
              "/usr/share/pstrain/gce, or deploy/gce beside the build).");
DEFINE_string(credentials_dir, "",
              "Where the job's CA, certificates and token are made and kept on this machine "
              "(default: $XDG_CONFIG_HOME or ~/.config, then pstrain/gce/<project>/<job>). "
              "The CA key never leaves it.");

extern char** environ;

namespace {

std::string Quote(const std::string& arg) {
  if (arg.find_first_of(" '\"$\\\n") == std::string::npos) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs gcloud with `args`; its exit status (127 if it cannot start).
int Run(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {FLAGS_gcloud};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> quoted;
  for (const std::string& a : argv) quoted.push_back(Quote(a));
  std::printf("+ %s\n", absl::StrJoin(quoted, " ").c_str());
  std::fflush(stdout);
  if (FLAGS_dry_run) return 0;
  std::vector<char*> c_argv;
  for (std::string& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  pid_t pid;
  if (posix_spawnp(&pid, c_argv[0], nullptr, nullptr, c_argv.data(), environ) != 0) {
    std::fprintf(stderr, "pstrain-gce: cannot run %s: is the gcloud CLI installed?\n",
                 FLAGS_gcloud.c_str());
    return 127;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs gcloud with `args` and returns what it printed on stdout, trimmed.
absl::StatusOr<std::string> Output(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {FLAGS_gcloud};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> c_argv;
  for (std::string& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  int out[2];
  if (pipe(out) != 0) return absl::InternalError("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  pid_t pid;
  const int spawned = posix_spawnp(&pid, c_argv[0], &actions, nullptr, c_argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (spawned != 0) {
    close(out[0]);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", FLAGS_gcloud, ": is the gcloud CLI installed?"));
  }
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(out[0], buffer, sizeof(buffer))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buffer, n);
  }
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnauthenticatedError(absl::StrCat(FLAGS_gcloud, " ", absl::StrJoin(args, " "),
                                                   " failed: run gcloud auth login"));
  }
  return std::string(absl::StripAsciiWhitespace(text));
}

// Cloud Storage with this user's gcloud credentials (`gcloud auth
// print-access-token`), at gcloud's storage endpoint override
// (CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE=https://host/storage/v1/) if set;
// or the emulator STORAGE_EMULATOR_HOST names, without credentials, as
// Google's client libraries take it.
std::unique_ptr<pstrain::Env> UserGcs(pstrain::HttpTransport* transport) {
  pstrain::GcsOptions options;
  const char* emulator = std::getenv("STORAGE_EMULATOR_HOST");
  if (emulator != nullptr && emulator[0] != '\0') {
    options.endpoint = emulator;
    if (!absl::StartsWith(options.endpoint, "http"))
      options.endpoint = "http://" + options.endpoint;
    return std::make_unique<pstrain::GcsEnv>(transport, std::move(options));
  }
  const char* override_url = std::getenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE");
  if (override_url != nullptr && override_url[0] != '\0') {
    std::string endpoint = override_url;
    while (absl::EndsWith(endpoint, "/")) endpoint.pop_back();
    if (absl::EndsWith(endpoint, "/storage/v1")) endpoint.resize(endpoint.size() - 11);
    options.endpoint = endpoint;
  }
  options.access_token = [token = std::make_shared<absl::StatusOr<std::string>>(
                              absl::UnknownError(""))]() -> absl::StatusOr<std::string> {
    if (!token->ok()) *token = Output({"auth", "print-access-token"});
    return *token;
  };
  return std::make_unique<pstrain::GcsEnv>(transport, std::move(options));
}

absl::StatusOr<std::string> CredentialsDir(const pstrain::GceSpec& spec) {
  if (!FLAGS_credentials_dir.empty()) return FLAGS_credentials_dir;
  return pstrain::DefaultGceCredentialsDir(spec, std::getenv("XDG_CONFIG_HOME"),
                                           std::getenv("HOME"));
}

// up: the job's credentials made (or kept) here and each VM's share uploaded.
int HandOutCredentials(const pstrain::GcePlan& plan) {
  const pstrain::GceSpec& spec = plan.spec;
  if (spec.credentials.empty()) {
    std::printf("%s\n", plan.job.training.insecure
                            ? "the job is plaintext (training.insecure: true): no certificates"
                            : "the job's certificates are on the VMs' image (training.tls_dir)");
    return 0;
  }
  absl::StatusOr<std::string> dir = CredentialsDir(spec);
  if (!dir.ok()) {
    std::fprintf(stderr, "pstrain-gce: %s\n", std::string(dir.status().message()).c_str());
    return 2;
  }
  const size_t files = pstrain::GceUploadedCredentialFiles(plan).size();
  if (FLAGS_dry_run) {
    std::printf(
        "+ make the job's CA, certificates and token in %s; upload %zu of them (not "
        "ca.key) to %s/\n",
        dir->c_str(), files, spec.credentials.c_str());
    return 0;
  }
  absl::StatusOr<bool> made = pstrain::EnsureGceCredentials(plan, *dir);
  if (!made.ok()) {
    std::fprintf(stderr, "pstrain-gce: %s\n", std::string(made.status().message()).c_str());
    return 1;
  }
  std::printf("%s the job's CA, certificates and token in %s (ca.key stays there)\n",
              *made ? "made" : "kept", dir->c_str());
  std::unique_ptr<pstrain::HttpTransport> transport = pstrain::NewCurlTransport();
  std::unique_ptr<pstrain::Env> gcs = UserGcs(transport.get());
  if (absl::Status s =
          pstrain::UploadGceCredentials(pstrain::Env::Default(), gcs.get(), plan, *dir);
      !s.ok()) {
    std::fprintf(stderr, "pstrain-gce: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::printf(
      "uploaded %zu files to %s/: each VM fetches the CA certificate, the token and its "
      "own task's key\n",
      files, spec.credentials.c_str());
  std::fflush(stdout);
  return 0;
}

// down: the uploaded credentials deleted, then the local ones, but only once
// the bucket's are gone (a `down` run again finishes the job then).
int RemoveCredentials(const pstrain::GcePlan& plan) {
  const pstrain::GceSpec& spec = plan.spec;
  if (spec.credentials.empty()) return 0;
  absl::StatusOr<std::string> dir = CredentialsDir(spec);
  if (FLAGS_dry_run) {
    std::printf("+ delete %s/ and %s\n", spec.credentials.c_str(),
                dir.ok() ? dir->c_str() : "the local credentials");
    return 0;
  }
  std::unique_ptr<pstrain::HttpTransport> transport = pstrain::NewCurlTransport();
  std::unique_ptr<pstrain::Env> gcs = UserGcs(transport.get());
  absl::StatusOr<int> deleted = pstrain::DeleteGceCredentials(gcs.get(), spec);
  if (!deleted.ok()) {
    std::fprintf(stderr,
                 "pstrain-gce: %s; kept the job's CA and certificates in %s: run pstrain-gce "
                 "down again\n",
                 std::string(deleted.status().message()).c_str(),
                 dir.ok() ? dir->c_str() : "the local directory");
    return 1;
  }
  std::printf("deleted %d credential files in %s/\n", *deleted, spec.credentials.c_str());
  if (!dir.ok()) return 0;
  if (absl::Status s = pstrain::RemoveLocalGceCredentials(plan, *dir); !s.ok()) {
    std::fprintf(stderr, "pstrain-gce: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::printf("removed the job's CA and certificates in %s\n", dir->c_str());
  std::fflush(stdout);
  return 0;
}

std::string ScriptsDir() {
  if (!FLAGS_scripts_dir.empty()) return FLAGS_scripts_dir;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  for (const std::filesystem::path& dir :
       {exe / "../share/pstrain/gce", exe / "../../deploy/gce"}) {
    if (std::filesystem::exists(dir / "startup.sh")) return std::filesystem::canonical(dir);
  }
  return "/usr/share/pstrain/gce";
}

}  // namespace

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-gce")) return 0;
  gflags::SetUsageMessage("pstrain-gce up|status|down|tensorboard --config job.yaml");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  const std::string verb = argc == 2 ? argv[1] : "";
  if ((verb != "up" && verb != "status" && verb != "down" && verb != "tensorboard") ||
      FLAGS_config.empty()) {
    std::fprintf(stderr, "usage: pstrain-gce up|status|down|tensorboard --config job.yaml\n");
    return 2;
  }
  pstrain::Env* env = pstrain::ProcessEnv();
  absl::StatusOr<std::string> text = env->ReadFile(FLAGS_config);
  absl::StatusOr<pstrain::GcePlan> plan = text.ok()
                                              ? pstrain::ParseGcePlan(*text, FLAGS_config)
                                              : absl::StatusOr<pstrain::GcePlan>(text.status());
  if (!plan.ok()) {
    std::fprintf(stderr, "pstrain-gce: %s\n", std::string(plan.status().message()).c_str());
    return 2;
  }
  if (verb == "tensorboard") {
    std::fputs(pstrain::GceTensorBoardHelp(*plan).c_str(), stdout);
    return 0;
  }
  if (verb == "status" || verb == "down") {
    int failures = 0;
    for (const auto& command :
         verb == "status" ? pstrain::GceStatusCommands(*plan) : pstrain::GceDownCommands(*plan)) {
      failures += Run(command) != 0;
    }
    if (verb == "down") failures += RemoveCredentials(*plan);
    if (verb == "down" && failures > 0) {
      std::fprintf(stderr, "pstrain-gce: %d deletions failed (already gone?); see above\n",
                   failures);
    }
    return verb == "down" && failures > 0 ? 1 : 0;
  }
  // up: the job config every VM gets, in a file for --metadata-from-file. A
  // model spec file on this machine goes inside it (one in gs:// the VMs
  // read themselves).
  if (!absl::StartsWith(plan->job.training.model, "gs://")) {
    if (absl::Status s = pstrain::LoadModelSpecFile(pstrain::Env::Default(), &plan->job.training);
        !s.ok()) {
      std::fprintf(stderr, "pstrain-gce: %s\n", std::string(s.message()).c_str());
      return 2;
    }
    // A spec's starting values must be where the VMs can read them.
    if (plan->job.training.model_spec.has_value()) {
      const pstrain::ModelSpec* spec = &plan->job.training.model_spec->spec;
      if (!spec->weights.empty() && !absl::StartsWith(spec->weights, "gs://")) {
        std::fprintf(stderr,
                     "pstrain-gce: the model's starting weights are in %s, a file on this "
                     "machine that the VMs cannot read: copy it to gs:// and give that "
                     "(training.model: gs://<bucket>/<file>.onnx, or weights: gs://... in the "
                     "spec), or train from fresh values (training.onnx_weights: ignore)\n",
                     spec->weights.c_str());
        return 2;
      }
    }
  }
  const std::string config_file =
      std::filesystem::temp_directory_path() / ("pstrain-gce-" + plan->spec.job + "-config.yaml");
  if (absl::Status s = pstrain::Env::Default()->WriteFileAtomic(
          config_file, pstrain::JobConfigToYaml(plan->job));
      !s.ok()) {
    std::fprintf(stderr, "pstrain-gce: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  // The gcloud commands read it as metadata; nothing needs it after them.
  struct RemoveOnReturn {
    std::string path;
    ~RemoveOnReturn() { pstrain::Env::Default()->DeleteFile(path).IgnoreError(); }
  } remove_config{config_file};
  if (const int status = HandOutCredentials(*plan); status != 0) {
    if (status == 1) {
      std::fprintf(stderr,
                   "pstrain-gce: no VM was made; what was uploaded is removed by: "
                   "pstrain-gce down --config %s\n",
                   FLAGS_config.c_str());
    }
    return status;
  }
  for (const auto& command : pstrain::GceUpCommands(*plan, ScriptsDir(), config_file)) {
    if (const int status = Run(command); status != 0) {
      std::fprintf(stderr,
                   "pstrain-gce: the command above failed (status %d); what was made so far is "
                   "removed by: pstrain-gce down --config %s\n",
                   status, FLAGS_config.c_str());
      return 1;
    }
  }
  std::printf(
      "job %s is starting: %d worker(s), %d ps and the chief; watch it with: "
      "pstrain-gce status --config %s\n",
      plan->spec.job.c_str(), plan->spec.workers, plan->spec.ps, FLAGS_config.c_str());
  return 0;
}
