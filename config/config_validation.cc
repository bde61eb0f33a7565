#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/trace.h"
#include "config/cluster_config.h"
#include "config/config_yaml_util.h"
#include "config/training_fields.h"

// What makes a job config runnable, and the task counts derived from it.

namespace pstrain {
namespace {

using config_internal::Quoted;
using config_internal::Sv;
std::string FormatScalar(double v) { return config_internal::FormatDouble(v); }

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(message); }

// Checks "host:port" (IPv6 hosts in brackets).
absl::Status CheckAddress(const std::string& where, const std::string& address) {
  const std::string prefix = absl::StrCat(where, " = ", Quoted(address));
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return Invalid(absl::StrCat(prefix, " is not \"host:port\""));
  }
  const std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.empty() || host == "[]") {
    return Invalid(absl::StrCat(prefix, " has no host (\"host:port\")"));
  }
  if (host.front() == '[') {
    if (host.back() != ']') return Invalid(absl::StrCat(prefix, " has an unclosed '['"));
  } else if (host.find(':') != std::string::npos) {
    return Invalid(absl::StrCat(prefix, ": write an IPv6 host in brackets, e.g. \"[::1]:2222\""));
  }
  for (char c : host) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) || absl::ascii_iscntrl(c)) {
      return Invalid(absl::StrCat(prefix, ": the host contains a space or control character"));
    }
  }
  int port_number = 0;
  const bool digits =
      !port.empty() && port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) {
        return absl::ascii_isdigit(static_cast<unsigned char>(c));
      });
  if (!digits || !absl::SimpleAtoi(port, &port_number) || port_number < 1 || port_number > 65535) {
    return Invalid(absl::StrCat(prefix, ": the port must be a number in 1..65535"));
  }
  return absl::OkStatus();
}

// "T = 3 training replicas: 2 in cluster.worker + 1 chief (training.chief_trains is true)".
std::string DescribeReplicas(const JobConfig& config) {
  const ClusterSpec& cluster = config.cluster;
  return absl::StrCat(
      "T = ", NumTrainingReplicas(config), " training replicas: ", cluster.worker.size(),
      " in cluster.worker",
      config.training.chief_trains
          ? absl::StrCat(" + ", cluster.chief.size(), " chief (training.chief_trains is true)")
          : std::string("; the chief does not train (training.chief_trains is false)"));
}

absl::Status ValidateSync(const JobConfig& config) {
  const TrainingSpec& t = config.training;
  const int replicas = NumTrainingReplicas(config);
  const int r = EffectiveReplicasToAggregate(config);
  const int n = EffectiveTotalReplicas(config);
  if (t.replicas_to_aggregate < 0) {
    return Invalid(absl::StrCat("training.replicas_to_aggregate = ", t.replicas_to_aggregate,
                                " must be at least 1 (or 0 for every training replica)"));
  }
  if (t.total_replicas < 0) {
    return Invalid(absl::StrCat("training.total_replicas = ", t.total_replicas,
                                " must be at least 1 (or 0 for every training replica)"));
  }
  if (r > n) {
    return Invalid(absl::StrCat(
        "training.replicas_to_aggregate = ", r, " is more than training.total_replicas = ", n,
        t.total_replicas == 0
            ? absl::StrCat(" (0 means every training replica; ", DescribeReplicas(config), ")")
            : std::string()));
  }
  if (n != replicas) {
    return Invalid(absl::StrCat(
        "training.total_replicas = ", n, " must equal the number of training replicas (",
        DescribeReplicas(config), "); set it to ", replicas, " or to 0 (every training replica)"));
  }
  return absl::OkStatus();
}

}  // namespace

int ClusterSpec::num_tasks(std::string_view job_name) const {
  if (job_name == "chief" || job_name == "master") return static_cast<int>(chief.size());
  if (job_name == "worker") return static_cast<int>(worker.size());
  if (job_name == "ps") return static_cast<int>(ps.size());
  return 0;
}

absl::StatusOr<std::string> ClusterSpec::address(std::string_view job_name, int task_index) const {
  PSTRAIN_RETURN_IF_ERROR(ValidateTask(*this, TaskSpec{std::string(job_name), task_index}));
  PSTRAIN_ASSIGN_OR_RETURN(std::string job, CanonicalJobName(job_name));
  const std::vector<std::string>& tasks = job == "chief" ? chief : job == "worker" ? worker : ps;
  return tasks[task_index];
}

