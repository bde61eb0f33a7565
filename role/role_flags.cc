#include "role/role_flags.h"

#include <cstdlib>
#include <functional>
#include <set>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/stream/file_pattern.h"
#include "gflags/gflags.h"
#include "models/model_options.h"
#include "role/model_source.h"

DEFINE_string(config, "", "Cluster config YAML (cluster and training sections).");
DEFINE_string(job_name, "", "This task's job: chief, worker or ps (with --config).");
DEFINE_int32(task_index, 0, "This task's index within its job (with --config).");

// One flag per training field; a flag given on the command line overrides the
// config file. Defaults shown here are TrainingSpec's.
DEFINE_string(model, "mnist_cnn",
              "Model to train: a built-in (mnist_cnn, cifar10_resnet) or a model spec file "
              "(net.yaml, local or gs://).");
DEFINE_string(onnx_weights, "use",
              "A model read from an ONNX file: use its initializers as the starting values, "
              "or ignore them and draw fresh ones.");
DEFINE_int32(num_layers, 44, "cifar10_resnet: layers, 6n + 2 (20, 32, 44, 56, 110).");
DEFINE_double(batch_norm_decay, -1,
              "Decay of the moving averages of every batch norm that sets none of its own; -1: "
              "each model's own (cifar10_resnet 0.997, a spec's batch_norm Keras' 0.99).");
DEFINE_double(batch_norm_epsilon, 1e-5, "Batch norm's epsilon.");
DEFINE_bool(use_distortion_for_training, true,
            "cifar10_resnet: pad 4, random crop 32 and random flip of training images.");
DEFINE_string(data_dir, "/usr/share/datasets/fashion-mnist",
              "Directory with the training and test data.");
DEFINE_string(train_files, "",
              "Streamed training input: a glob or comma-separated list of TFRecord (Example) or "
              "Criteo TSV files, local or gs://, plain or .gz (tabular models).");
DEFINE_string(eval_files, "", "Streamed evaluation input, as --train_files (empty: data_dir's).");
DEFINE_string(input_compression, "auto", "Input files: auto (gzip for .gz), none or gzip.");
DEFINE_int32(shuffle_buffer, 10000, "Streamed input: examples per replica shuffled at once.");
DEFINE_bool(shuffle_files, true,
            "Streamed input: each epoch reads --train_files in an order drawn from the seed and "
            "the epoch (false: name order).");
DEFINE_int32(cycle_length, 0,
             "Streamed input: files a replica reads at once (0: 16, or 4 with --follow).");
DEFINE_int64(num_epochs, 0,
             "Streamed input: passes over --train_files (0: for ever); the job ends when every "
             "replica's input ends, or at --train_steps if that comes first.");
DEFINE_string(csv_schema, "",
              "CSV input (.csv, .csv.gz): a YAML file with the schema that turns its records into "
              "examples (label, numeric and categorical columns).");
DEFINE_int64(max_bad_records, 0,
             "Streamed input: bad records a replica skips (each logged and counted) before one "
             "stops it.");
DEFINE_bool(follow, false,
            "Online training: list --train_files again every --poll_secs and train on each new "
            "file once; the job runs until stopped (or --train_steps).");
DEFINE_double(poll_secs, 30, "--follow: seconds between listings of --train_files.");
DEFINE_bool(progressive_validation, false,
            "Predict each training batch with the model before its update: loss, AUC and "
            "accuracy over the last --progressive_window examples (progressive/*).");
DEFINE_int64(progressive_window, 100000, "--progressive_validation: examples in the window.");
DEFINE_string(job_dir, "", "Directory for this job's output (required).");
DEFINE_string(update, "async", "Update mode: async, sync or ssp (bounded staleness).");
DEFINE_int32(staleness, 3, "ssp: steps a replica may run ahead of the slowest live one.");
DEFINE_int32(replicas_to_aggregate, 0, "sync: gradients averaged per step (0: all replicas).");
DEFINE_int32(total_replicas, 0, "sync: training replicas (0: all; N > R gives backup workers).");
DEFINE_bool(chief_trains, true, "The chief also trains as a replica.");
DEFINE_string(optimizer, "",
              "sgd, momentum or adam; default: the model's (adam for mnist_cnn, momentum for "
              "cifar10_resnet).");
DEFINE_double(learning_rate, 0.001, "Base learning rate.");
DEFINE_string(
    learning_rate_schedule, "",
    "Piecewise multipliers of the base rate by global step, e.g. \"1000:0.1,2000:0.01\".");
