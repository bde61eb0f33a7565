#ifndef PSTRAIN_INPUT_JOB_INPUT_H_
#define PSTRAIN_INPUT_JOB_INPUT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "config/cluster_config.h"
#include "data/batch_source.h"
#include "data/batcher.h"
#include "data/dataset.h"
#include "data/load.h"
#include "data/stream/example_stream.h"
#include "data/stream/streamed_batches.h"
#include "input/replica_spec.h"
#include "models/model.h"

namespace pstrain {

// A training replica's input assembled from the job (TrainingSpec), the one
// way the worker, the chief (when it trains) and local mode set it up: the
// data checked against the model, a batch iterator over this replica's part
// of it (resumed where the job is, with the model's augmentation,
// prefetching), or its share of the streamed train_files.

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

// A training replica's input: data_dir's training split read into memory,
// or, when the job sets train_files, the replica's share of those files
// streamed as it trains (data/stream/streamed_batches.h), with where its stream was
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
  // replicas takes its share of their unread input (data/stream/input_redeal.h).
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
// files' format told by their names (data/formats/example_format.h: Criteo TSV for
// .tsv or .tsv.gz, CSV by training.csv_schema for .csv or .csv.gz, else
// TFRecord Examples; an online job with no file listed yet by its
// train_files' names); `key` (the setting that named the files) begins an
// error, as for files of two formats.
absl::StatusOr<ExampleStreamOptions> StreamOptionsOf(Env* env, const TrainingSpec& t,
                                                     const Model& model, const ReplicaSpec& spec,
                                                     std::vector<std::string> files,
                                                     std::string_view key);

}  // namespace pstrain

#endif  // PSTRAIN_INPUT_JOB_INPUT_H_
