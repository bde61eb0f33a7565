#include "io/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/committed_file.h"
#include "common/crc32c.h"
#include "common/record_reader.h"
#include "common/record_writer.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

constexpr absl::string_view kPrefix = "model.ckpt-";

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string_view FloatBytes(const std::vector<float>& v) {
  return std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// Appends records to a file, keeping the size and CRC of everything written.
// Frames each record into a CommittedFile (large records without a copy).
absl::Status WriteRecord(CommittedFile* file, std::string_view data) {
  PSTRAIN_RETURN_IF_ERROR(file->Append(RecordWriter::Header(data)));
  PSTRAIN_RETURN_IF_ERROR(file->Append(data));
  return file->Append(RecordWriter::Footer(data));
}

absl::Status DataLoss(const std::string& path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(path, ": ", what));
}

// The next record as `count` floats.
absl::Status ReadFloats(RecordReader& reader, const std::string& path, int64_t count,
                        absl::string_view what, std::vector<float>* out) {
  const uint64_t offset = reader.offset();
  absl::StatusOr<std::string_view> record = reader.ReadRecord();
  if (absl::IsOutOfRange(record.status())) {
    return DataLoss(path, absl::StrCat("ends at offset ", offset, " before the ", what));
  }
  PSTRAIN_RETURN_IF_ERROR(record.status());
  if (record->size() != static_cast<uint64_t>(count) * sizeof(float)) {
    return DataLoss(path, absl::StrCat("the ", what, " at offset ", offset, " has ", record->size(),
                                       " bytes, expected ", count * 4));
  }
  out->resize(count);
  if (count > 0) std::memcpy(out->data(), record->data(), record->size());
  return absl::OkStatus();
}

}  // namespace

std::string CheckpointPrefix(int64_t step) { return absl::StrCat(kPrefix, step); }

std::string ShardFileName(std::string_view prefix, int ps, int num_ps) {
  return absl::StrCat(Sv(prefix), ".shard-", ps, "-of-", num_ps);
}

std::string RowsFileName(std::string_view prefix, int ps, int num_ps) {
  return absl::StrCat(Sv(prefix), ".rows-", ps, "-of-", num_ps);
}

std::string IndexFileName(std::string_view prefix) { return absl::StrCat(Sv(prefix), ".index"); }

std::optional<int64_t> CheckpointStepOfName(std::string_view full_name) {
  absl::string_view name = Sv(full_name);
  if (!absl::ConsumePrefix(&name, kPrefix)) return std::nullopt;
  const size_t dot = name.find('.');
  int64_t step = 0;
  if (!absl::SimpleAtoi(name.substr(0, dot), &step) || step < 0) return std::nullopt;
  if (name.substr(0, dot) != absl::StrCat(step)) return std::nullopt;  // "+5", "007"
  return step;
}

