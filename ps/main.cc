// pstrain-ps: one parameter server of a job.
//   pstrain-ps --config cluster.yaml --job_name ps --task_index 0
// or with TF_CONFIG set ({"cluster": ..., "task": {"type": "ps", "index": 0}}).
#include <thread>

#include "common/env.h"
#include "common/flags.h"
#include "common/malloc_tuning.h"
#include "common/role_flags.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "ps/ps_runner.h"
#include "tbb/global_control.h"

int main(int argc, char** argv) {
  pstrain::TuneMallocForLargeBuffers();
  pstrain::NormalizeFlagSpellings(argc, argv);
  gflags::SetUsageMessage("pstrain-ps --config FILE --job_name ps --task_index I  (or TF_CONFIG)");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  absl::StatusOr<pstrain::RoleConfig> role = pstrain::ResolveRoleFromFlags(pstrain::Env::Default());
  if (!role.ok()) {
    LOG(ERROR) << role.status().message();
    return 2;
  }
  if (role->task.job_name != "ps") {
    LOG(ERROR) << "pstrain-ps runs ps tasks, but this task is " << role->task.job_name << ":"
               << role->task.task_index << "; use pstrain-" << role->task.job_name;
    return 2;
  }
  const int threads = role->job.training.threads > 0
                          ? role->job.training.threads
                          : static_cast<int>(std::thread::hardware_concurrency());
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, threads);
  absl::Status status = pstrain::RunParameterServer(*role);
  if (!status.ok()) {
    LOG(ERROR) << "ps " << role->task.task_index << " failed: " << status;
    return 1;
  }
  return 0;
}
