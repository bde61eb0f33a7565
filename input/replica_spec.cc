#include "input/replica_spec.h"

namespace pstrain {

int ReplicaId(const JobConfig& job, const TaskSpec& task) {
  const int chief = job.training.chief_trains ? 1 : 0;
  if (task.job_name == "chief") return job.training.chief_trains ? 0 : -1;
  if (task.job_name == "worker") return chief + task.task_index;
  return -1;
}

ReplicaSpec ReplicaSpecOf(const JobConfig& job, int replica) {
  return ReplicaSpecOf(job.training, replica, NumTrainingReplicas(job));
}

ReplicaSpec ReplicaSpecOf(const TrainingSpec& t, int replica, int num_replicas) {
  ReplicaSpec spec;
  spec.replica = replica;
  spec.num_replicas = num_replicas;
  spec.sync = t.update == UpdateMode::kSync;
  spec.batch_size = t.batch_size;
  spec.seed = t.seed;
  spec.use_distortion_for_training = t.use_distortion_for_training;
  spec.train_steps = StepLimit(t);
  spec.log_every_n_steps = t.log_every_n_steps;
  return spec;
}

}  // namespace pstrain
