#ifndef PSTRAIN_PS_TASK_CHECKPOINT_H_
#define PSTRAIN_PS_TASK_CHECKPOINT_H_

// A ps task's checkpoint, both halves, in one place: its dense chunks
// (<prefix>.shard-<i>-of-<P>, io/checkpoint.h; restored from the shard files
// of any number of ps) and, for a model with embedding tables, its rows
// (<prefix>.rows-<i>-of-<P>, io/row_checkpoint.h; restored from every rows
// file of the checkpoint, keeping the rows this task owns, so rows saved by
// P ps re-hash onto any other number). PsTask checks the request, takes its
// save/restore lock and calls TaskCheckpoint; the formats stay in io/.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "io/checkpoint.h"
#include "ps/parameter_shard.h"
#include "ps/sparse_shard.h"
#include "ps_protocol/ps_status.h"

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

// One ps task's checkpoint: its chunks and its rows, saved together and
// restored together. A view over the task's parts, made for one call:
// `env`, `ps`, `shards` (the task's, in flat order), `sparse` (null for a
// model without embedding tables) and `embedding_optimizer` (names the
// rows' slots) must outlive it. Not thread-safe: the caller runs one save or
// restore at a time.
class TaskCheckpoint {
 public:
  TaskCheckpoint(Env* env, const PsIdentity& ps, const std::vector<ParameterShard*>& shards,
                 SparseShard* sparse, const std::string& embedding_optimizer)
      : env_(env), ps_(ps), shards_(shards), sparse_(sparse), optimizer_(embedding_optimizer) {}

  // Writes the chunks to <path>.shard-<i>-of-<P> (SaveShards, each copied at
  // `step`, waiting up to `wait`), then the rows to <path>.rows-<i>-of-<P>
  // (SparseShard::Save); both files record `global_step`. `path` is
  // checkpoint model.ckpt-<step> in the job dir. Logs a failure (and the
  // rows saved) and returns what the index records of the two files.
  absl::StatusOr<ShardSaved> Save(const std::string& path, int64_t step, int64_t global_step,
                                  absl::Duration wait) const;

  // Restores the chunks from the checkpoint whose index is at `index_path`
  // (RestoreShards), calls `rolled_back` once they are, then restores the
  // rows (RestoreRows). Meanwhile the rows answer UNAVAILABLE (clients
  // retry); if the chunks fail, nothing was changed; if the rows fail, they
  // stay unavailable until a restore or an initialization brings them back.
  // Returns the restored global step.
  absl::StatusOr<int64_t> Restore(const std::string& index_path, int64_t generation,
                                  absl::FunctionRef<void()> rolled_back) const;

  // The rows of every rows file the index names, at `step`, with the
  // generation of the first chunk (restored before): those `sparse` keeps,
  // its partition's (a replicated ps's backup of another task's rows too).
  // InvalidArgument if they were trained with another embedding optimizer.
  absl::Status RestoreRows(const std::string& index_path, int64_t step) const;

 private:
  Env* const env_;
  const PsIdentity& ps_;
  const std::vector<ParameterShard*>& shards_;
  SparseShard* const sparse_;
  const std::string& optimizer_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_TASK_CHECKPOINT_H_