DEFINE_double(momentum, 0.9, "Momentum (momentum optimizer).");
DEFINE_bool(nesterov, false, "Nesterov momentum.");
DEFINE_double(weight_decay, 0.0, "L2 weight decay (gradient += weight_decay * w).");
DEFINE_string(weight_decay_exclusions, "bias",
              "Comma-separated substrings; variables whose names contain one get no decay.");
DEFINE_string(embedding_optimizer, "adagrad",
              "Per-row optimizer of sparse embedding tables: adagrad, ftrl (FTRL-Proximal) or "
              "adam (lazy Adam).");
DEFINE_double(embedding_learning_rate, 0.05,
              "Embedding tables: Adagrad's and Adam's learning rate, FTRL's alpha.");
DEFINE_double(embedding_l1, 0.0, "Embedding tables, ftrl only: L1 regularization strength.");
DEFINE_double(embedding_l2, 0.0, "Embedding tables, ftrl only: L2 regularization strength.");
DEFINE_int64(embedding_ttl_steps, 0,
             "Embedding tables: evict a row not updated for this many global steps (0: never).");
DEFINE_int64(embedding_min_count, 0,
             "Embedding tables: create a row once its id was pushed this many times (0 or 1: at "
             "its first push).");
DEFINE_int32(batch_size, 100, "Training examples per step and replica.");
DEFINE_int32(eval_batch_size, 200, "Examples per evaluation batch.");
DEFINE_int64(train_steps, 0, "Global steps to train (required unless --num_epochs ends the job).");
DEFINE_int64(eval_steps, 1000, "Global steps between evaluations on the test set (0: at the end).");
DEFINE_int64(log_every_n_steps, 100, "Steps between progress lines.");
DEFINE_uint64(seed, 1, "Seed for initialization, shuffling and dropout.");
DEFINE_double(sync_timeout, 30, "Seconds a sync step waits for missing replicas.");
DEFINE_double(startup_timeout, 300, "Seconds a task waits for the others to come up.");
DEFINE_double(ps_retry_secs, 60,
              "Seconds the chief and a worker retry a parameter server that does not answer, "
              "then exit 138 (a restart resumes the job).");
DEFINE_double(watchdog_secs, 600,
              "The chief's progress watchdog: no global step for this many seconds -> a log "
              "line and a rollback to the last checkpoint (0: off; more than sync_timeout).");
DEFINE_int32(ps_replication, 1,
             "Copies of every parameter chunk and table partition, on consecutive ps tasks: a "
             "ps that dies fails over to the next copy with no rollback (1: no copies).");
DEFINE_double(failover_secs, 2,
              "With --ps_replication above 1: seconds a ps may go unanswered before the chief "
              "moves its parameters to the next copy.");
DEFINE_int64(checkpoint_steps, 1000,
             "Global steps between checkpoints (0: none but the last); "
             "--checkpoint-num-steps and --save_checkpoints_steps are accepted too.");
DEFINE_double(checkpoint_secs, 0, "Seconds between checkpoints (0: by steps only).");
DEFINE_int32(keep_checkpoint_max, 5, "Checkpoints kept in the job dir (0: all).");
DEFINE_int32(exports_to_keep, 5,
             "Model exports kept in <job_dir>/export (0: no export at the end of training).");
DEFINE_int64(export_steps, 0,
             "Export a new version while training, from the first checkpoint after every this "
             "many global steps (0: off).");
DEFINE_double(export_secs, 0,
              "Export a new version while training, from the first checkpoint after every this "
              "many seconds (0: off).");
DEFINE_int32(full_export_every, 1,
             "Of the exports while training, for a click model: a full version every this many, "
             "deltas (the rows changed since the version before) between (1: every one full).");
DEFINE_double(shutdown_grace_secs, 25,
              "After SIGTERM, seconds to save a checkpoint and exit (a preemption notice).");
DEFINE_int64(save_summary_steps, 100,
             "Global steps between TensorBoard training scalars (0: none).");
DEFINE_int64(histogram_steps, 1000, "Global steps between variable histograms (0: none).");
DEFINE_int64(projector_rows, 10000,
             "At each checkpoint, each embedding table's this many most trained rows for "
             "TensorBoard's projector (0: none).");
DEFINE_double(flush_secs, 30, "Event files are flushed at least this often (seconds).");
DEFINE_int32(threads, 0, "Compute threads per process; 0 uses every core.");
DEFINE_string(wire_format, "bf16",
              "Gradients and pulled parameters on the wire: bf16 (half the bytes; the ps keep "
              "float32) or float32.");
