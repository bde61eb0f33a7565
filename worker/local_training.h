#ifndef PSTRAIN_WORKER_LOCAL_TRAINING_H_
#define PSTRAIN_WORKER_LOCAL_TRAINING_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "config/cluster_config.h"
#include "models/registry.h"
#include "ps/model_tables.h"
#include "ps/optimizer.h"
#include "worker/evaluation.h"

namespace pstrain {

// Everything a single-process training run needs, parsed from flags by main().
struct LocalTrainingConfig {
  std::string model = "mnist_cnn";
  std::optional<JobModelSpec> model_spec;  // when set, the model (TrainingSpec::model_spec)
  ModelOptions model_options;
  std::string data_dir;
  std::string job_dir;
  int64_t train_steps = 0;
  int batch_size = 100;
  int eval_batch_size = 200;
  OptimizerConfig optimizer;
  SparseTableRules sparse_rules;  // the embedding tables' (training.embedding_*)
  float state_decay = 0.99f;      // Moving averages of batch-norm statistics.
  bool use_distortion_for_training = true;
  uint64_t seed = 1;
  int64_t log_every_n_steps = 100;
  // "A:B": a Chrome trace of steps A..B to
  // <job_dir>/plugins/profile/steps_A_B/worker-0.trace.json.
  std::string trace_steps;
};

// Trains `config.model` on the training split of `config.data_dir` with
// parameters and optimizer in this process (an Estimator run with no
// TF_CONFIG), then evaluates on the test split and logs the evaluation line.
// Errors name what was wrong: unknown model, missing or damaged data files,
// bad hyperparameters, an unwritable job dir.
absl::StatusOr<EvalMetrics> RunLocalTraining(Env* env, const LocalTrainingConfig& config);

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_LOCAL_TRAINING_H_
