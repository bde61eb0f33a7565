#ifndef PSTRAIN_WORKER_LOCAL_TRAINING_H_
#define PSTRAIN_WORKER_LOCAL_TRAINING_H_

// A job without a cluster (pstrain-worker on its own, like an Estimator run
// without TF_CONFIG): the one training replica of the job, with parameters
// and optimizer in its process. It runs the cluster's job path: the same
// TrainingSpec, checked by the same validation, the model the same
// resolution gives, and the input of a cluster replica and of the chief's
// evaluation (ReplicaInput in input/job_input.h, EvalInput in
// input/eval_input.h). What a job without a cluster cannot do (checkpoints,
// exports, summaries, periodic evaluation, following new files, anything of
// the wire or the other tasks) is refused, naming the key, rather than
// ignored.

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "config/cluster_config.h"
#include "worker/evaluation.h"

namespace pstrain {

// OK when every training key of `t` is one a job without a cluster honours
// or has its default value; else InvalidArgument naming the first other
// key ("training.checkpoint_steps = 50: a job without a cluster writes no
// checkpoints; ...").
absl::Status CheckLocalTraining(const TrainingSpec& t);

// Trains the job `t` (validated by ValidateTrainingSpec and
// CheckLocalTraining here; its model resolved, as TrainingSpecFromFlags and
// ResolveRole leave it, or a built-in's name) in this process: its input as
// replica 0 of 1 reads it (data_dir's training split, or train_files
// streamed), until train_steps or the end of num_epochs, then evaluates on
// the test split or eval_files and logs the evaluation line. Writes to the
// job dir only what a replica writes there (its input positions and
// summaries, the trace trace_steps asks for). Errors name what was wrong:
// a bad key, an unknown model, missing or damaged data files, an unwritable
// job dir.
absl::StatusOr<EvalMetrics> RunLocalTraining(Env* env, const TrainingSpec& t);

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_LOCAL_TRAINING_H_