DEFINE_string(compression, "none",
              "Gradient compression: none, or topk (the largest gradients, error feedback).");
DEFINE_double(compression_ratio, 0.01, "topk: the fraction of each chunk's gradients pushed.");
DEFINE_bool(overlap_pull, true,
            "Start the next forward pass as the first layers' parameters arrive, waiting layer "
            "by layer for the rest (false: after the whole pull).");
DEFINE_string(trace_steps, "",
              "A:B writes a Chrome trace of global steps A..B of every task to "
              "<job_dir>/plugins/profile/steps_A_B/.");
DEFINE_string(tls_dir, "",
              "The job's TLS certificates (ca.crt, <job>-<index>.crt/.key), as pstrain-certs "
              "makes them: mutual TLS on every channel.");
DEFINE_string(token_file, "", "A file holding the job token every RPC carries and the ps checks.");
DEFINE_bool(insecure, false,
            "Plaintext RPCs without certificates (and without a token unless --token_file): only "
            "on a network you trust.");

// Flags of the CIFAR-10 estimator's cifar10_main.py that have no training
// field of their own, so its command line works as it is.
DEFINE_int32(num_gpus, 0, "Must be 0: pstrain trains on CPUs (cifar10_main.py's --num-gpus).");
DEFINE_string(variable_strategy, "CPU", "Must be CPU (cifar10_main.py's --variable-strategy).");
DEFINE_bool(sync, false, "Synchronous updates, as --update=sync (cifar10_main.py's --sync).");
// The MNIST seed trainer's name for the model dir.
DEFINE_string(output_dir, "",
              "The job dir under the name the MNIST trainer (seed 001) gives it; must agree with "
              "--job_dir if both are given.");
DEFINE_int32(num_inter_threads, 0, "Accepted for cifar10_main.py; pstrain uses --threads.");
DEFINE_string(data_format, "", "channels_last (or empty): the only layout on CPUs.");
DEFINE_bool(log_device_placement, false, "Accepted for cifar10_main.py; no effect.");

