#ifndef PSTRAIN_CONFIG_CLUSTER_CONFIG_H_
#define PSTRAIN_CONFIG_CLUSTER_CONFIG_H_

// The job configuration: where every task of the cluster listens (TensorFlow's
// ClusterSpec), which task this process is (TF's task type and index), and the
// training hyperparameters. It comes from a cluster YAML, from a Cloud ML
// Engine "trainingInput" YAML, or from TensorFlow's TF_CONFIG JSON, and is
// overridden field by field from command-line flags.
//
// Intended use in a main():
//   1. LoadJobConfig (or ParseTfConfig for the cluster and task),
//   2. SetTrainingField for each flag given on the command line,
//   3. ValidateJobConfig and ValidateTask; refuse to start on an error.
// Parsing checks only the shape and types of the input; whether the result is
// runnable is ValidateJobConfig's job, so flags can fix a config file first.
//
// Implemented by concern: training_fields.cc (the TrainingSpec field table),
// cluster_config.cc (the cluster YAML form), ml_engine_config.cc (Cloud ML
// Engine's trainingInput), tf_config.cc (TF_CONFIG), config_validation.cc,
// config_yaml_output.cc (JobConfigToYaml). Model-specific rules (a model's
// default optimizer, its valid depths) live with the models
// (models/model_options.h).
//
// Every function here is thread-compatible and keeps no state. Failures are
// InvalidArgument (NotFound etc. from the Env for a file that cannot be read)
// and the message names the offending key, e.g. "training.batch_size".

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "config/model_spec.h"
#include "config/wire_security.h"

namespace pstrain {

// Addresses ("host:port", IPv6 as "[::1]:port") of every task, by job name, as
// TensorFlow's ClusterSpec. Task i of a job is element i of its list.
struct ClusterSpec {
  std::vector<std::string> chief;  // at most one task (ValidateJobConfig)
  std::vector<std::string> worker;
  std::vector<std::string> ps;

  // Number of tasks of `job_name` ("chief", its alias "master", "worker" or
  // "ps"); 0 for any other name.
  int num_tasks(std::string_view job_name) const;

  // Address of task `task_index` of `job_name`. InvalidArgument naming the job
  // and its index range if there is no such task.
  absl::StatusOr<std::string> address(std::string_view job_name, int task_index) const;

  friend bool operator==(const ClusterSpec&, const ClusterSpec&) = default;
};

// Which task a process is. job_name is "chief", "worker" or "ps"; TensorFlow's
// "master" is accepted everywhere as an alias of "chief".
struct TaskSpec {
  std::string job_name;
  int task_index = 0;

