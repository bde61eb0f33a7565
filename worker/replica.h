#ifndef PSTRAIN_WORKER_REPLICA_H_
#define PSTRAIN_WORKER_REPLICA_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "common/trace.h"
#include "config/cluster_config.h"
#include "data/dataset.h"
#include "input/replica_spec.h"
#include "models/model.h"
#include "ps_protocol/parameter_servers.h"
#include "worker/trainer.h"

namespace pstrain {

// The one way a training replica is set up, used by the worker, the chief
// (when it trains) and local mode: the trainer's options and hooks
// (summaries, progressive validation). Who the replica is comes from
// input/replica_spec.h, its input from input/job_input.h, and the
// evaluation's input from input/eval_input.h.

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
