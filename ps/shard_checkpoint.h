#ifndef PSTRAIN_PS_SHARD_CHECKPOINT_H_
#define PSTRAIN_PS_SHARD_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "io/checkpoint.h"
#include "ps/parameter_shard.h"

namespace pstrain {

// Which ps task a set of shards belongs to, for checkpoint files.
struct PsIdentity {
  std::string model;
  int ps_index = 0;
  int num_ps = 1;
  int64_t num_params = 0;
  std::string job_dir;  // the only place its checkpoints are written and read
};

struct ShardSaveResult {
  WrittenShard written;
  int64_t begin = 0;  // the ps's range
  int64_t end = 0;
  int64_t num_state = 0;
  int64_t min_step = 0;  // among the saved shards
  int64_t max_step = 0;
  std::string optimizer;
  std::vector<std::string> slot_names;
  absl::Duration snapshot_time;  // copying under the shard locks, waits included
  absl::Duration longest_copy;   // the longest a shard's lock was held for its copy
  absl::Duration write_time;
};

// Writes one ps task's shards (in flat order) to
// <prefix>.shard-<ps_index>-of-<num_ps>: each shard is copied under its lock
// (ParameterShard::Snapshot with `at_step` and `wait`), then the file is
// written outside every lock, so training goes on while it is written.
absl::StatusOr<ShardSaveResult> SaveShards(Env* env, const PsIdentity& ps,
                                           const std::vector<ParameterShard*>& shards,
                                           const std::string& prefix, int64_t global_step,
                                           int64_t at_step, absl::Duration wait);

// Loads one ps task's shards from the checkpoint whose index is at
// `index_path`, whatever number of ps wrote it: parameters, optimizer slots
// and steps (every shard at the index's global step), and the state on the
// shard that holds it. InvalidArgument if the checkpoint is of another model,
// size or optimizer (naming what differs); DataLoss (naming the file) if a
// file is damaged. Returns the global step.
absl::StatusOr<int64_t> RestoreShards(Env* env, const PsIdentity& ps,
                                      const std::vector<ParameterShard*>& shards,
                                      const std::string& index_path, int64_t generation = 0);

}  // namespace pstrain

#endif  // PSTRAIN_PS_SHARD_CHECKPOINT_H_
