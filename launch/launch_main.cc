// pstrain-launch: runs every task of a job as a local process.
//   pstrain-launch --config deploy/local/cluster.yaml [--train_steps=500 --job_dir=... ...]
// Training flags override the file. Each process's log lines are prefixed
// with its task ("[worker:1] ..."). When a process fails, the launcher says
// which and how, stops the rest and exits 1. SIGINT/SIGTERM stop the job: every
// process gets SIGTERM, the chief saves a checkpoint and ends the job, and the
// launcher exits 0 if they all exit 0 (a restart resumes from the checkpoint).
#include <stdlib.h>

#include <csignal>
#include <filesystem>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cloud/gcs_env.h"
#include "common/env.h"
#include "common/flags.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "gflags/gflags.h"
#include "launch/local_plan.h"
#include "launch/supervisor.h"
#include "models/model_options.h"
#include "role/model_source.h"
#include "role/role_flags.h"
#include "role/role_process.h"
#include "security/job_credentials.h"

DECLARE_string(config);

DEFINE_int32(base_port, 23450, "First loopback port for a Cloud ML Engine trainingInput config.");
DEFINE_string(bin_dir, "", "Where the pstrain binaries are (default: beside pstrain-launch).");
DEFINE_int32(max_restarts, 3,
             "Times a task that dies (killed by a signal, or exiting with status 138, a "
             "task's \"restart me\") is started again while the others go on; 0: the first "
             "death ends the job.");
DEFINE_double(stop_grace, 0,
              "Seconds between SIGTERM and SIGKILL when stopping a process (0: the job's "
              "shutdown_grace_secs plus 5, time for the chief to save a checkpoint).");

