#include "ps/shard_checkpoint.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<ShardSaveResult> SaveShards(Env* env, const PsIdentity& ps,
                                           const std::vector<ParameterShard*>& shards,
                                           const std::string& prefix, int64_t global_step,
                                           int64_t at_step, absl::Duration wait) {
  if (shards.empty()) return absl::InvalidArgumentError("no shards to save");
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + wait;
  ShardValues values;
  values.model = ps.model;
  values.ps_index = ps.ps_index;
  values.num_ps = ps.num_ps;
  values.global_step = global_step;
  values.begin = shards.front()->options().begin;
  values.end = shards.back()->options().end;
  values.optimizer = std::string(OptimizerTypeName(shards.front()->options().optimizer.type));
  values.slot_names = shards.front()->slot_names();
  ShardSaveResult result;
  result.min_step = INT64_MAX;
  result.max_step = INT64_MIN;
  // Every shard is asked first, so each is copied the moment it reaches
  // at_step, however long the copies of the others take.
  for (ParameterShard* shard : shards) PSTRAIN_RETURN_IF_ERROR(shard->RequestSnapshot(at_step));
  for (ParameterShard* shard : shards) {
    PSTRAIN_ASSIGN_OR_RETURN(ShardSnapshot snap, shard->AwaitSnapshot(deadline));
    ChunkValues chunk;
    chunk.begin = shard->options().begin;
    chunk.end = shard->options().end;
    result.longest_copy = std::max(result.longest_copy, snap.copy_time);
    chunk.step = snap.step;
    chunk.optimizer_step = snap.optimizer_step;
    chunk.params = std::move(snap.params);
    chunk.slots = std::move(snap.slots);
    chunk.state = std::move(snap.state);
    result.num_state += static_cast<int64_t>(chunk.state.size());
    result.min_step = std::min(result.min_step, chunk.step);
    result.max_step = std::max(result.max_step, chunk.step);
    values.chunks.push_back(std::move(chunk));
  }
  const absl::Time copied = absl::Now();
  const std::string path = ShardFileName(prefix, ps.ps_index, ps.num_ps);
  PSTRAIN_ASSIGN_OR_RETURN(result.written, WriteCheckpointShard(env, path, values));
  result.begin = values.begin;
  result.end = values.end;
  result.optimizer = values.optimizer;
  result.slot_names = values.slot_names;
  result.snapshot_time = copied - start;
  result.write_time = absl::Now() - copied;
  return result;
}

absl::StatusOr<int64_t> RestoreShards(Env* env, const PsIdentity& ps,
                                      const std::vector<ParameterShard*>& shards,
                                      const std::string& index_path, int64_t generation) {
  if (shards.empty()) return absl::InvalidArgumentError("no shards to restore");
  absl::StatusOr<std::unique_ptr<CheckpointReader>> opened =
      CheckpointReader::Open(env, index_path);
  if (absl::IsNotFound(opened.status())) {
    // The chief found it: this ps sees another directory.
    return absl::FailedPreconditionError(
        absl::StrCat("ps ", ps.ps_index, " cannot read ", index_path,
                     ", which the chief wrote: every task must see the job dir at the same path "
                     "(one machine, or a shared filesystem)"));
  }
  PSTRAIN_RETURN_IF_ERROR(opened.status());
  std::unique_ptr<CheckpointReader> reader = *std::move(opened);
  const CheckpointIndex& index = reader->index();
  if (index.model() != ps.model || index.num_params() != ps.num_params) {
    return absl::InvalidArgumentError(
        absl::StrCat(index_path, " holds model ", index.model(), " with ", index.num_params(),
                     " parameters; this ps serves ", ps.model, " with ", ps.num_params));
  }
  const std::vector<std::string> slot_names = shards.front()->slot_names();
  const std::vector<std::string> saved(index.slot_names().begin(), index.slot_names().end());
  if (saved != slot_names) {
    return absl::InvalidArgumentError(absl::StrCat(
        index_path, " was saved with optimizer ", index.optimizer(), " (slots [",
        absl::StrJoin(saved, ", "), "]); this job's optimizer has slots [",
        absl::StrJoin(slot_names, ", "), "]: use the same optimizer, or a new job dir"));
  }
  // Read everything first, so a damaged file changes no shard.
  struct Loaded {
    std::vector<float> params, state;
    std::vector<std::vector<float>> slots;
    int64_t optimizer_step = 0;
  };
  std::vector<Loaded> loaded(shards.size());
  for (size_t i = 0; i < shards.size(); ++i) {
    const ShardOptions& o = shards[i]->options();
    Loaded& l = loaded[i];
    l.params.resize(o.end - o.begin);
    l.slots.assign(slot_names.size(), std::vector<float>(o.end - o.begin));
    std::vector<float*> slot_ptrs;
    for (auto& s : l.slots) slot_ptrs.push_back(s.data());
    PSTRAIN_ASSIGN_OR_RETURN(l.optimizer_step,
                             reader->ReadRange(o.begin, o.end, l.params.data(), slot_ptrs));
    if (o.num_state > 0) {
      if (o.num_state != index.num_state()) {
        return absl::InvalidArgumentError(absl::StrCat(index_path, " holds ", index.num_state(),
                                                       " state values; the model has ",
                                                       o.num_state));
      }
      l.state.resize(o.num_state);
      PSTRAIN_RETURN_IF_ERROR(reader->ReadState(l.state.data()));
    }
  }
  for (size_t i = 0; i < shards.size(); ++i) {
    std::vector<absl::Span<const float>> slots(loaded[i].slots.begin(), loaded[i].slots.end());
    PSTRAIN_RETURN_IF_ERROR(shards[i]->Initialize(loaded[i].params, loaded[i].state,
                                                  index.global_step(), slots,
                                                  loaded[i].optimizer_step, generation));
  }
  return index.global_step();
}

}  // namespace pstrain
