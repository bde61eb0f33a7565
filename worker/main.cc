// pstrain-worker: a worker task of a distributed job
//   pstrain-worker --config cluster.yaml --job_name worker --task_index 1   (or TF_CONFIG)
// or, with no cluster, a trainer on its own with parameters and optimizer in
// this process (like an Estimator run without TF_CONFIG):
//   pstrain-worker --job_dir DIR --train_steps N [--model --data_dir --batch_size ...]
#include <thread>

#include "common/env.h"
#include "common/flags.h"
#include "common/malloc_tuning.h"
#include "common/role_flags.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "ps/ps_runner.h"
#include "tbb/global_control.h"
#include "worker/distributed.h"
#include "worker/local_training.h"

namespace {

// A single-process run's settings from the training flags; errors name the flag.
absl::StatusOr<pstrain::LocalTrainingConfig> LocalConfig(const pstrain::TrainingSpec& t) {
  pstrain::LocalTrainingConfig config;
  config.model = t.model;
  config.data_dir = t.data_dir;
  config.job_dir = t.job_dir;
  config.train_steps = t.train_steps;
  config.batch_size = t.batch_size;
  config.eval_batch_size = t.eval_batch_size;
  config.seed = t.seed;
  config.log_every_n_steps = t.log_every_n_steps;
  absl::StatusOr<pstrain::OptimizerConfig> optimizer = pstrain::OptimizerConfigFromSpec(t);
  if (!optimizer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--optimizer / --learning_rate*: ", optimizer.status().message()));
  }
  config.optimizer = *optimizer;
  return config;
}

int Threads(int flag) {
  return flag > 0 ? flag : static_cast<int>(std::thread::hardware_concurrency());
}

}  // namespace

int main(int argc, char** argv) {
  pstrain::TuneMallocForLargeBuffers();
  pstrain::NormalizeFlagSpellings(argc, argv);
  gflags::SetUsageMessage(
      "pstrain-worker --config FILE --job_name worker --task_index I   (or TF_CONFIG)\n"
      "pstrain-worker --job_dir=DIR --train_steps=N [--model=mnist_cnn] [--data_dir=DIR] ...\n"
      "  (no cluster: trains in this process and evaluates on the test set)");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc > 1) {
    LOG(ERROR) << "unexpected argument \"" << argv[1] << "\"; flags look like --name=value";
    return 2;
  }

  if (pstrain::HasClusterFlags()) {
    absl::StatusOr<pstrain::RoleConfig> role =
        pstrain::ResolveRoleFromFlags(pstrain::Env::Default());
    if (!role.ok()) {
      LOG(ERROR) << role.status().message();
      return 2;
    }
    if (role->task.job_name != "worker") {
      LOG(ERROR) << "pstrain-worker runs worker tasks, but this task is " << role->task.job_name
                 << ":" << role->task.task_index << "; use pstrain-" << role->task.job_name;
      return 2;
    }
    tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism,
                                    Threads(role->job.training.threads));
    absl::Status status = pstrain::RunWorker(*role);
    if (!status.ok()) {
      LOG(ERROR) << "worker " << role->task.task_index << " failed: " << status;
      return 1;
    }
    return 0;
  }

  absl::StatusOr<pstrain::TrainingSpec> spec = pstrain::TrainingSpecFromFlags();
  absl::StatusOr<pstrain::LocalTrainingConfig> config =
      spec.ok() ? LocalConfig(*spec) : absl::StatusOr<pstrain::LocalTrainingConfig>(spec.status());
  if (!config.ok()) {
    LOG(ERROR) << config.status().message();
    return 2;
  }
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism,
                                  Threads(spec->threads));
  absl::StatusOr<pstrain::EvalMetrics> metrics =
      pstrain::RunLocalTraining(pstrain::Env::Default(), *config);
  if (!metrics.ok()) {
    LOG(ERROR) << "Training failed: " << metrics.status();
    return 1;
  }
  return 0;
}
