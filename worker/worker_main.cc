// pstrain-worker: a worker task of a distributed job
//   pstrain-worker --config cluster.yaml --job_name worker --task_index 1   (or TF_CONFIG)
// or, with no cluster, a trainer on its own with parameters and optimizer in
// this process (like an Estimator run without TF_CONFIG):
//   pstrain-worker --job_dir DIR --train_steps N [--model --data_dir | --train_files ...]
// which runs the cluster's job path as its one replica (worker/local_training.h).
#include "cloud/gcs_env.h"
#include "common/env.h"
#include "common/version.h"
#include "glog/logging.h"
#include "role/role_flags.h"
#include "role/role_process.h"
#include "tbb/global_control.h"
#include "worker/distributed.h"
#include "worker/local_training.h"

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-worker")) return 0;
  pstrain::InitProcess(
      &argc, &argv,
      "pstrain-worker --config FILE --job_name worker --task_index I   (or TF_CONFIG)\n"
      "pstrain-worker --job_dir=DIR --train_steps=N [--model=mnist_cnn] [--data_dir=DIR |\n"
      "    --train_files=PATTERN --eval_files=PATTERN] ...\n"
      "  (no cluster: trains in this process and evaluates on the test set)");
  if (argc > 1) {
    LOG(ERROR) << "unexpected argument \"" << argv[1] << "\"; flags look like --name=value";
    return 2;
  }
  if (pstrain::HasClusterFlags())
    return pstrain::RunRole("worker", pstrain::RunWorker, pstrain::ProcessEnv());

  // The job path of a cluster's: its TrainingSpec, validated, the model
  // resolved and the input patterns checked (TrainingSpecFromFlags), then
  // what the job cannot do without a cluster refused.
  absl::StatusOr<pstrain::TrainingSpec> spec =
      pstrain::TrainingSpecFromFlags(pstrain::ProcessEnv());
  const absl::Status local =
      spec.ok() ? pstrain::InFlagTerms(pstrain::CheckLocalTraining(*spec)) : spec.status();
  if (!local.ok()) {
    LOG(ERROR) << local.message();
    return 2;
  }
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism,
                                  pstrain::ComputeThreads(spec->threads));
  absl::StatusOr<pstrain::EvalMetrics> metrics =
      pstrain::RunLocalTraining(pstrain::ProcessEnv(), *spec);
  if (!metrics.ok()) {
    LOG(ERROR) << "Training failed: " << pstrain::InFlagTerms(metrics.status());
    return 1;
  }
  return 0;
}