absl::StatusOr<std::string> CanonicalJobName(std::string_view job_name) {
  if (job_name == "chief" || job_name == "master") return std::string("chief");
  if (job_name == "worker" || job_name == "ps") return std::string(job_name);
  return absl::InvalidArgumentError(
      absl::StrCat(Quoted(job_name), " is not a job name; use chief (or master), worker or ps"));
}

absl::Status ValidateCluster(const ClusterSpec& cluster) {
  if (cluster.chief.empty()) {
    return Invalid(
        "cluster.chief is empty: a job needs exactly one chief task (TensorFlow's convention "
        "of worker 0 acting as chief is not supported); add cluster.chief: [\"host:port\"]");
  }
  if (cluster.chief.size() > 1) {
    return Invalid(absl::StrCat("cluster.chief has ", cluster.chief.size(),
                                " tasks; a job needs exactly one chief"));
  }
  if (cluster.ps.empty()) {
    return Invalid(
        "cluster.ps is empty: a job needs at least one parameter server (with trainingInput, "
        "use scaleTier: CUSTOM and parameterServerCount >= 1)");
  }
  std::map<std::string, std::string> used;  // address -> "cluster.job[i]"
  for (const char* job : {"chief", "worker", "ps"}) {
    const std::vector<std::string>& tasks = *job == 'c'   ? cluster.chief
                                            : *job == 'w' ? cluster.worker
                                                          : cluster.ps;
    for (size_t i = 0; i < tasks.size(); ++i) {
      const std::string where = absl::StrCat("cluster.", job, "[", i, "]");
      PSTRAIN_RETURN_IF_ERROR(CheckAddress(where, tasks[i]));
      auto [it, inserted] = used.emplace(tasks[i], where);
      if (!inserted) {
        return Invalid(absl::StrCat(where, " = ", Quoted(tasks[i]), " is also ", it->second,
                                    "; every task needs its own address"));
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// Paths, model and the optimizer's hyperparameters.
absl::Status ValidateModelAndOptimizer(const TrainingSpec& t) {
  if (t.job_dir.empty()) {
    return Invalid(
        "training.job_dir is empty: give the job's output directory "
        "(checkpoints, events, export)");
  }
  if (t.model.empty()) return Invalid("training.model is empty");
  if (t.data_dir.empty()) return Invalid("training.data_dir is empty");
  if (const std::string c = absl::AsciiStrToLower(t.input_compression);
      c != "auto" && c != "none" && c != "gzip") {
    return Invalid(absl::StrCat("training.input_compression = \"", t.input_compression,
                                "\": auto (gzip for names ending .gz), none or gzip"));
  }
  if (t.max_bad_records < 0) {
    return Invalid(absl::StrCat("training.max_bad_records = ", t.max_bad_records,
                                ": bad records skipped, 0 (none) or more"));
  }
  if (t.shuffle_buffer < 0) {
    return Invalid(absl::StrCat("training.shuffle_buffer = ", t.shuffle_buffer,
                                ": examples shuffled at once, 0 (in order) or more"));
  }
  if (t.cycle_length < 0 || t.cycle_length > kMaxCycleLength) {
    return Invalid(absl::StrCat("training.cycle_length = ", t.cycle_length,
                                ": files a replica reads at once, 1 to ", kMaxCycleLength, " (0: ",
                                kDefaultCycleLength, ", or ", kFollowCycleLength, " with follow)"));
  }
  if (t.onnx_weights != "use" && t.onnx_weights != "ignore") {
    return Invalid(absl::StrCat("training.onnx_weights = \"", t.onnx_weights,
                                "\": use (start from the ONNX file's initializers) or ignore "
                                "(draw fresh values)"));
  }
  if (const std::string o = absl::AsciiStrToLower(t.optimizer);
      !o.empty() && o != "sgd" && o != "momentum" && o != "adam") {
    return Invalid(absl::StrCat("training.optimizer = \"", t.optimizer,
                                "\": use sgd, momentum or adam (or leave it out for the model's "
                                "default)"));
  }
  if (!(t.learning_rate > 0)) {
    return Invalid(absl::StrCat("training.learning_rate = ", FormatScalar(t.learning_rate),
                                " must be positive"));
  }
  if (!(t.momentum >= 0)) {
    return Invalid(
        absl::StrCat("training.momentum = ", FormatScalar(t.momentum), " must be 0 or more"));
  }
  if (!(t.weight_decay >= 0)) {
    return Invalid(absl::StrCat("training.weight_decay = ", FormatScalar(t.weight_decay),
                                " must be 0 or more"));
  }
  // -1: not set (each model's own decay).
  if (!(t.batch_norm_decay == -1 || (t.batch_norm_decay >= 0 && t.batch_norm_decay < 1))) {
    return absl::InvalidArgumentError(
        absl::StrCat("training.batch_norm_decay = ", FormatScalar(t.batch_norm_decay),
                     " must be in [0, 1), or -1 for each model's own"));
  }
  if (!(t.batch_norm_epsilon > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.batch_norm_epsilon = ", FormatScalar(t.batch_norm_epsilon), " must be positive"));
  }
  if (t.wire_format != "float32" && t.wire_format != "bf16") {
    return Invalid(
        absl::StrCat("training.wire_format = \"", t.wire_format, "\": use float32 or bf16"));
  }
  if (t.compression != "none" && t.compression != "topk") {
    return Invalid(
        absl::StrCat("training.compression = \"", t.compression,
                     "\": use none, or topk (the largest gradients, with error feedback)"));
  }
  if (!(t.compression_ratio > 0 && t.compression_ratio <= 1)) {
    return Invalid(absl::StrCat("training.compression_ratio = ", FormatScalar(t.compression_ratio),
                                " must be in (0, 1]: the fraction of each chunk's gradients sent"));
  }
  if (t.staleness < 0) {
    return Invalid(absl::StrCat("training.staleness = ", t.staleness,
                                " must be 0 or more: the steps a replica may run ahead (ssp)"));
  }
  if (absl::Status s = ParseTraceSteps(t.trace_steps).status(); !s.ok()) {
    return Invalid(absl::StrCat("training.trace_steps: ", s.message()));
  }
  return absl::OkStatus();
}

// The sparse embedding tables' per-row optimizer, eviction and admission.
absl::Status ValidateEmbedding(const TrainingSpec& t) {
  const std::string& o = t.embedding_optimizer;
  if (o != "adagrad" && o != "ftrl" && o != "adam") {
    return Invalid(absl::StrCat("training.embedding_optimizer = ", Quoted(o),
                                ": use adagrad, ftrl (FTRL-Proximal) or adam (lazy Adam)"));
  }
  if (!(std::isfinite(t.embedding_learning_rate) && t.embedding_learning_rate > 0)) {
    return Invalid(absl::StrCat(
        "training.embedding_learning_rate = ", FormatScalar(t.embedding_learning_rate),
        " must be positive and finite: Adagrad's and Adam's learning rate, FTRL's alpha"));
  }
  // FTRL's regularization strengths.
  const auto check_strength = [&](const char* name, double value) -> absl::Status {
    if (!(std::isfinite(value) && value >= 0)) {
      return Invalid(absl::StrCat("training.", name, " = ", FormatScalar(value),
                                  " must be a finite number, 0 or more"));
    }
    if (value != 0 && o != "ftrl") {
      return Invalid(absl::StrCat("training.", name, " = ", FormatScalar(value), ": ", name,
                                  " applies to embedding_optimizer: ftrl only, and "
                                  "training.embedding_optimizer is ",
                                  Quoted(o), "; set ", name, " to 0 or use ftrl"));
    }
    return absl::OkStatus();
  };
  PSTRAIN_RETURN_IF_ERROR(check_strength("embedding_l1", t.embedding_l1));
  PSTRAIN_RETURN_IF_ERROR(check_strength("embedding_l2", t.embedding_l2));
  if (t.embedding_ttl_steps < 0) {
    return Invalid(absl::StrCat("training.embedding_ttl_steps = ", t.embedding_ttl_steps,
                                " must be 0 (never evict) or more: the global steps a row may go "
                                "without an update"));
  }
  if (t.embedding_min_count < 0) {
    return Invalid(absl::StrCat("training.embedding_min_count = ", t.embedding_min_count,
                                " must be 0 (a row at an id's first push) or more"));
  }
  return absl::OkStatus();
}

// Step counts, batch sizes, timeouts, checkpoint and summary settings.
absl::Status ValidateSchedule(const TrainingSpec& t) {
  if (t.num_epochs < 0) {
    return Invalid(absl::StrCat("training.num_epochs = ", t.num_epochs,
                                ": passes over train_files, 0 (for ever) or more"));
  }
  if (t.num_epochs > 0 && t.train_files.empty()) {
    return Invalid(
        absl::StrCat("training.num_epochs = ", t.num_epochs,
                     " counts passes over training.train_files, which is not set (data_dir "
                     "input is trained on for train_steps)"));
  }
  if (t.follow && t.train_files.empty()) {
    return Invalid(
        "training.follow follows the files training.train_files matches, which is not set");
  }
  if (t.follow && t.num_epochs > 1) {
    return Invalid(absl::StrCat("training.num_epochs = ", t.num_epochs,
                                " with training.follow, which trains on each file once"));
  }
  if (t.progressive_window < 1) {
    return Invalid(absl::StrCat("training.progressive_window = ", t.progressive_window,
                                " must be positive: the examples progressive validation covers"));
  }
  if (!(t.poll_secs > 0)) {
    return Invalid(absl::StrCat("training.poll_secs = ", t.poll_secs,
                                " must be positive: seconds between listings of train_files"));
  }
  const bool ends_with_input = (t.num_epochs > 0 || t.follow) && t.train_steps == 0;
  if (t.train_steps <= 0 && !ends_with_input) {
    return Invalid(absl::StrCat(
        "training.train_steps = ", t.train_steps,
        " must be positive: the global steps to train (or leave it out and set num_epochs with "
        "train_files: the job ends with its input)"));
  }
  if (t.batch_size <= 0) {
    return Invalid(absl::StrCat("training.batch_size = ", t.batch_size, " must be positive"));
  }
  if (t.eval_batch_size <= 0) {
    return Invalid(
        absl::StrCat("training.eval_batch_size = ", t.eval_batch_size, " must be positive"));
  }
  if (t.eval_steps < 0) {
    return Invalid(absl::StrCat("training.eval_steps = ", t.eval_steps, " must be 0 or more"));
  }
  if (t.log_every_n_steps < 0) {
    return Invalid(
        absl::StrCat("training.log_every_n_steps = ", t.log_every_n_steps, " must be 0 or more"));
  }
  if (!(t.sync_timeout > 0)) {
    return Invalid(absl::StrCat("training.sync_timeout = ", FormatScalar(t.sync_timeout),
                                " must be positive (seconds)"));
  }
  if (!(t.ps_retry_secs > 0)) {
    return Invalid(absl::StrCat("training.ps_retry_secs = ", FormatScalar(t.ps_retry_secs),
                                " must be positive (seconds)"));
  }
  if (!(t.failover_secs > 0)) {
    return Invalid(absl::StrCat("training.failover_secs = ", FormatScalar(t.failover_secs),
                                " must be positive (seconds)"));
  }
  if (!(t.watchdog_secs == 0 || t.watchdog_secs > t.sync_timeout)) {
    return Invalid(absl::StrCat(
        "training.watchdog_secs = ", FormatScalar(t.watchdog_secs),
        " must be 0 (off) or more than training.sync_timeout = ", FormatScalar(t.sync_timeout),
        " seconds (a sync step may wait that long by design)"));
  }
  if (t.checkpoint_steps < 0) {
    return Invalid(absl::StrCat("training.checkpoint_steps = ", t.checkpoint_steps,
                                " must be 0 (off) or more"));
  }
  if (!(t.checkpoint_secs >= 0)) {
    return Invalid(absl::StrCat("training.checkpoint_secs = ", FormatScalar(t.checkpoint_secs),
                                " must be 0 (off) or more"));
  }
  if (t.keep_checkpoint_max < 0) {
    return Invalid(absl::StrCat("training.keep_checkpoint_max = ", t.keep_checkpoint_max,
                                " must be 0 (keep all) or more"));
  }
  if (t.export_steps < 0 || !(t.export_secs >= 0)) {
    return Invalid(absl::StrCat("training.export_steps = ", t.export_steps,
                                ", training.export_secs = ", t.export_secs,
                                ": exports while training, 0 (off) or more"));
  }
  if (t.full_export_every < 1) {
    return Invalid(absl::StrCat("training.full_export_every = ", t.full_export_every,
                                " must be 1 (every export full) or more"));
  }
  if (t.exports_to_keep < 0) {
    return Invalid(absl::StrCat("training.exports_to_keep = ", t.exports_to_keep,
                                " must be 0 (no export) or more"));
  }
  if (t.projector_rows < 0 || t.projector_rows > 100000) {
    return Invalid(absl::StrCat("training.projector_rows = ", t.projector_rows,
                                " must be in [0, 100000] (0: no projector): TensorBoard's "
                                "projector works on rows in a browser tab"));
  }
  if (t.save_summary_steps < 0 || t.histogram_steps < 0) {
    return Invalid(absl::StrCat("training.save_summary_steps = ", t.save_summary_steps,
                                " and training.histogram_steps = ", t.histogram_steps,
                                " must be 0 (off) or more"));
  }
  if (!(t.flush_secs > 0)) {
    return Invalid(
        absl::StrCat("training.flush_secs = ", FormatScalar(t.flush_secs), " must be positive"));
  }
  if (!(t.shutdown_grace_secs > 0)) {
    return Invalid(absl::StrCat("training.shutdown_grace_secs = ",
                                FormatScalar(t.shutdown_grace_secs), " must be positive"));
  }
  if (!(t.startup_timeout > 0)) {
    return Invalid(absl::StrCat("training.startup_timeout = ", FormatScalar(t.startup_timeout),
                                " must be positive (seconds)"));
  }
  if (t.threads < 0) {
    return Invalid(
        absl::StrCat("training.threads = ", t.threads, " must be 0 (every core) or more"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTrainingSpec(const TrainingSpec& t) {
  PSTRAIN_RETURN_IF_ERROR(ValidateModelAndOptimizer(t));
  PSTRAIN_RETURN_IF_ERROR(ValidateEmbedding(t));
  return ValidateSchedule(t);
}

absl::Status ValidateJobConfig(const JobConfig& config) {
  PSTRAIN_RETURN_IF_ERROR(ValidateCluster(config.cluster));
  PSTRAIN_RETURN_IF_ERROR(ValidateTrainingSpec(config.training));
  if (NumTrainingReplicas(config) < 1) {
    return Invalid(
        "no training replicas: cluster.worker is empty and training.chief_trains is false; "
        "add workers or set training.chief_trains: true");
  }
  if (config.training.update == UpdateMode::kSync) PSTRAIN_RETURN_IF_ERROR(ValidateSync(config));
  const int num_ps = config.cluster.num_tasks("ps");
  if (config.training.ps_replication < 1 || config.training.ps_replication > num_ps) {
    return Invalid(absl::StrCat(
        "training.ps_replication = ", config.training.ps_replication, " must be in [1, ", num_ps,
        "]: copies of every chunk, each on its own ps task (cluster.ps has ", num_ps, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateTask(const ClusterSpec& cluster, const TaskSpec& task) {
  absl::StatusOr<std::string> job = CanonicalJobName(task.job_name);
  if (!job.ok()) return Invalid(absl::StrCat("task job_name: ", job.status().message()));
  const int count = cluster.num_tasks(*job);
  if (task.task_index < 0 || task.task_index >= count) {
    return Invalid(absl::StrCat(
        "task ", task.job_name, ":", task.task_index, " is not in the cluster: cluster.", *job,
        count == 0 ? " is empty"
                   : absl::StrCat(" has ", count, " task(s), task_index 0..", count - 1)));
  }
  return absl::OkStatus();
}

int NumTrainingReplicas(const JobConfig& config) {
  const int chief = config.training.chief_trains ? config.cluster.num_tasks("chief") : 0;
  return config.cluster.num_tasks("worker") + chief;
}

int EffectiveReplicasToAggregate(const JobConfig& config) {
  const int r = config.training.replicas_to_aggregate;
  return r == 0 ? NumTrainingReplicas(config) : r;
}

int64_t StepLimit(const TrainingSpec& t) {
  return t.train_steps > 0 ? t.train_steps : std::numeric_limits<int64_t>::max();
}

int EffectiveTotalReplicas(const JobConfig& config) {
  const int n = config.training.total_replicas;
  return n == 0 ? NumTrainingReplicas(config) : n;
}

}  // namespace pstrain
