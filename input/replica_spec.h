#ifndef PSTRAIN_INPUT_REPLICA_SPEC_H_
#define PSTRAIN_INPUT_REPLICA_SPEC_H_

#include <cstdint>

#include "config/cluster_config.h"

namespace pstrain {

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

}  // namespace pstrain

#endif  // PSTRAIN_INPUT_REPLICA_SPEC_H_
