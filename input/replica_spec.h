#ifndef PSTRAIN_INPUT_REPLICA_SPEC_H_
#define PSTRAIN_INPUT_REPLICA_SPEC_H_

#include <cstdint>

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

}  // namespace pstrain

#endif  // PSTRAIN_INPUT_REPLICA_SPEC_H_