absl::StatusOr<WrittenShard> WriteCheckpointShard(Env* env, const std::string& path,
                                                  const ShardValues& values) {
  CheckpointShardHeader header;
  header.set_model(values.model);
  header.set_ps_index(values.ps_index);
  header.set_num_ps(values.num_ps);
  header.set_global_step(values.global_step);
  header.set_begin(values.begin);
  header.set_end(values.end);
  header.set_optimizer(values.optimizer);
  for (const std::string& name : values.slot_names) header.add_slot_names(name);
  int64_t at = values.begin;
  for (const ChunkValues& c : values.chunks) {
    const size_t n = static_cast<size_t>(c.end - c.begin);
    if (c.begin != at || c.end < c.begin || c.params.size() != n ||
        c.slots.size() != values.slot_names.size() ||
        std::any_of(c.slots.begin(), c.slots.end(), [n](auto& s) { return s.size() != n; })) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint chunk [", c.begin, ", ", c.end, ") of ", path, " is malformed"));
    }
    at = c.end;
    CheckpointChunk* chunk = header.add_chunks();
    chunk->set_begin(c.begin);
    chunk->set_end(c.end);
    chunk->set_step(c.step);
    chunk->set_optimizer_step(c.optimizer_step);
    chunk->set_num_state(static_cast<int64_t>(c.state.size()));
  }
  if (at != values.end) {
    return absl::InvalidArgumentError(
        absl::StrCat("the chunks of ", path, " end at ", at, ", not at ", values.end));
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<CommittedFile> out, CommittedFile::Create(env, path));
  PSTRAIN_RETURN_IF_ERROR(WriteRecord(out.get(), header.SerializeAsString()));
  for (const ChunkValues& c : values.chunks) {
    PSTRAIN_RETURN_IF_ERROR(WriteRecord(out.get(), FloatBytes(c.params)));
    for (const auto& slot : c.slots)
      PSTRAIN_RETURN_IF_ERROR(WriteRecord(out.get(), FloatBytes(slot)));
    if (!c.state.empty()) PSTRAIN_RETURN_IF_ERROR(WriteRecord(out.get(), FloatBytes(c.state)));
  }
  PSTRAIN_RETURN_IF_ERROR(out->Commit());
  WrittenShard written;
  written.path = path;
  written.size_bytes = out->size();
  written.crc32c = out->crc32c();
  return written;
}

absl::StatusOr<ShardValues> ReadCheckpointShard(Env* env, const std::string& path,
                                                const CheckpointShardFile* expected) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::string contents, env->ReadFile(path));
  if (expected != nullptr) {
    if (contents.size() != expected->size_bytes()) {
      return DataLoss(path, absl::StrCat("has ", contents.size(), " bytes; the index says ",
                                         expected->size_bytes(), " (truncated or replaced?)"));
    }
    const uint32_t crc = crc32c::Value(contents.data(), contents.size());
    if (crc != expected->crc32c()) {
      return DataLoss(path, absl::StrCat("CRC32C ", crc, " does not match the index's ",
                                         expected->crc32c(), " (damaged or replaced)"));
    }
  }
  RecordReader reader(contents, path);
  absl::StatusOr<std::string_view> record = reader.ReadRecord();
  if (absl::IsOutOfRange(record.status())) return DataLoss(path, "is empty");
  PSTRAIN_RETURN_IF_ERROR(record.status());
  CheckpointShardHeader header;
  if (!header.ParseFromArray(record->data(), static_cast<int>(record->size()))) {
    return DataLoss(path, "the header record is not a CheckpointShardHeader");
  }
  ShardValues values;
  values.model = header.model();
  values.ps_index = header.ps_index();
  values.num_ps = header.num_ps();
  values.global_step = header.global_step();
  values.begin = header.begin();
  values.end = header.end();
  values.optimizer = header.optimizer();
  values.slot_names.assign(header.slot_names().begin(), header.slot_names().end());
  int64_t at = header.begin();
  for (const CheckpointChunk& chunk : header.chunks()) {
    if (chunk.begin() != at || chunk.end() < chunk.begin() || chunk.num_state() < 0 ||
        chunk.end() > header.end()) {
      return DataLoss(
          path, absl::StrCat("chunk [", chunk.begin(), ", ", chunk.end(), ") does not follow ", at,
                             " in [", header.begin(), ", ", header.end(), ")"));
    }
    at = chunk.end();
    ChunkValues c;
    c.begin = chunk.begin();
    c.end = chunk.end();
    c.step = chunk.step();
    c.optimizer_step = chunk.optimizer_step();
    const int64_t n = c.end - c.begin;
    PSTRAIN_RETURN_IF_ERROR(
        ReadFloats(reader, path, n,
                   absl::StrCat("parameters of chunk [", c.begin, ", ", c.end, ")"), &c.params));
    c.slots.resize(values.slot_names.size());
    for (size_t k = 0; k < c.slots.size(); ++k) {
      PSTRAIN_RETURN_IF_ERROR(ReadFloats(
          reader, path, n,
          absl::StrCat("slot ", values.slot_names[k], " of chunk [", c.begin, ", ", c.end, ")"),
          &c.slots[k]));
    }
    if (chunk.num_state() > 0) {
      PSTRAIN_RETURN_IF_ERROR(ReadFloats(reader, path, chunk.num_state(), "state", &c.state));
    }
    values.chunks.push_back(std::move(c));
  }
  if (at != header.end()) {
    return DataLoss(path, absl::StrCat("chunks end at ", at, ", not at ", header.end()));
  }
  const uint64_t offset = reader.offset();
  if (absl::StatusOr<std::string_view> extra = reader.ReadRecord();
      !absl::IsOutOfRange(extra.status())) {
    if (!extra.ok()) return extra.status();
    return DataLoss(path, absl::StrCat("unexpected record at offset ", offset));
  }
  return values;
}