namespace pstrain {

std::vector<std::pair<std::string, std::string>> ExplicitTrainingFlags() {
  std::vector<std::pair<std::string, std::string>> flags;
  for (const std::string& name : TrainingFieldNames()) {
    gflags::CommandLineFlagInfo info;
    if (gflags::GetCommandLineFlagInfo(name.c_str(), &info) && !info.is_default) {
      flags.emplace_back(name, info.current_value);
    }
  }
  return flags;
}

namespace {

// What every process does with a valid training section: reads the model
// spec file training.model names, or resolves the built-in's spec (the spec
// read once, here, travels as a value to every model built), and stops at
// an input pattern that matches nothing, naming it. `prefix` ("training."
// or "--") names the keys in errors.
absl::Status ResolveModelAndInput(Env* env, TrainingSpec* t, std::string_view prefix) {
  PSTRAIN_RETURN_IF_ERROR(LoadModelSpecFile(env, t));
  PSTRAIN_RETURN_IF_ERROR(ResolveJobModel(t));
  for (const auto& [files, key] :
       {std::pair{&t->train_files, "train_files"}, std::pair{&t->eval_files, "eval_files"}}) {
    if (files->empty()) continue;
    PSTRAIN_RETURN_IF_ERROR(ExpandFilePatterns(env, *files, std::string(prefix) + key).status());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status InFlagTerms(const absl::Status& status) {
  if (status.ok()) return status;
  const std::vector<std::string> names = TrainingFieldNames();
  const std::set<std::string, std::less<>> keys(names.begin(), names.end());
  constexpr std::string_view kPrefix = "training.";
  const std::string_view m(status.message().data(), status.message().size());
  std::string out;
  size_t i = 0;
  while (i < m.size()) {
    const size_t at = m.find(kPrefix, i);
    if (at == std::string_view::npos) break;
    size_t end = at + kPrefix.size();
    while (end < m.size() &&
           (absl::ascii_islower(static_cast<unsigned char>(m[end])) ||
            absl::ascii_isdigit(static_cast<unsigned char>(m[end])) || m[end] == '_')) {
      ++end;
    }
    const std::string_view key = m.substr(at + kPrefix.size(), end - at - kPrefix.size());
    out.append(m.substr(i, at - i));
    if (keys.contains(key)) {
      absl::StrAppend(&out, "--", absl::string_view(key.data(), key.size()));
    } else {
      out.append(m.substr(at, end - at));
    }
    i = end;
  }
  if (i < m.size()) out.append(m.substr(i));
  return absl::Status(status.code(), out);
}

bool HasClusterFlags() {
  const char* tf_config = std::getenv("TF_CONFIG");
  return !FLAGS_config.empty() || (tf_config != nullptr && tf_config[0] != '\0');
}

absl::StatusOr<RoleConfig> ResolveRole(
    Env* env, const std::string& config_path, const std::string& job_name, int task_index,
    const std::string& tf_config,
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  RoleConfig role;
  if (!config_path.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(role.job, LoadJobConfig(env, config_path));
    if (job_name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--config ", config_path, " needs --job_name (chief, worker or ps)"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(role.task.job_name, CanonicalJobName(job_name));
    role.task.task_index = task_index;
  } else if (!tf_config.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(TfConfig tf, ParseTfConfig(tf_config));
    role.job.cluster = tf.cluster;
    role.task = tf.task;
  } else {
    return absl::InvalidArgumentError("no cluster: pass --config FILE or set TF_CONFIG");
  }
  for (const auto& [name, value] : overrides) {
    absl::Status s = SetTrainingField(&role.job.training, name, value);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", s.message()));
  }
  PSTRAIN_RETURN_IF_ERROR(ValidateJobConfig(role.job));
  PSTRAIN_RETURN_IF_ERROR(ValidateTask(role.job.cluster, role.task));
  PSTRAIN_RETURN_IF_ERROR(ResolveModelAndInput(env, &role.job.training, "training."));
  return role;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> TrainingOverridesFromFlags() {
  if (FLAGS_num_gpus != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--num-gpus=", FLAGS_num_gpus,
        ": pstrain trains on CPUs; pass --num-gpus=0 (cifar10_main.py's default is 1)"));
  }
  if (absl::AsciiStrToUpper(FLAGS_variable_strategy) != "CPU") {
    return absl::InvalidArgumentError(absl::StrCat("--variable-strategy=", FLAGS_variable_strategy,
                                                   ": pstrain keeps variables on the parameter "
                                                   "servers' CPUs; use CPU"));
  }
  if (!FLAGS_data_format.empty() && FLAGS_data_format != "channels_last") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--data-format=", FLAGS_data_format, ": pstrain computes in channels_last (NHWC) only"));
  }
  std::vector<std::pair<std::string, std::string>> overrides = ExplicitTrainingFlags();
  if (!FLAGS_output_dir.empty()) {
    gflags::CommandLineFlagInfo job_dir;
    if (gflags::GetCommandLineFlagInfo("job_dir", &job_dir) && !job_dir.is_default) {
      if (job_dir.current_value != FLAGS_output_dir) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--output_dir=", FLAGS_output_dir, " and --job_dir=", job_dir.current_value,
            " name different job dirs; give one of them"));
      }
    } else {
      overrides.emplace_back("job_dir", FLAGS_output_dir);
    }
  }
  if (FLAGS_sync) {
    gflags::CommandLineFlagInfo update;
    if (gflags::GetCommandLineFlagInfo("update", &update) && !update.is_default &&
        update.current_value != "sync") {
      return absl::InvalidArgumentError(
          absl::StrCat("--sync asks for synchronous updates but --update=", update.current_value,
                       " for others; give one of them"));
    }
    overrides.emplace_back("update", "sync");
  }
  return overrides;
}

absl::StatusOr<RoleConfig> ResolveRoleFromFlags(Env* env) {
  const char* tf_config = std::getenv("TF_CONFIG");
  PSTRAIN_ASSIGN_OR_RETURN(auto overrides, TrainingOverridesFromFlags());
  return ResolveRole(env, FLAGS_config, FLAGS_job_name, FLAGS_task_index,
                     FLAGS_config.empty() && tf_config != nullptr ? tf_config : "", overrides);
}

absl::StatusOr<TrainingSpec> TrainingSpecFromFlags(Env* env) {
  TrainingSpec spec;
  PSTRAIN_ASSIGN_OR_RETURN(auto overrides, TrainingOverridesFromFlags());
  for (const auto& [name, value] : overrides) {
    absl::Status s = SetTrainingField(&spec, name, value);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", s.message()));
  }
  // The cluster's checks of the training section, in the words of the
  // flags that set it.
  PSTRAIN_RETURN_IF_ERROR(InFlagTerms(ValidateTrainingSpec(spec)));
  PSTRAIN_RETURN_IF_ERROR(ResolveModelAndInput(env, &spec, "--"));
  return spec;
}

}  // namespace pstrain