namespace {

void OnSignal(int) { pstrain::Supervisor::RequestStopFromSignal(); }

// A directory of credentials made for one launch, removed with it.
class TempCredentials {
 public:
  TempCredentials() = default;
  explicit TempCredentials(std::string dir) : dir_(std::move(dir)) {}
  TempCredentials(TempCredentials&& other) noexcept : dir_(std::exchange(other.dir_, "")) {}
  TempCredentials& operator=(TempCredentials&& other) noexcept {
    std::swap(dir_, other.dir_);
    return *this;
  }
  ~TempCredentials() {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

 private:
  std::string dir_;
};

// A job that names no credentials and was not told insecure gets a fresh
// CA, certificates for its tasks and a token, in a private directory that
// lives as long as the launch: every task is on this machine. Then checks
// the chief can load what the job names.
absl::StatusOr<TempCredentials> SecureTheJob(pstrain::Env* env, pstrain::JobConfig* job) {
  pstrain::TrainingSpec& t = job->training;
  TempCredentials made;
  if (!t.insecure && t.tls_dir.empty() && t.token_file.empty()) {
    std::string dir = (std::filesystem::temp_directory_path() / "pstrain-launch-XXXXXX").string();
    if (::mkdtemp(dir.data()) == nullptr) {
      return absl::InternalError(
          absl::StrCat("cannot make a directory for the job's "
                       "certificates in ",
                       std::filesystem::temp_directory_path().string()));
    }
    made = TempCredentials(dir);
    const std::string certs = pstrain::JoinPath(dir, "certs");
    PSTRAIN_RETURN_IF_ERROR(
        pstrain::MakeJobCredentials(certs, pstrain::CredentialNames(job->cluster)));
    t.tls_dir = certs;
    t.token_file = pstrain::JoinPath(certs, "job.token");
    pstrain::WriteLineToStdout(
        absl::StrCat("[launcher] made the job's CA, task certificates and token in ", certs,
                     " (mutual TLS on every channel; removed when the job ends)"));
  }
  PSTRAIN_RETURN_IF_ERROR(pstrain::LoadWireSecurity(env, t, {"chief", 0}).status());
  return made;
}

int Launch() {
  using pstrain::WriteLineToStdout;
  pstrain::Env* env = pstrain::ProcessEnv();
  if (FLAGS_config.empty()) {
    WriteLineToStdout("[launcher] --config is required: the cluster YAML to launch");
    return 2;
  }
  absl::StatusOr<pstrain::JobConfig> job =
      pstrain::LoadJobConfig(env, FLAGS_config, FLAGS_base_port);
  if (!job.ok()) {
    WriteLineToStdout(absl::StrCat("[launcher] ", job.status().message()));
    return 2;
  }
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> overrides =
      pstrain::TrainingOverridesFromFlags();
  if (!overrides.ok()) {
    WriteLineToStdout(absl::StrCat("[launcher] ", overrides.status().message()));
    return 2;
  }
  for (const auto& [name, value] : *overrides) {
    absl::Status s = pstrain::SetTrainingField(&job->training, name, value);
    if (!s.ok()) {
      WriteLineToStdout(absl::StrCat("[launcher] --", name, ": ", s.message()));
      return 2;
    }
  }
  // The model is read and built now (a spec file is read once, here, and the
  // children get it in the effective config), so a bad spec or setting stops
  // the job before any process starts or anything is written.
  absl::Status valid = pstrain::ValidateJobConfig(*job);
  if (valid.ok()) valid = pstrain::LoadModelSpecFile(env, &job->training);
  if (valid.ok()) valid = pstrain::BuildJobModel(job->training).status();
  if (!valid.ok()) {
    WriteLineToStdout(absl::StrCat("[launcher] ", FLAGS_config, ": ", valid.message()));
    return 2;
  }
  if (absl::Status s = env->CreateDirs(job->training.job_dir); !s.ok()) {
    WriteLineToStdout(absl::StrCat("[launcher] ", s.message()));
    return 1;
  }
  absl::StatusOr<TempCredentials> credentials = SecureTheJob(env, &*job);
  if (!credentials.ok()) {
    WriteLineToStdout(absl::StrCat("[launcher] ", credentials.status().message()));
    return 2;
  }
  // The children read the effective config (file plus overrides, ports
  // assigned), kept in the job dir as a record of what ran.
  const std::string job_config = pstrain::JoinPath(job->training.job_dir, "launch-config.yaml");
  const std::string config_path =
      pstrain::IsGcsPath(job_config) ? job_config : std::filesystem::absolute(job_config).string();
  if (absl::Status s = env->WriteFileAtomic(config_path, pstrain::JobConfigToYaml(*job)); !s.ok()) {
    WriteLineToStdout(absl::StrCat("[launcher] ", s.message()));
    return 1;
  }
  std::string bin_dir = FLAGS_bin_dir;
  if (bin_dir.empty()) {
    bin_dir = std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
  }
  const int threads =
      pstrain::ThreadsPerProcess(*job, static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<pstrain::ProcessSpec> specs =
      pstrain::PlanProcesses(*job, config_path, bin_dir, threads);
  std::vector<std::string> names;
  for (const auto& s : specs) names.push_back(s.name);

  pstrain::SupervisorOptions options;
  options.stop_grace = absl::Seconds(FLAGS_stop_grace > 0 ? FLAGS_stop_grace
                                                          : job->training.shutdown_grace_secs + 5);
  if (FLAGS_max_restarts < 0) {
    WriteLineToStdout("[launcher] --max_restarts must be 0 or more");
    return 2;
  }
  options.max_restarts = FLAGS_max_restarts;
  options.restart_exit_code = pstrain::kExitRestartable;
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  auto supervisor = pstrain::Supervisor::Start(std::move(specs), options);
  if (!supervisor.ok()) {
    WriteLineToStdout(absl::StrCat("[launcher] ", supervisor.status().message()));
    return 1;
  }
  const pstrain::TrainingSpec& t = job->training;
  WriteLineToStdout(
      absl::StrCat("[launcher] started ", names.size(), " processes (", absl::StrJoin(names, ", "),
                   "), ", threads, " compute thread(s) each: ", t.model, ", ",
                   std::string(pstrain::UpdateModeName(t.update)), " updates, ",
                   t.train_steps > 0 ? absl::StrCat(t.train_steps, " steps")
                   : t.follow        ? absl::StrCat("new files of ", t.train_files, " as they come")
                                     : absl::StrCat(t.num_epochs, " epochs of ", t.train_files),
                   " of batch ", t.batch_size, " per replica; job dir ", t.job_dir));
  pstrain::JobResult result = (*supervisor)->Wait("chief:0", absl::Seconds(30));
  std::vector<std::string> restarted;
  for (const pstrain::ExitInfo& e : result.exits) {
    if (e.restarts > 0) restarted.push_back(absl::StrCat(e.name, " x", e.restarts));
  }
  WriteLineToStdout(absl::StrCat(
      "[launcher] ", result.ok ? "job succeeded: " : "job failed: ", result.summary,
      restarted.empty() ? "" : absl::StrCat(" (restarted: ", absl::StrJoin(restarted, ", "), ")")));
  return result.ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-launch")) return 0;
  pstrain::NormalizeFlagSpellings(argc, argv);
  gflags::SetUsageMessage(
      "pstrain-launch --config FILE [--train_steps=N --job_dir=DIR --update=sync ...]\n"
      "Starts every task of the job in FILE as a local process.");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return Launch();
}
