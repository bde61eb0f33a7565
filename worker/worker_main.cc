// pstrain-worker: a worker task of a distributed job
//   pstrain-worker --config cluster.yaml --job_name worker --task_index 1   (or TF_CONFIG)
// or, with no cluster, a trainer on its own with parameters and optimizer in
// this process (like an Estimator run without TF_CONFIG):
//   pstrain-worker --job_dir DIR --train_steps N [--model --data_dir --batch_size ...]
#include "cloud/gcs_env.h"
#include "common/env.h"
#include "common/version.h"
#include "glog/logging.h"
#include "models/model_options.h"
#include "ps/optimizer_config.h"
#include "role/role_process.h"
#include "tbb/global_control.h"
#include "worker/distributed.h"
#include "worker/local_training.h"

namespace {

// A single-process run's settings from the training flags; errors name the flag.
absl::StatusOr<pstrain::LocalTrainingConfig> LocalConfig(const pstrain::TrainingSpec& t) {
  pstrain::LocalTrainingConfig config;
  config.model = t.model;
  config.model_spec = t.model_spec;
  config.data_dir = t.data_dir;
  config.job_dir = t.job_dir;
  config.train_steps = t.train_steps;
  config.batch_size = t.batch_size;
  config.eval_batch_size = t.eval_batch_size;
  config.seed = t.seed;
  config.log_every_n_steps = t.log_every_n_steps;
  config.trace_steps = t.trace_steps;
  config.model_options = pstrain::ModelOptionsFromSpec(t);
  if (!(t.batch_norm_decay == -1 || (t.batch_norm_decay >= 0 && t.batch_norm_decay < 1)) ||
      !(t.batch_norm_epsilon > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--batch_norm_decay must be in [0, 1) (or -1: each model's own) and --batch_norm_epsilon "
        "positive, got ",
        t.batch_norm_decay, " and ", t.batch_norm_epsilon));
  }
  // The models' batch norms all have their decay (SpecBuildOptionsOf); this
  // is the in-process ps's fallback only.
  config.state_decay = t.batch_norm_decay >= 0 ? static_cast<float>(t.batch_norm_decay)
                                               : pstrain::kKerasBatchNormMomentum;
  config.use_distortion_for_training = t.use_distortion_for_training;
  absl::StatusOr<pstrain::OptimizerConfig> optimizer = pstrain::OptimizerConfigFromSpec(t);
  if (!optimizer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--optimizer / --learning_rate*: ", optimizer.status().message()));
  }
  config.optimizer = *optimizer;
  absl::StatusOr<pstrain::SparseTableRules> rules = pstrain::SparseTableRulesOf(t);
  if (!rules.ok()) return rules.status();
  config.sparse_rules = *rules;
  return config;
}

}  // namespace

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-worker")) return 0;
  pstrain::InitProcess(
      &argc, &argv,
      "pstrain-worker --config FILE --job_name worker --task_index I   (or TF_CONFIG)\n"
      "pstrain-worker --job_dir=DIR --train_steps=N [--model=mnist_cnn] [--data_dir=DIR] ...\n"
      "  (no cluster: trains in this process and evaluates on the test set)");
  if (argc > 1) {
    LOG(ERROR) << "unexpected argument \"" << argv[1] << "\"; flags look like --name=value";
    return 2;
  }
  if (pstrain::HasClusterFlags())
    return pstrain::RunRole("worker", pstrain::RunWorker, pstrain::ProcessEnv());

  absl::StatusOr<pstrain::TrainingSpec> spec =
      pstrain::TrainingSpecFromFlags(pstrain::ProcessEnv());
  absl::StatusOr<pstrain::LocalTrainingConfig> config =
      spec.ok() ? LocalConfig(*spec) : absl::StatusOr<pstrain::LocalTrainingConfig>(spec.status());
  if (!config.ok()) {
    LOG(ERROR) << config.status().message();
    return 2;
  }
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism,
                                  pstrain::ComputeThreads(spec->threads));
  absl::StatusOr<pstrain::EvalMetrics> metrics =
      pstrain::RunLocalTraining(pstrain::ProcessEnv(), *config);
  if (!metrics.ok()) {
    LOG(ERROR) << "Training failed: " << metrics.status();
    return 1;
  }
  return 0;
}
