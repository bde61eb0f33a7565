// pstrain-gce: a pstrain job on Compute Engine, from a cluster YAML with a
// gce: section (launch/gce_plan.h).
//   pstrain-gce up --config job.yaml [--dry_run]   creates the job's VMs
//   pstrain-gce status --config job.yaml           its instances and whether it is COMPLETED
//   pstrain-gce down --config job.yaml             deletes everything `up` made
//   pstrain-gce tensorboard --config job.yaml      how to watch it with TensorBoard
// Runs gcloud (--gcloud) with your credentials; --dry_run prints the commands.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "cloud/gcs_env.h"
#include "common/env.h"
#include "common/version.h"
#include "config/model_source.h"
#include "config/model_spec.h"
#include "gflags/gflags.h"
#include "launch/gce_plan.h"

DEFINE_string(config, "", "The job's YAML: a gce section and a training section.");
DEFINE_bool(dry_run, false, "Print the gcloud commands instead of running them.");
DEFINE_string(gcloud, "gcloud", "The gcloud command.");
DEFINE_string(scripts_dir, "",
              "Where startup.sh and shutdown.sh are (default: the package's "
              "/usr/share/pstrain/gce, or deploy/gce beside the build).");

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
    if (!plan->job.training.model_spec.empty()) {
      absl::StatusOr<pstrain::ModelSpec> spec =
          pstrain::ParseModelSpec(plan->job.training.model_spec, plan->job.training.model);
      if (spec.ok() && !spec->weights.empty() && !absl::StartsWith(spec->weights, "gs://")) {
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