absl::Status WriteCheckpointIndex(Env* env, const std::string& path, const CheckpointIndex& index) {
  return env->WriteFileAtomic(path, RecordWriter::Frame(index.SerializeAsString()));
}

absl::StatusOr<CheckpointIndex> ReadCheckpointIndex(Env* env, const std::string& path) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::string contents, env->ReadFile(path));
  RecordReader reader(contents, path);
  absl::StatusOr<std::string_view> record = reader.ReadRecord();
  if (absl::IsOutOfRange(record.status())) return DataLoss(path, "is empty");
  PSTRAIN_RETURN_IF_ERROR(record.status());
  CheckpointIndex index;
  if (!index.ParseFromArray(record->data(), static_cast<int>(record->size()))) {
    return DataLoss(path, "is not a checkpoint index");
  }
  if (!absl::IsOutOfRange(reader.ReadRecord().status())) {
    return DataLoss(path, "has more than one record");
  }
  // The shard ranges must tile the parameters, or nothing can be restored.
  int64_t at = 0;
  for (const CheckpointShardFile& shard : index.shards()) {
    if (shard.begin() != at || shard.end() < shard.begin() || shard.file().empty() ||
        shard.file().find('/') != std::string::npos) {
      return DataLoss(path, absl::StrCat("shard entry \"", shard.file(), "\" [", shard.begin(),
                                         ", ", shard.end(), ") is malformed"));
    }
    at = shard.end();
  }
  if (index.shards().empty() || at != index.num_params() || index.num_state() < 0) {
    return DataLoss(path, "its shards do not cover the parameters");
  }
  return index;
}

std::string FormatCheckpointState(const CheckpointState& state) {
  std::string out = absl::StrCat("model_checkpoint_path: \"", state.model_checkpoint_path, "\"\n");
  for (const std::string& path : state.all_model_checkpoint_paths) {
    absl::StrAppend(&out, "all_model_checkpoint_paths: \"", path, "\"\n");
  }
  return out;
}

absl::StatusOr<CheckpointState> ParseCheckpointState(std::string_view text,
                                                     const std::string& name) {
  CheckpointState state;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(Sv(text), '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    absl::string_view value = line;
    std::string* target = nullptr;
    std::string path;
    if (absl::ConsumePrefix(&value, "model_checkpoint_path:")) {
      target = &state.model_checkpoint_path;
    } else if (absl::ConsumePrefix(&value, "all_model_checkpoint_paths:")) {
      target = &path;
    } else if (absl::StartsWith(line, "all_model_checkpoint_timestamps:") ||
               absl::StartsWith(line, "last_preserved_timestamp:")) {
      continue;  // Written by TensorFlow 2.x; not needed here.
    }
    value = absl::StripAsciiWhitespace(value);
    if (target == nullptr || value.size() < 2 || value.front() != '"' || value.back() != '"') {
      return absl::InvalidArgumentError(absl::StrCat(name, ":", line_number,
                                                     ": expected model_checkpoint_path: \"...\" or "
                                                     "all_model_checkpoint_paths: \"...\", got \"",
                                                     line, "\""));
    }
    *target = std::string(value.substr(1, value.size() - 2));
    if (target == &path) state.all_model_checkpoint_paths.push_back(path);
  }
  return state;
}

