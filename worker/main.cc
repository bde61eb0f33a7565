// pstrain-worker: with no cluster config it trains on its own, parameters and
// optimizer in this process (like an Estimator run without TF_CONFIG).
#include <thread>

#include "absl/strings/str_split.h"
#include "common/env.h"
#include "common/flags.h"
#include "data/mnist.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "ps/learning_rate.h"
#include "ps/optimizer.h"
#include "tbb/global_control.h"
#include "worker/local_training.h"

DEFINE_string(model, "mnist_cnn", "Model to train (mnist_cnn).");
DEFINE_string(data_dir, pstrain::kDefaultFashionMnistDir,
              "Directory with the MNIST-format idx files (train-images-idx3-ubyte[.gz], ...).");
DEFINE_string(job_dir, "", "Directory for this job's output (required).");
DEFINE_int64(train_steps, 0, "Global steps to train (required).");
DEFINE_int32(batch_size, 100, "Training examples per step.");
DEFINE_int32(eval_batch_size, 200, "Examples per evaluation batch.");
DEFINE_string(optimizer, "adam", "sgd, momentum or adam.");
DEFINE_double(learning_rate, 0.001, "Base learning rate.");
DEFINE_string(learning_rate_schedule, "",
              "Piecewise multipliers of the base rate by global step, e.g. "
              "\"1000:0.1,2000:0.01\" (x1 until step 1000, x0.1 until 2000, then x0.01).");
DEFINE_double(momentum, 0.9, "Momentum (momentum optimizer).");
DEFINE_bool(nesterov, false, "Nesterov momentum.");
DEFINE_double(beta1, 0.9, "Adam beta1.");
DEFINE_double(beta2, 0.999, "Adam beta2.");
DEFINE_double(epsilon, 1e-8, "Adam epsilon.");
DEFINE_double(weight_decay, 0.0, "L2 weight decay (gradient += weight_decay * w).");
DEFINE_string(weight_decay_exclusions, "bias",
              "Comma-separated substrings; variables whose names contain one get no decay.");
DEFINE_double(dropout_rate, 0.4, "Dropout rate (mnist_cnn).");
DEFINE_int32(threads, 0, "Compute threads; 0 uses every core.");
DEFINE_uint64(seed, 1, "Seed for initialization, shuffling and dropout.");
DEFINE_int64(log_every_n_steps, 100, "Steps between progress lines.");

namespace {

// Flags to config; InvalidArgument names the flag.
absl::StatusOr<pstrain::LocalTrainingConfig> ConfigFromFlags() {
  pstrain::LocalTrainingConfig config;
  config.model = FLAGS_model;
  config.model_options.dropout_rate = static_cast<float>(FLAGS_dropout_rate);
  config.data_dir = FLAGS_data_dir;
  config.job_dir = FLAGS_job_dir;
  config.train_steps = FLAGS_train_steps;
  config.batch_size = FLAGS_batch_size;
  config.eval_batch_size = FLAGS_eval_batch_size;
  config.seed = FLAGS_seed;
  config.log_every_n_steps = FLAGS_log_every_n_steps;
  auto type = pstrain::ParseOptimizerType(FLAGS_optimizer);
  if (!type.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--optimizer: ", type.status().message()));
  }
  config.optimizer.type = *type;
  auto schedule = pstrain::ParseLearningRateSchedule(static_cast<float>(FLAGS_learning_rate),
                                                     FLAGS_learning_rate_schedule);
  if (!schedule.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--learning_rate / --learning_rate_schedule: ", schedule.status().message()));
  }
  config.optimizer.learning_rate = *schedule;
  config.optimizer.momentum = static_cast<float>(FLAGS_momentum);
  config.optimizer.nesterov = FLAGS_nesterov;
  config.optimizer.beta1 = static_cast<float>(FLAGS_beta1);
  config.optimizer.beta2 = static_cast<float>(FLAGS_beta2);
  config.optimizer.epsilon = static_cast<float>(FLAGS_epsilon);
  config.optimizer.weight_decay = static_cast<float>(FLAGS_weight_decay);
  for (absl::string_view s :
       absl::StrSplit(FLAGS_weight_decay_exclusions, ',', absl::SkipWhitespace())) {
    config.optimizer.weight_decay_exclusions.emplace_back(s);
  }
  return config;
}

}  // namespace

int main(int argc, char** argv) {
  pstrain::NormalizeFlagSpellings(argc, argv);
  gflags::SetUsageMessage(
      "pstrain-worker --job_dir=DIR --train_steps=N [--model=mnist_cnn] [--data_dir=DIR] ...\n"
      "Trains a model in this process and evaluates it on the test set.");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);

  if (argc > 1) {
    LOG(ERROR) << "unexpected argument \"" << argv[1] << "\"; flags look like --name=value";
    return 2;
  }
  absl::StatusOr<pstrain::LocalTrainingConfig> config = ConfigFromFlags();
  if (!config.ok()) {
    LOG(ERROR) << config.status().message();
    return 2;
  }
  const int threads =
      FLAGS_threads > 0 ? FLAGS_threads : static_cast<int>(std::thread::hardware_concurrency());
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, threads);
  absl::StatusOr<pstrain::EvalMetrics> metrics =
      pstrain::RunLocalTraining(pstrain::Env::Default(), *config);
  if (!metrics.ok()) {
    LOG(ERROR) << "Training failed: " << metrics.status();
    return 1;
  }
  return 0;
}
