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
#include "data/dataset.h"
#include "data/stream/example_stream.h"
#include "input/replica_spec.h"
#include "models/model.h"
#include "ps_protocol/parameter_servers.h"
#include "worker/evaluation.h"
#include "worker/trainer.h"

namespace pstrain {

// The one way a training replica is set up, used by the worker, the chief
// (when it trains) and local mode: who the replica is, the trainer's options
// and hooks (summaries, progressive validation), and the evaluation's input;
// the replica's input itself is assembled in input/job_input.h.

// Replica `replica` of `job`.
ReplicaSpec ReplicaSpecOf(const JobConfig& job, int replica);
// Replica `replica` of `num_replicas` of a job trained by `t` (a job without
// a cluster: replica 0 of 1).
ReplicaSpec ReplicaSpecOf(const TrainingSpec& t, int replica, int num_replicas);

// Training replica id of a task: the chief is replica 0 when it trains, and
// worker j follows it. -1 for a task that does not train.
int ReplicaId(const JobConfig& job, const TaskSpec& task);

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