  friend bool operator==(const TaskSpec&, const TaskSpec&) = default;
};

// "chief" for "chief" or "master", the name itself for "worker" and "ps";
// InvalidArgument naming the accepted names for anything else.
absl::StatusOr<std::string> CanonicalJobName(std::string_view job_name);

// How the parameter servers apply gradients (see docs/training.md, "How it behaves").
// kSsp: stale synchronous parallel (bounded staleness): async updates, but
// a replica waits (in its push) while it is more than `staleness` steps
// ahead of the slowest live replica.
enum class UpdateMode { kAsync, kSync, kSsp };

// "async", "sync" or "ssp"; InvalidArgument otherwise.
absl::StatusOr<UpdateMode> ParseUpdateMode(std::string_view name);
// "async", "sync" or "ssp".
std::string_view UpdateModeName(UpdateMode mode);

// A job's model spec, read once in each process that reads the job (from
// its YAML's `model:` section, or from the file training.model names) and
// carried as a value to the model built from it. Its layers keep the lines
// they were read at in `source`, so an error in building it names the line
// its author sees. Where it was read is not part of the job: two are equal
// when their specs are the same (SameModelSpec), as a job written out and
// read back has the same spec read at other lines.
struct JobModelSpec {
  ModelSpec spec;
  std::string source;  // the file (or job file) it was read from; begins messages
  friend bool operator==(const JobModelSpec& a, const JobModelSpec& b) {
    return SameModelSpec(a.spec, b.spec);
  }
};

// Reads a spec's text as ParseModelSpec does and keeps where it was read.
absl::StatusOr<JobModelSpec> ParseJobModelSpec(std::string_view yaml, std::string_view source);

// The training section. Every field has a key of the same name in the YAML
// "training" map and a command-line flag of the same name.
// The most files a replica may read at once (training.cycle_length): each
// open file holds a reader and its buffers.
inline constexpr int kMaxCycleLength = 1024;
inline constexpr int kDefaultCycleLength = 16;
inline constexpr int kFollowCycleLength = 4;

struct TrainingSpec {
  // A built-in model's name (models/registry.h), or a model spec file
  // (local or gs://, read by LoadModelSpecFile in role/model_source.h).
  std::string model = "mnist_cnn";
  // The model spec (config/model_spec.h), when the job has one: given inline
  // (a `model:` map in the job YAML), read from the file `model` named, or a
  // built-in's resolved (ResolveJobModel in models/model_options.h); `model`
  // is then the spec's name. None: the registry's spec for `model`. Not a
  // training key of its own: the YAML writes it as the job's `model:` section.
  std::optional<JobModelSpec> model_spec;
  // A model read from an ONNX file (`model: net.onnx`): "use" starts it from
  // the file's initializers, "ignore" from the spec's initializers (fresh
  // values chosen by layer type).
  std::string onnx_weights = "use";
  // cifar10_resnet: depth (6n + 2), batch norm's moving-average decay and
  // epsilon, and the training augmentation (pad 4, random crop, flip), with
  // the CIFAR-10 estimator's flag names and defaults.
  int num_layers = 44;
  // The moving-average decay of every batch norm that does not set its own
  // (a spec's batch_norm without momentum, and cifar10_resnet's). -1, the
  // default, is "not set": each model's own, cifar10_resnet's 0.997 (the
  // estimator's) and Keras' 0.99 for a spec's batch_norm (models/registry.h).
  double batch_norm_decay = -1;
  double batch_norm_epsilon = 1e-5;
  bool use_distortion_for_training = true;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  // Streamed input (data/stream/example_stream.h) for tabular models: a glob or a
  // comma-separated list of TFRecord files of tf.train.Example, or of Criteo
  // TSV files (names ending .tsv or .tsv.gz), local or gs://. Set, the
  // training replicas stream their share of these files instead of reading
  // data_dir's training split into memory; a pattern that matches nothing
  // stops every role at start. eval_files: the same for the chief's
  // evaluation (empty: data_dir's test split).
  std::string train_files;
  std::string eval_files;
  std::string input_compression = "auto";  // auto (gzip for .gz), none or gzip
  int shuffle_buffer = 10000;              // examples per replica shuffled at once; 0: in order
  // Streamed input: each epoch reads train_files in an order drawn from the
  // job's seed and the epoch, dealt to the replicas from that order
  // (tf.data's list_files(shuffle=True)); false: name order. Following new
  // files (follow) keeps their arrival order.
  bool shuffle_files = true;
  // Streamed input: files each replica reads at once, a record from each in
  // turn (tf.data's interleave cycle_length); 0: kDefaultCycleLength, or 4
  // when following new files (the number online jobs have always read at,
  // which their position logs are of). On a log of 60 daily files whose
  // model moves from day to day, 4 trained 0.016 AUC below the same rows
  // shuffled into one file, 16 within 0.005 at the same rate
  // (tests/bench/drift_bench.sh). Each open file holds its read buffers
  // (about 2 MiB; 8 MiB from gs://).
  int cycle_length = 0;
  // Streamed input: passes over train_files; 0: for ever. With num_epochs,
  // train_steps may be left 0: the job ends when every replica's input ends
  // (it saves, evaluates, exports and completes as at train_steps), or at
  // train_steps if that comes first.
  int64_t num_epochs = 0;
  // CSV input (names ending .csv or .csv.gz): a YAML file with the schema
  // that turns its records into examples (data/formats/csv_format.h).
  std::string csv_schema;
  // Streamed input: bad records (or damaged rests of files) a replica skips,
  // each logged and counted, before one stops it.
  int64_t max_bad_records = 0;
  // Online training: after the files train_files matches at start, the
  // chief lists it again every poll_secs and the replicas train on each new
  // file once, in the order found (name order within a listing); the job
  // runs until stopped (or train_steps). Each file is read once.
  bool follow = false;
  double poll_secs = 30;
  // Progressive validation: each training batch is predicted by the model
  // before its update; loss, AUC (binary heads) and accuracy over the last
  // progressive_window examples, logged and written as progressive/*.
  bool progressive_validation = false;
  int64_t progressive_window = 100000;
  std::string job_dir;  // checkpoints, events, export; required
  UpdateMode update = UpdateMode::kAsync;
  // ssp: how many steps a replica may run ahead of the slowest live one
  // (0: lockstep; replicas silent for sync_timeout are not waited for).
  int staleness = 3;
  int replicas_to_aggregate = 0;  // sync: R; 0 means "every training replica"
  int total_replicas = 0;         // sync: N; 0 means "every training replica"
  bool chief_trains = true;       // the chief is also a training replica
  // sgd, momentum or adam; empty: the model's own (adam for mnist_cnn, as
  // the MNIST tutorials; momentum for cifar10_resnet, as the CIFAR-10
  // estimator). See EffectiveOptimizer (models/model_options.h).
  std::string optimizer;
  double learning_rate = 0.001;
  std::string learning_rate_schedule;  // "1000:0.1,2000:0.01": multipliers by step
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0;
  std::string weight_decay_exclusions = "bias";  // comma-separated name substrings
  // Sparse embedding tables (the model spec's embedding layers), updated row
  // by row on the ps; the dense variables keep optimizer and learning_rate.
  // embedding_optimizer: adagrad (TF 1.x's tf.train.AdagradOptimizer), ftrl
  // (FTRL-Proximal, McMahan et al. 2013, as tf.train.FtrlOptimizer) or adam
  // (lazy Adam: only the rows a batch touches).
  std::string embedding_optimizer = "adagrad";
  double embedding_learning_rate = 0.05;  // Adagrad's and Adam's learning rate, FTRL's alpha
  // ftrl only: tf.train.FtrlOptimizer's l1_regularization_strength and
  // l2_regularization_strength; nonzero with another optimizer is refused.
  double embedding_l1 = 0.0;
  double embedding_l2 = 0.0;
  // A row not updated for this many global steps is evicted (0: never).
  int64_t embedding_ttl_steps = 0;
  // A row is created once its id was pushed this many times (0 or 1: at its
  // first push); until then its gradients are dropped.
  int64_t embedding_min_count = 0;
  int batch_size = 100;
  int eval_batch_size = 200;
  int64_t train_steps = 0;  // global steps; required (> 0) unless num_epochs ends the job
  int64_t eval_steps = 1000;
  int64_t log_every_n_steps = 100;
  uint64_t seed = 1;
  double sync_timeout = 30;      // seconds a sync step waits for missing replicas
  double startup_timeout = 300;  // seconds a task waits for the others to come up
  // Seconds the chief and a worker retry a ps that does not answer (a ps
  // restarting, a VM recreated) before the call fails: the task then exits
  // 138 so that a restart resumes the job.
  double ps_retry_secs = 60;
  // The chief's progress watchdog: no global step for this long while the
  // job runs -> a log line saying so and a rollback to the last checkpoint
  // (0: off). More than sync_timeout, which a step may wait by design.
  double watchdog_secs = 600;
  // Copies of every dense chunk and table partition (issue 55): a primary
  // and ps_replication - 1 backups on the next ps tasks of the ring, which
  // hold every acknowledged update; when a primary dies, the next copy
  // serves in its place within failover_secs, with no rollback. 1: no
  // backups (a ps that dies rolls the job back to its last checkpoint).
  int ps_replication = 1;
  // Seconds a primary may go unanswered before the chief promotes a backup.
  double failover_secs = 2;
  // Checkpoints (the chief): every checkpoint_steps global steps and/or
  // checkpoint_secs seconds (0 turns either off), and at the end; the newest
  // keep_checkpoint_max are kept (0 keeps all).
  int64_t checkpoint_steps = 1000;
  double checkpoint_secs = 0;
  int keep_checkpoint_max = 5;
  // At the end of training the chief exports the model for serving to
  // <job_dir>/export/<version>/ and keeps the newest exports_to_keep
  // versions (TensorFlow's LatestExporter); 0: no export.
  int exports_to_keep = 5;
  // Exports while training (online training, serving that follows it): a
  // new version from the first checkpoint at or after every export_steps
  // global steps or export_secs seconds (0: off). Training does not pause.
  int64_t export_steps = 0;
  double export_secs = 0;
  // Of those exports, for a click model, every full_export_every-th is a
  // full version and the others deltas: the rows changed since the version
  // before (io/export_format.h). 1: every export is full.
  int full_export_every = 1;
  // After SIGTERM (a preemption notice), the seconds a process has to save a
  // checkpoint and exit.
  double shutdown_grace_secs = 25;
  // TensorBoard summaries (the chief): training scalars every
  // save_summary_steps, variable histograms every histogram_steps (0: none),
  // event files flushed at least every flush_secs.
  int64_t save_summary_steps = 100;
  int64_t histogram_steps = 1000;
  double flush_secs = 30;
  // TensorBoard's PROJECTOR tab (io/projector.h): at each checkpoint, each
  // embedding table's this many most trained rows, with their raw values
  // where the input is CSV (0: none; at most kMaxProjectorRows).
  int64_t projector_rows = 10000;
  int threads = 0;  // compute threads per process, 0 = all cores
  // Encoding of gradients and pulled parameters on the wire: bf16 (half the
  // bytes; the ps keep float32 masters and optimizer state), or float32.
  std::string wire_format = "bf16";
  // Gradient compression on the wire: "none", or "topk": each chunk sends
  // only its compression_ratio largest gradients (by magnitude) as index and
  // float32 value; what is not sent is kept by the replica and added to its
  // next gradients (error feedback), so nothing is lost, only delayed.
  std::string compression = "none";
  // The next step's forward pass starts as soon as the first layers'
  // parameters are back, and waits layer by layer for the rest, instead of
  // after the last answer of the push (PsClient, overlap_pull).
  bool overlap_pull = true;
  double compression_ratio = 0.01;
  // Profiling: "A:B" makes every task write a Chrome trace of global steps
  // A..B to <job_dir>/plugins/profile/steps_A_B/ (see common/cluster_trace.h).
  std::string trace_steps;
  // Wire security (docs/security.md): mutual TLS with the job's certificates
  // in tls_dir (ca.crt, and <job>-<index>.crt/.key for each task, as
  // pstrain-certs makes them) and the shared job token in token_file, which
  // every RPC carries and the ps checks. A cluster task refuses to start
  // without both unless insecure is true (plaintext; a token_file is still
  // checked if given). The launcher makes a fresh set for its job when none
  // is configured.
  std::string tls_dir;
  std::string token_file;
  bool insecure = false;

