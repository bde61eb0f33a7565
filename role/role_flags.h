#ifndef PSTRAIN_ROLE_ROLE_FLAGS_H_
#define PSTRAIN_ROLE_ROLE_FLAGS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "config/cluster_config.h"

// The command-line flags every pstrain binary shares: where the process
// stands in the job (--config, --job_name, --task_index, or TF_CONFIG) and
// one flag per training field (--train_steps, --job_dir, ...), which override
// the config file. Linking this library defines the flags; only main()
// functions read them.

namespace pstrain {

// This process's place in a job.
struct RoleConfig {
  JobConfig job;
  TaskSpec task;
};

// The training flags given explicitly on the command line, as (name, value),
// in TrainingFieldNames() order.
std::vector<std::pair<std::string, std::string>> ExplicitTrainingFlags();

// ExplicitTrainingFlags plus what the tutorials' flags without a training
// field of their own mean (cifar10_main.py's --sync: update sync; the MNIST
// trainer's --output_dir: job_dir, an error if --job_dir names another);
// InvalidArgument, naming the flag, for --num-gpus other than 0,
// --variable-strategy other than CPU, --data-format other than
// channels_last.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> TrainingOverridesFromFlags();

// True when this process belongs to a cluster: --config was given or
// TF_CONFIG is set (and not empty).
bool HasClusterFlags();

// Resolves the role from --config (with --job_name and --task_index) or from
// TF_CONFIG, applies the explicit training flags on top, validates the
// result, reads the model spec file training.model names, if it names one,
// and resolves a built-in's spec (ResolveJobModel): the role's spec, read
// once, is then training.model_spec. Errors say which source and key was wrong.
absl::StatusOr<RoleConfig> ResolveRoleFromFlags(Env* env);

// The same from explicit inputs (for tests): `config_path` may be empty when
// `tf_config` (TF_CONFIG's value) is given.
absl::StatusOr<RoleConfig> ResolveRole(
    Env* env, const std::string& config_path, const std::string& job_name, int task_index,
    const std::string& tf_config,
    const std::vector<std::pair<std::string, std::string>>& overrides);

// A training spec for a process with no cluster: defaults plus the explicit
// training flags, checked as a cluster job's training section is
// (ValidateTrainingSpec), with a model spec file --model names read through
// `env` (or the built-in's spec) in model_spec, and its input patterns
// checked to match files, as ResolveRole does. Errors name the flags
// ("--train_steps = 0 must be positive").
absl::StatusOr<TrainingSpec> TrainingSpecFromFlags(Env* env);

// `status` with every training key it names ("training.batch_size") named
// as its flag ("--batch_size"): the words for a process whose training
// section came from flags alone.
absl::Status InFlagTerms(const absl::Status& status);

}  // namespace pstrain

#endif  // PSTRAIN_ROLE_ROLE_FLAGS_H_
