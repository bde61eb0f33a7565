#ifndef PSTRAIN_IO_CHECKPOINT_H_
#define PSTRAIN_IO_CHECKPOINT_H_

// Checkpoint files (docs/data-formats.md, "Checkpoint files"):
//   <dir>/model.ckpt-<step>.shard-<i>-of-<P>  ps i: parameters, optimizer slots, steps
//   <dir>/model.ckpt-<step>.index             chief: model, variables, layout, CRCs
//   <dir>/checkpoint                          TensorFlow's text form, newest last
// Shard and index files are TFRecord-framed (proto/checkpoint.proto); every
// file is written to a temp name, fsynced and renamed, so a crash leaves only
// whole files. A checkpoint exists once its index does.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "proto/checkpoint.pb.h"

namespace pstrain {

// "model.ckpt-<step>".
std::string CheckpointPrefix(int64_t step);
// "<prefix>.shard-<i>-of-<P>" (the ps index is 0-based, as TensorFlow's
// "-00000-of-00002" are).
std::string ShardFileName(std::string_view prefix, int ps, int num_ps);
// "<prefix>.rows-<i>-of-<P>": ps i's rows of the model's embedding tables
// (io/row_checkpoint.h).
std::string RowsFileName(std::string_view prefix, int ps, int num_ps);

// "<prefix>.index".
std::string IndexFileName(std::string_view prefix);
// The step of "model.ckpt-<step>" or of any of its files' names; nullopt if
// `name` is not one of them.
std::optional<int64_t> CheckpointStepOfName(std::string_view name);

// One chunk of a ps's slice, as saved: its values and steps.
struct ChunkValues {
  int64_t begin = 0;  // [begin, end) of the flat trainable vector
  int64_t end = 0;
  int64_t step = 0;
  int64_t optimizer_step = 0;
  std::vector<float> params;              // end - begin
  std::vector<std::vector<float>> slots;  // one per slot name, end - begin each
  std::vector<float> state;               // non-trainable state it carries (chunk 0)
};

struct ShardValues {
  std::string model;
  int ps_index = 0;
  int num_ps = 1;
  int64_t global_step = 0;
  int64_t begin = 0;  // this ps's range
  int64_t end = 0;
  std::string optimizer;
  std::vector<std::string> slot_names;
  std::vector<ChunkValues> chunks;  // in flat order, tiling [begin, end)
};

// What was written: the index records it.
struct WrittenShard {
  std::string path;
  uint64_t size_bytes = 0;
  uint32_t crc32c = 0;  // of the whole file
};

// Writes `values` to `path` (temp file, fsync, rename). InvalidArgument if
// the chunks do not tile [begin, end) or a vector has the wrong size.
absl::StatusOr<WrittenShard> WriteCheckpointShard(Env* env, const std::string& path,
                                                  const ShardValues& values);

// Reads a shard file. With `expected` (from the index), the file's size and
// CRC must match it. DataLoss naming the file (and the record's offset) for a
// damaged or truncated file; NotFound if it is missing.
absl::StatusOr<ShardValues> ReadCheckpointShard(Env* env, const std::string& path,
                                                const CheckpointShardFile* expected = nullptr);

// The index file: one record.
absl::Status WriteCheckpointIndex(Env* env, const std::string& path, const CheckpointIndex& index);
absl::StatusOr<CheckpointIndex> ReadCheckpointIndex(Env* env, const std::string& path);

// TensorFlow's `checkpoint` file (text-format CheckpointState), paths
// relative to the job dir:
//   model_checkpoint_path: "model.ckpt-2000"
//   all_model_checkpoint_paths: "model.ckpt-1000"
//   all_model_checkpoint_paths: "model.ckpt-2000"
struct CheckpointState {
  std::string model_checkpoint_path;
  std::vector<std::string> all_model_checkpoint_paths;  // oldest first
};
std::string FormatCheckpointState(const CheckpointState& state);
// InvalidArgument naming `name` and the line for text that is not of that form.
absl::StatusOr<CheckpointState> ParseCheckpointState(std::string_view text,
                                                     const std::string& name);

// Steps of every index file in `dir`, newest first. An empty list for a
// missing directory.
absl::StatusOr<std::vector<int64_t>> ListCheckpointSteps(Env* env, const std::string& dir);

// Deletes the files of every checkpoint in `dir` older than `oldest_kept`,
// the index first (so a checkpoint half deleted is not taken for whole), and
// leftover temp files of checkpoints at or before `newest` and of the
// `checkpoint` file. Returns the
// steps deleted.
absl::StatusOr<std::vector<int64_t>> DeleteCheckpointsBefore(Env* env, const std::string& dir,
                                                             int64_t oldest_kept, int64_t newest);

// The completion marker: the chief writes <job_dir>/COMPLETED (with the
// final step and checkpoint) once the job reached its train_steps, or its
// input ended (`input_ended`: num_epochs; the marker says "ended: input"),
// so a restarted cluster does not train again.
std::string CompletionMarkerPath(const std::string& job_dir);
absl::Status WriteCompletionMarker(Env* env, const std::string& job_dir, int64_t global_step,
                                   const std::string& checkpoint, bool input_ended = false);
// The marker's contents, or nullopt if the job is not complete.
std::optional<std::string> ReadCompletionMarker(Env* env, const std::string& job_dir);
// The global step a marker records; nullopt if it names none.
std::optional<int64_t> CompletionMarkerStep(const std::string& marker);
// True, after logging "the job in DIR already finished (...); nothing to
// do ...", if `job_dir` holds the marker of a run that reached
// `train_steps` (TensorFlow's max_steps: a global target), or whose input
// ended (then train_steps does not matter: the data is done). A larger
// `train_steps` trains the job further from its last checkpoint (logged;
// the chief rewrites the marker at the new end). Every role checks this
// first and exits 0 when it is true.
bool JobAlreadyFinished(Env* env, const std::string& job_dir, int64_t train_steps);

// The values of any range of the flat vectors, assembled from a checkpoint's
// shard files however the ranges of the ps that wrote them were cut (so a
// checkpoint written by P ps restores on any other number of ps). Each shard
// file is read (and checked against the index's size and CRC) when a range
// first touches it.
class CheckpointReader {
 public:
  // Reads and checks the index at `index_path`; shard files are found beside it.
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> Open(Env* env,
                                                                const std::string& index_path);

  const CheckpointIndex& index() const { return index_; }

  // Copies [begin, end) of the parameters to params[end - begin] and of slot
  // k to slots[k][end - begin] (slots may have fewer entries than the
  // checkpoint, to skip them); returns the optimizer step of the chunk that
  // held `begin`.
  absl::StatusOr<int64_t> ReadRange(int64_t begin, int64_t end, float* params,
                                    const std::vector<float*>& slots);
  // The non-trainable state, num_state values.
  absl::Status ReadState(float* state);

 private:
  CheckpointReader(Env* env, std::string dir, CheckpointIndex index);
  absl::StatusOr<const ShardValues*> Shard(int i);

  Env* const env_;
  const std::string dir_;
  const CheckpointIndex index_;
  std::vector<std::unique_ptr<ShardValues>> shards_;  // loaded on demand
};

}  // namespace pstrain

#endif  // PSTRAIN_IO_CHECKPOINT_H_
