#ifndef PSTRAIN_WORKER_REPLICA_H_
#define PSTRAIN_WORKER_REPLICA_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "common/trace.h"
#include "config/cluster_config.h"
#include "data/batcher.h"
#include "data/dataset.h"
#include "data/example_stream.h"
#include "data/load.h"
#include "data/streamed_batches.h"
#include "models/model.h"
#include "ps_protocol/parameter_servers.h"
#include "worker/evaluation.h"
#include "worker/trainer.h"

namespace pstrain {

// The one way a training replica is set up, used by the worker, the chief
// (when it trains) and local mode: the data checked against the model, a
// batch iterator over this replica's part of it (resumed where the job is,
// with the model's augmentation, prefetching), and the trainer's options.

// Who a replica is and how it trains.
struct ReplicaSpec {
  int replica = 0;       // in [0, num_replicas)
  int num_replicas = 1;  // training replicas of the job
  bool sync = false;     // sync update: every replica does every step
  int batch_size = 100;
  uint64_t seed = 1;
  bool use_distortion_for_training = true;
  int64_t train_steps = 0;
  int64_t log_every_n_steps = 100;
};

// Replica `replica` of `job`.
ReplicaSpec ReplicaSpecOf(const JobConfig& job, int replica);
// Replica `replica` of `num_replicas` of a job trained by `t` (a job without
// a cluster: replica 0 of 1).
ReplicaSpec ReplicaSpecOf(const TrainingSpec& t, int replica, int num_replicas);

// Training replica id of a task: the chief is replica 0 when it trains, and
// worker j follows it. -1 for a task that does not train.
int ReplicaId(const JobConfig& job, const TaskSpec& task);

// Loads `split` of `data_dir` and checks its examples are `model`'s input.
absl::StatusOr<Dataset> LoadModelData(Env* env, const Model& model, const std::string& data_dir,
                                      Split split);

// The batches replica `spec.replica` trains on from global step
// `global_step` on: its shard of `train`, shuffled with the job's seed, the
// batches already trained on skipped (sync: one per step, so a resumed job
// sees exactly the examples an uninterrupted one would; async: about 1/N of
// the steps), the model's training augmentation, prefetching started.
// `train` and `model` must outlive the iterator.
absl::StatusOr<std::unique_ptr<BatchIterator>> StartReplicaBatches(const Dataset* train,
                                                                   const Model& model,
                                                                   const ReplicaSpec& spec,
                                                                   int64_t global_step);

// The chief's evaluation data: data_dir's test split in memory, or
// eval_files streamed anew (in file order) at every evaluation, so that no
// more than a batch of them is held.
class EvalInput {
 public:
  // Reads the test split (checked against `model`), or lists eval_files and
  // reads their first batch to check it: NotFound naming
  // training.eval_files and the pattern that matches nothing,
  // InvalidArgument for files that hold no example or not the model's.
  static absl::StatusOr<std::unique_ptr<EvalInput>> Open(Env* env, const TrainingSpec& t,
                                                         const Model& model);

  // `view`'s metrics over every example, in batches of the job's
  // eval_batch_size; a stream's errors name the file and where.
  absl::StatusOr<EvalMetrics> Evaluate(Model* model, const ParameterView& view) const;

  // What the chief evaluates on, for its log.
  std::string Describe() const;

 private:
  EvalInput(Env* env, int batch_size) : env_(env), batch_size_(batch_size) {}

  Env* const env_;
  const int batch_size_;
  Dataset data_;                                // in memory
  std::optional<ExampleStreamOptions> stream_;  // eval_files
};

// A training replica's input: data_dir's training split read into memory,
// or, when the job sets train_files, the replica's share of those files
// streamed as it trains (data/streamed_batches.h), with where its stream was
// kept in the job dir (input/replica-<r>.txt) so that a restarted replica
// goes on with the batch of the step it resumes at.
class ReplicaInput {
 public:
  // Reads the data (checked against `model`), or lists train_files and
  // checks they are tabular input for the model: NotFound naming
  // training.train_files and the pattern that matches nothing,
  // InvalidArgument for a model that takes images.
  static absl::StatusOr<std::unique_ptr<ReplicaInput>> Open(Env* env, const TrainingSpec& t,
                                                            const Model& model,
                                                            const ReplicaSpec& spec);

  // The batches from global step `global_step` on, as StartReplicaBatches
  // says (sync: the replica's batch number global_step; async: about
  // global_step / replicas), prefetching started. A streamed replica with
  // no position of its own in a job that ran with another number of
  // replicas takes its share of their unread input (data/input_redeal.h).
  absl::StatusOr<std::unique_ptr<BatchSource>> Start(int64_t global_step);

  // What the replica reads, for its first log line.
  std::string Describe() const;
  bool streamed() const { return !options_.files.empty() || !options_.follow_list.empty(); }

 private:
  ReplicaInput(Env* env, const Model& model, const ReplicaSpec& spec)
      : env_(env), model_(model), spec_(spec) {}

  // The position log for options_ (read).
  absl::Status OpenLog();
  // Plans or takes the deal of the run before's unread input at
  // `global_step`, if it had another number of replicas.
  absl::Status Redeal(int64_t global_step);

  Env* const env_;
  const Model& model_;
  const ReplicaSpec spec_;
  Dataset train_;                          // in memory
  ExampleStreamOptions options_;           // streamed: its files are set
  std::unique_ptr<InputPositionLog> log_;  // streamed
  std::string dir_;                        // streamed: the job dir's input/
};

// The options of a stream of `files` for `model`, replica `spec`: the
// files' format told by their names (data/example_format.h: Criteo TSV for
// .tsv or .tsv.gz, CSV by training.csv_schema for .csv or .csv.gz, else
// TFRecord Examples; an online job with no file listed yet by its
// train_files' names); `key` (the setting that named the files) begins an
// error, as for files of two formats.
absl::StatusOr<ExampleStreamOptions> StreamOptionsOf(Env* env, const TrainingSpec& t,
                                                     const Model& model, const ReplicaSpec& spec,
                                                     std::vector<std::string> files,
                                                     std::string_view key);

// The trainer's options for the replica (its dropout seed differs per
// replica).
TrainerOptions ReplicaTrainerOptions(const ReplicaSpec& spec);

// TensorBoard's input/* scalars of a replica's streamed input
// (examples_per_sec, MB_per_sec, wait_ms_per_step, epoch, bad_records),
// written to the
// run input/replica-<r> of the job dir: a TrainerOptions::on_input. Empty
// (and said in the log) if the event file cannot be made.
std::function<void(int64_t, const InputRates&)> InputSummaries(Env* env, const std::string& job_dir,
                                                               int replica);

// Progressive validation for a replica of `model` (null when the job does
// not ask for it), and the writer of its progressive/* scalars to the run
// progressive/replica-<r> of the job dir (empty, and said in the log, if
// the event file cannot be made).
std::unique_ptr<ProgressiveValidation> ProgressiveValidationOf(const TrainingSpec& t,
                                                               const Model& model);
std::function<void(int64_t, const ProgressiveMetrics&)> ProgressiveSummaries(
    Env* env, const std::string& job_dir, int replica);

// Measures each ps task's clock minus this process's (microseconds), from
// the Status round trip with the shortest of `samples` (off by at most half
// of it), and records them in `trace` as "ps_clock_offsets_us", so the
// chief can put the cluster's traces on one clock (common/cluster_trace.h).
// Nothing is recorded if the servers do not answer.
void RecordPsClockOffsets(ParameterServers* servers, TraceRecorder* trace, int samples = 5);

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_REPLICA_H_
