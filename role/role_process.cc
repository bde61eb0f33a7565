#include "role/role_process.h"

#include <cstdio>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/cluster_trace.h"
#include "common/env.h"
#include "common/flags.h"
#include "common/malloc_tuning.h"
#include "common/termination.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "tbb/global_control.h"

namespace pstrain {

void InitProcess(int* argc, char*** argv, const char* usage) {
#ifdef NDEBUG
  // Debian's Abseil looks for a deadlock cycle at every Mutex lock (a global
  // graph behind a lock of its own): 7% of a ps's cycles on Wide & Deep's
  // embedding stripes. A release build does not pay for it; debug and
  // sanitizer builds (and the tests) keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
  TuneMallocForLargeBuffers();
  NormalizeFlagSpellings(*argc, *argv);
  gflags::SetUsageMessage(usage);
  gflags::ParseCommandLineFlags(argc, argv, true);
  FLAGS_logtostderr = true;
  // Every line leaves the process as it is written, so the last lines
  // before a crash or a kill reach the launcher (or the terminal).
  FLAGS_logbuflevel = -1;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::setvbuf(stderr, nullptr, _IONBF, 0);
  google::InitGoogleLogging((*argv)[0]);
}

namespace {

// The process's peak resident memory in MiB (VmHWM), or -1 where
// /proc/self/status does not say.
double PeakRssMiB() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  double kb = -1;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "VmHWM: %lf kB", &kb) == 1) break;
  }
  std::fclose(f);
  return kb < 0 ? -1 : kb / 1024;
}

// Every task of `cluster`, as the traces name them.
std::vector<TracedTask> TracedTasks(const ClusterSpec& cluster) {
  std::vector<TracedTask> tasks;
  for (const char* job : {"chief", "worker", "ps"}) {
    for (int i = 0; i < cluster.num_tasks(job); ++i) tasks.push_back({job, i});
  }
  return tasks;
}

}  // namespace

int ComputeThreads(int threads) {
  return threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
}

int RunRole(const char* job_name, const RoleRunner& run, Env* env) {
  absl::StatusOr<RoleConfig> role = ResolveRoleFromFlags(env);
  if (!role.ok()) {
    LOG(ERROR) << role.status().message();
    return 2;
  }
  if (role->task.job_name != job_name) {
    LOG(ERROR) << "pstrain-" << job_name << " runs " << job_name << " tasks, but this task is "
               << role->task.job_name << ":" << role->task.task_index << "; use pstrain-"
               << role->task.job_name;
    return 2;
  }
  // Mutual TLS and the job token, unless the job was told insecure.
  absl::StatusOr<WireSecurity> wire = LoadWireSecurity(env, role->job.training, role->task);
  if (!wire.ok()) {
    LOG(ERROR) << job_name << " " << role->task.task_index << ": " << wire.status().message();
    return 2;
  }
  role->job.wire = *std::move(wire);
  absl::StatusOr<std::unique_ptr<TaskTrace>> trace =
      TaskTrace::Create(env, role->job.training.job_dir, role->job.training.trace_steps,
                        TracedTask{role->task.job_name, role->task.task_index});
  if (!trace.ok()) {
    LOG(ERROR) << trace.status().message();
    return 2;
  }
  RoleContext context;
  context.env = env;
  if (*trace != nullptr) {
    context.trace = (*trace)->recorder();
    context.trace->NameThread("main");
  }
  // SIGTERM (a preemption notice) and SIGINT stop the role in order.
  context.termination = ProcessTerminationNotice();
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism,
                                  ComputeThreads(role->job.training.threads));
  absl::Status status = run(*role, context);
  // The chief waits a little for the other tasks' traces (they write theirs
  // as they end) to merge them.
  if (*trace != nullptr) (*trace)->Finish(TracedTasks(role->job.cluster), absl::Seconds(15));
  if (const double peak = PeakRssMiB(); peak >= 0) {
    LOG(INFO) << job_name << " " << role->task.task_index
              << " peak memory (resident): " << absl::StrFormat("%.1f", peak) << " MiB";
  }
  if (absl::IsUnavailable(status)) {
    LOG(ERROR) << job_name << " " << role->task.task_index << " failed: " << status << " (exit "
               << kExitRestartable << ": starting the task again may resume the job)";
    return kExitRestartable;
  }
  if (!status.ok()) {
    LOG(ERROR) << job_name << " " << role->task.task_index << " failed: " << status;
    return 1;
  }
  return 0;
}

}  // namespace pstrain
