#include "ps/task_checkpoint.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "glog/logging.h"

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

absl::StatusOr<ShardSaved> TaskCheckpoint::Save(const std::string& path, int64_t step,
                                                int64_t global_step, absl::Duration wait) const {
  const std::string prefix = CheckpointPrefix(step);
  const int64_t trace_begin = TraceRecorder::NowMicros();
  absl::StatusOr<ShardSaveResult> r = SaveShards(env_, ps_, shards_, path, global_step, step, wait);
  if (TraceRecorder* trace = shards_[0]->options().trace; trace != nullptr) {
    trace->Complete("checkpoint", "save shard file", trace_begin, TraceRecorder::NowMicros(), step);
  }
  if (!r.ok()) {
    LOG(WARNING) << "ps " << ps_.ps_index << ": save to " << prefix << " failed: " << r.status();
    return r.status();
  }
  ShardSaved saved;
  const std::string& written = r->written.path;
  saved.file = written.substr(written.find_last_of('/') + 1);
  saved.begin = r->begin;
  saved.end = r->end;
  saved.num_state = r->num_state;
  saved.size_bytes = r->written.size_bytes;
  saved.crc32c = r->written.crc32c;
  saved.min_step = r->min_step;
  saved.max_step = r->max_step;
  saved.optimizer = r->optimizer;
  saved.slot_names = r->slot_names;
  saved.snapshot_time = r->snapshot_time;
  saved.write_time = r->write_time;
  saved.longest_copy = r->longest_copy;
  if (sparse_ != nullptr) {
    const std::string rows_path =
        JoinPath(ps_.job_dir, RowsFileName(prefix, ps_.ps_index, ps_.num_ps));
    absl::StatusOr<SparseShard::SavedRows> rows =
        sparse_->Save(env_, rows_path, step, global_step, wait, optimizer_);
    if (!rows.ok()) {
      LOG(WARNING) << "ps " << ps_.ps_index << ": saving the rows to " << rows_path
                   << " failed: " << rows.status();
      return rows.status();
    }
    saved.rows_file = rows_path.substr(rows_path.find_last_of('/') + 1);
    saved.rows_size_bytes = rows->file.size_bytes;
    saved.rows_crc32c = rows->file.crc32c;
    saved.table_rows = rows->file.rows;
    saved.table_sum_squares = rows->file.sum_squares;
    saved.rows_step = rows->step;
    int64_t total = 0;
    uint64_t checksum = 0;
    for (int64_t n : rows->file.rows) total += n;
    for (uint64_t c : rows->checksum) checksum += c;
    LOG(INFO) << "ps " << ps_.ps_index << " saved " << total << " embedding rows at step "
              << rows->step << " to " << saved.rows_file
              << absl::StrFormat(" (rows checksum %016x)", checksum);
  }
  return saved;
}

absl::StatusOr<int64_t> TaskCheckpoint::Restore(const std::string& index_path, int64_t generation,
                                                absl::FunctionRef<void()> rolled_back) const {
  // The rows answer UNAVAILABLE (clients retry) until they are restored too.
  if (sparse_ != nullptr) sparse_->BeginRestore();
  absl::StatusOr<int64_t> restored = RestoreShards(env_, ps_, shards_, index_path, generation);
  if (!restored.ok()) {
    if (sparse_ != nullptr) sparse_->CancelRestore();  // nothing was changed
    return restored.status();
  }
  LOG(INFO) << "ps " << ps_.ps_index << " restored from " << index_path << " at global step "
            << *restored;
  rolled_back();
  if (sparse_ != nullptr) {
    // On failure the rows stay unavailable until a restore or an
    // initialization brings them back.
    PSTRAIN_RETURN_IF_ERROR(RestoreRows(index_path, *restored));
  }
  return restored;
}

absl::Status TaskCheckpoint::RestoreRows(const std::string& index_path, int64_t step) const {
  PSTRAIN_ASSIGN_OR_RETURN(CheckpointIndex index, ReadCheckpointIndex(env_, index_path));
  if (index.tables_size() > 0 && index.table_optimizer() != optimizer_) {
    return absl::InvalidArgumentError(absl::StrCat(
        index_path, " holds embedding rows trained with ", index.table_optimizer(),
        ", but the job's embedding_optimizer is ", optimizer_, ": their slots differ; keep ",
        index.table_optimizer(), " or train in a new job dir"));
  }
  std::vector<SparseShard::RowsFile> files;
  for (const CheckpointShardFile& shard : index.shards()) {
    if (shard.rows_file().empty()) continue;
    files.push_back(
        {JoinPath(ps_.job_dir, shard.rows_file()), shard.rows_size_bytes(), shard.rows_crc32c()});
  }
  std::vector<SparseTableInfo> tables;
  for (const CheckpointTable& t : index.tables()) {
    SparseTableInfo info;
    info.name = t.name();
    info.dim = t.dim();
    info.buckets = t.buckets();
    tables.push_back(info);
  }
  PSTRAIN_ASSIGN_OR_RETURN(
      SparseShard::RestoredRows rows,
      sparse_->Restore(env_, files, tables, optimizer_, step, shards_.front()->generation()));
  uint64_t checksum = 0;
  for (uint64_t c : rows.checksum) checksum += c;
  LOG(INFO) << "ps " << ps_.ps_index << " restored " << rows.rows << " embedding rows of "
            << files.size() << " rows files" << absl::StrFormat(" (rows checksum %016x)", checksum);
  return absl::OkStatus();
}

}  // namespace pstrain
