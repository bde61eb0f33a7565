#ifndef PSTRAIN_IO_CHECKPOINT_INSPECT_H_
#define PSTRAIN_IO_CHECKPOINT_INSPECT_H_

// What pstrain-ckpt prints about a checkpoint (TensorFlow's
// inspect_checkpoint, for pstrain's files).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace pstrain {

// The index files `path` names: for "<dir>/model.ckpt-<N>" or
// "<dir>/model.ckpt-<N>.index" that index; for a job dir its newest
// checkpoint's index, or with `all` every checkpoint's, newest first.
// NotFound if `arg` is none of these or a job dir holds no checkpoint.
absl::StatusOr<std::vector<std::string>> CheckpointIndexPaths(Env* env, const std::string& path,
                                                              bool all);

// A report on the checkpoint whose index is at `index_path`: its prefix,
// global step, model, optimizer, number of shards (the ps that wrote it) and
// time written, then per variable its shape and the L2 norm, min and max of
// its values (and the L2 norm of each optimizer slot for a trainable one),
// and last "checksums: N shard files OK (X MiB)". Every shard file is read
// and checked against the index's size and CRC, whether or not a variable
// lies in it. DataLoss (naming the file) for a damaged or inconsistent file,
// NotFound for a missing one.
absl::StatusOr<std::string> InspectCheckpoint(Env* env, const std::string& index_path);

}  // namespace pstrain

#endif  // PSTRAIN_IO_CHECKPOINT_INSPECT_H_