  friend bool operator==(const TrainingSpec&, const TrainingSpec&) = default;
};

// Sets one training field from its string form (a YAML scalar or a flag
// value). `key` may use underscores or TF-tutorial hyphens ("train-steps").
// Integers are decimal and must fit the field (seed: not negative); doubles
// are decimal or exponent form and finite; bools true/false in any case (also
// 1/0, yes/no); update async/sync/ssp; strings are taken as they are.
// InvalidArgument for an unknown key ("unknown key training.X", with "(did
// you mean Y?)" when a known key is within edit distance 2) or a value that
// does not parse ("training.batch_size: \"abc\" is not an integer"). On
// error `*spec` is unchanged.
absl::Status SetTrainingField(TrainingSpec* spec, std::string_view key, std::string_view value);

// The string form of one field, which SetTrainingField parses back to the same
// value (doubles are written with the shortest exact representation).
// InvalidArgument for an unknown key.
absl::StatusOr<std::string> GetTrainingField(const TrainingSpec& spec, std::string_view key);

// Every training key (underscore form), in declaration order.
std::vector<std::string> TrainingFieldNames();

struct JobConfig {
  ClusterSpec cluster;
  TrainingSpec training;
  // This task's credentials, loaded by its main() from training.tls_dir and
  // token_file (LoadWireSecurity); not part of the YAML.
  WireSecurity wire;