absl::StatusOr<std::vector<int64_t>> ListCheckpointSteps(Env* env, const std::string& dir) {
  if (!env->FileExists(dir)) return std::vector<int64_t>{};
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  std::vector<int64_t> steps;
  for (const std::string& name : names) {
    std::optional<int64_t> step = CheckpointStepOfName(name);
    if (step && name == IndexFileName(CheckpointPrefix(*step))) steps.push_back(*step);
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

absl::StatusOr<std::vector<int64_t>> DeleteCheckpointsBefore(Env* env, const std::string& dir,
                                                             int64_t oldest_kept, int64_t newest) {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  // Index files sort before shard files of the same checkpoint this way.
  std::map<int64_t, std::vector<std::string>> doomed;
  for (const std::string& name : names) {
    // A temp file of an AtomicWritableFile, or of the writers before it
    // ("<name>.tmp.<pid>").
    const std::optional<std::string> committed = CommittedNameOfTemp(name);
    const std::string& final_name = committed ? *committed : name;
    // A `checkpoint` file never renamed.
    if (committed ? *committed == "checkpoint" : name.rfind("checkpoint.tmp.", 0) == 0) {
      absl::Status s = env->DeleteFile(JoinPath(dir, name));
      if (!s.ok() && !absl::IsNotFound(s)) return s;
      continue;
    }
    std::optional<int64_t> step = CheckpointStepOfName(final_name);
    if (!step) continue;
    const bool temp = committed.has_value() || name.find(".tmp") != std::string::npos;
    if (*step < oldest_kept || (temp && *step <= newest)) doomed[*step].push_back(name);
  }
  std::vector<int64_t> deleted;
  for (auto& [step, files] : doomed) {
    std::stable_partition(files.begin(), files.end(), [](const std::string& f) {
      return f.size() >= 6 && f.compare(f.size() - 6, 6, ".index") == 0;
    });
    for (const std::string& f : files) {
      absl::Status s = env->DeleteFile(JoinPath(dir, f));
      if (!s.ok() && !absl::IsNotFound(s)) return s;
    }
    if (step < oldest_kept) deleted.push_back(step);
  }
  return deleted;
}

std::string CompletionMarkerPath(const std::string& job_dir) {
  return JoinPath(job_dir, "COMPLETED");
}

absl::Status WriteCompletionMarker(Env* env, const std::string& job_dir, int64_t global_step,
                                   const std::string& checkpoint, bool input_ended) {
  return env->WriteFileAtomic(CompletionMarkerPath(job_dir),
                              absl::StrCat("global_step: ", global_step, "\ncheckpoint: ",
                                           checkpoint, "\n", input_ended ? "ended: input\n" : ""));
}

std::optional<std::string> ReadCompletionMarker(Env* env, const std::string& job_dir) {
  absl::StatusOr<std::string> contents = env->ReadFile(CompletionMarkerPath(job_dir));
  if (!contents.ok()) return std::nullopt;
  return *contents;
}

std::optional<int64_t> CompletionMarkerStep(const std::string& marker) {
  for (absl::string_view line : absl::StrSplit(marker, '\n')) {
    int64_t step = 0;
    if (absl::ConsumePrefix(&line, "global_step:") &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &step)) {
      return step;
    }
  }
  return std::nullopt;
}

bool JobAlreadyFinished(Env* env, const std::string& job_dir, int64_t train_steps) {
  std::optional<std::string> marker = ReadCompletionMarker(env, job_dir);
  if (!marker.has_value()) return false;
  const std::optional<int64_t> step = CompletionMarkerStep(*marker);
  const bool input_ended = absl::StrContains(*marker, "\nended: input");
  if (step.has_value() && train_steps > *step && !input_ended) {
    LOG(INFO) << "the job in " << job_dir << " finished at global step " << *step
              << "; training on from its last checkpoint to train_steps " << train_steps;
    return false;
  }
  LOG(INFO) << "the job in " << job_dir << " already finished ("
            << absl::StrReplaceAll(absl::StripTrailingAsciiWhitespace(*marker), {{"\n", ", "}})
            << "); nothing to do. To train again, use a new --job_dir or delete "
            << CompletionMarkerPath(job_dir);
  return true;
}

CheckpointReader::CheckpointReader(Env* env, std::string dir, CheckpointIndex index)
    : env_(env), dir_(std::move(dir)), index_(std::move(index)) {
  shards_.resize(index_.shards_size());
}

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(
    Env* env, const std::string& index_path) {
  PSTRAIN_ASSIGN_OR_RETURN(CheckpointIndex index, ReadCheckpointIndex(env, index_path));
  const size_t slash = index_path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0               ? "/"
                                               : index_path.substr(0, slash);
  return std::unique_ptr<CheckpointReader>(
      new CheckpointReader(env, std::move(dir), std::move(index)));
}

absl::StatusOr<const ShardValues*> CheckpointReader::Shard(int i) {
  if (shards_[i] == nullptr) {
    const CheckpointShardFile& entry = index_.shards(i);
    const std::string path = JoinPath(dir_, entry.file());
    PSTRAIN_ASSIGN_OR_RETURN(ShardValues values, ReadCheckpointShard(env_, path, &entry));
    if (values.begin != entry.begin() || values.end != entry.end() ||
        values.model != index_.model() ||
        !std::equal(values.slot_names.begin(), values.slot_names.end(), index_.slot_names().begin(),
                    index_.slot_names().end())) {
      return DataLoss(path, "does not match the checkpoint's index");
    }
    shards_[i] = std::make_unique<ShardValues>(std::move(values));
  }
  return shards_[i].get();
}

absl::StatusOr<int64_t> CheckpointReader::ReadRange(int64_t begin, int64_t end, float* params,
                                                    const std::vector<float*>& slots) {
  if (begin < 0 || end < begin || end > index_.num_params() ||
      slots.size() > static_cast<size_t>(index_.slot_names_size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "range [", begin, ", ", end, ") with ", slots.size(), " slots is outside the checkpoint"));
  }
  int64_t optimizer_step = 0;
  for (int i = 0; i < index_.shards_size(); ++i) {
    const CheckpointShardFile& entry = index_.shards(i);
    if (entry.end() <= begin || entry.begin() >= end) continue;
    PSTRAIN_ASSIGN_OR_RETURN(const ShardValues* shard, Shard(i));
    for (const ChunkValues& c : shard->chunks) {
      const int64_t lo = std::max(begin, c.begin), hi = std::min(end, c.end);
      if (c.begin <= begin && begin < c.end) optimizer_step = c.optimizer_step;
      if (lo >= hi) continue;
      const size_t bytes = static_cast<size_t>(hi - lo) * sizeof(float);
      std::memcpy(params + (lo - begin), c.params.data() + (lo - c.begin), bytes);
      for (size_t k = 0; k < slots.size(); ++k) {
        std::memcpy(slots[k] + (lo - begin), c.slots[k].data() + (lo - c.begin), bytes);
      }
    }
  }
  return optimizer_step;
}

absl::Status CheckpointReader::ReadState(float* state) {
  const int64_t n = index_.num_state();
  if (n == 0) return absl::OkStatus();
  PSTRAIN_ASSIGN_OR_RETURN(const ShardValues* shard, Shard(0));
  for (const ChunkValues& c : shard->chunks) {
    if (static_cast<int64_t>(c.state.size()) == n) {
      std::copy(c.state.begin(), c.state.end(), state);
      return absl::OkStatus();
    }
  }
  return DataLoss(JoinPath(dir_, index_.shards(0).file()),
                  absl::StrCat("holds no ", n, " state values"));
}

}  // namespace pstrain