  friend bool operator==(const JobConfig&, const JobConfig&) = default;
};

// Parses a job config YAML. Two forms:
//
//   cluster:                       # TensorFlow's ClusterSpec
//     chief: ["10.0.0.1:2222"]     # "master" is accepted for "chief"
//     worker: ["10.0.0.2:2222", "10.0.0.3:2222"]
//     ps: ["10.0.0.4:2222"]
//   training:                      # any TrainingSpec keys; the rest keep defaults
//     train_steps: 3000
//
// or Cloud ML Engine's:
//
//   trainingInput:
//     scaleTier: CUSTOM            # or BASIC: one chief and nothing else
//     workerCount: 2
//     parameterServerCount: 1
//     masterType: standard         # *Type, region, runtimeVersion, pythonVersion,
//                                  # pythonModule, packageUris: accepted, ignored
//     jobDir: jobs/mlengine        # optional, sets training.job_dir
//     args: ["--train-steps=3000"] # optional, flags setting training fields
//   training: {...}                # optional
//
// In the trainingInput form every task gets a loopback address 127.0.0.1 with
// consecutive ports from `base_port`: the chief first, then the workers, then
// the ps. Training fields are applied in file order: training section, then
// jobDir, then args; a field set twice is an error.
//
// `source` (the file name) begins every message. Unknown keys anywhere are
// errors naming the key path with a suggestion, e.g. "cluster.yaml: unknown
// key training.learning_rat (did you mean learning_rate?), line 7"; YAML
// syntax errors name the line and column. The result is not validated.
absl::StatusOr<JobConfig> ParseJobConfig(std::string_view yaml_text, std::string_view source,
                                         int base_port = 23450);

// Reads `path` through `env` and parses it with ParseJobConfig, `path` as the
// source. The Env's error (e.g. NotFound) if the file cannot be read.
absl::StatusOr<JobConfig> LoadJobConfig(Env* env, const std::string& path, int base_port = 23450);

// TensorFlow's TF_CONFIG environment variable:
//   {"cluster": {"chief": [...], "worker": [...], "ps": [...]},
//    "task": {"type": "worker", "index": 1}}
// "master" is accepted for "chief" (in the cluster and as task type; the
// result says "chief"). Top-level "environment", "job" and "rpc_layer" and
// the task's "trial" and "cloud" (set by Cloud ML Engine) are ignored; any
// other key is an error. A missing task index means 0. Checks that the task is
// in the cluster (ValidateTask); the cluster itself is checked by
// ValidateJobConfig. Every message begins "TF_CONFIG: ".
struct TfConfig {
  ClusterSpec cluster;
  TaskSpec task;
};
absl::StatusOr<TfConfig> ParseTfConfig(std::string_view json);

// Checks the cluster alone: at least one ps; exactly one chief (TensorFlow's
// older convention of worker 0 acting as chief is not supported); every
// address "host:port" with a non-empty host and a port in 1..65535; no
// address used by two tasks.
absl::Status ValidateCluster(const ClusterSpec& cluster);

// Checks a config is runnable: ValidateCluster, then train_steps > 0,
// batch_size > 0, eval_batch_size > 0, eval_steps >= 0, log_every_n_steps >=
// 0, job_dir/model/data_dir/optimizer non-empty, learning_rate > 0, momentum
// and weight_decay >= 0, sync_timeout and startup_timeout > 0, threads >= 0,
// at least one training replica, and in sync mode 1 <= R <= N == T (see
// EffectiveReplicasToAggregate). Returns the first problem found; its message
// names the key, e.g. "training.replicas_to_aggregate = 5 is more than
// training.total_replicas = 3". The learning-rate schedule's syntax is checked
// where it is parsed (ps/learning_rate.h), not here.
absl::Status ValidateJobConfig(const JobConfig& config);

// The training section's checks of ValidateJobConfig, every one but those
// that need the cluster (the replica counts of sync): a job without a
// cluster (pstrain-worker on its own) is checked by these.
absl::Status ValidateTrainingSpec(const TrainingSpec& t);

// Checks `task` names a task of `cluster`: a known job name (or "master") and
// 0 <= task_index < the job's task count.
absl::Status ValidateTask(const ClusterSpec& cluster, const TaskSpec& task);

// This task's credentials from training.tls_dir, token_file and insecure
// (see TrainingSpec), read through `env`. InvalidArgument saying what is
// missing and how to make it: a cluster task without TLS and a token that was
// not told insecure, a file that cannot be read, a token shorter than 16
// characters.
absl::StatusOr<WireSecurity> LoadWireSecurity(Env* env, const TrainingSpec& t,
                                              const TaskSpec& task);

// T: the processes that compute gradients: every worker, plus the chief when
// training.chief_trains.
int NumTrainingReplicas(const JobConfig& config);
// The global step training stops at: train_steps, or no step when it is 0
// (num_epochs: the job ends with its input).
int64_t StepLimit(const TrainingSpec& t);
// R: replicas_to_aggregate, or T when it is 0.
int EffectiveReplicasToAggregate(const JobConfig& config);
// N: total_replicas, or T when it is 0.
int EffectiveTotalReplicas(const JobConfig& config);

// The config as YAML in the first form above, every training field written
// out, so a launcher can hand its children the effective config.
// ParseJobConfig(JobConfigToYaml(c), ...) == c for UTF-8 strings.
std::string JobConfigToYaml(const JobConfig& config);

}  // namespace pstrain

#endif  // PSTRAIN_CONFIG_CLUSTER_CONFIG_H_
