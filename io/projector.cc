#include "io/projector.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/status_macros.h"
#include "google/protobuf/text_format.h"
#include "io/checkpoint.h"
#include "io/row_checkpoint.h"
#include "proto/checkpoint.pb.h"
#include "proto/projector_config.pb.h"

namespace pstrain {
namespace {

// The `limit` rows of a table with the most pushes (ties: the smaller id),
// kept as rows stream by: a heap whose top is the worst row kept, and a pool
// of their weights.
class TopRows {
 public:
  TopRows(int64_t limit, int64_t dim) : limit_(limit), dim_(dim) {}

  void Offer(int64_t id, int64_t pushes, absl::Span<const float> weights) {
    ++seen_;
    if (limit_ == 0) return;
    const Entry entry{pushes, id, 0};
    int64_t slot;
    if (static_cast<int64_t>(heap_.size()) < limit_) {
      slot = static_cast<int64_t>(heap_.size());
      pool_.resize((slot + 1) * dim_);
    } else if (Better(entry, heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), Better);
      slot = heap_.back().slot;
      heap_.pop_back();
    } else {
      return;
    }
    std::memcpy(&pool_[slot * dim_], weights.data(), dim_ * sizeof(float));
    heap_.push_back({pushes, id, slot});
    std::push_heap(heap_.begin(), heap_.end(), Better);
  }

  struct Row {
    int64_t id;
    int64_t pushes;
    const float* weights;
  };
  // Best first.
  std::vector<Row> Sorted() const {
    std::vector<Entry> entries = heap_;
    std::sort(entries.begin(), entries.end(), Better);
    std::vector<Row> rows;
    for (const Entry& e : entries) rows.push_back({e.id, e.pushes, &pool_[e.slot * dim_]});
    return rows;
  }

  int64_t seen() const { return seen_; }

 private:
  struct Entry {
    int64_t pushes;
    int64_t id;
    int64_t slot;
  };
  // a ranks before b. As the heap's order it puts the worst row on top.
  static bool Better(const Entry& a, const Entry& b) {
    return a.pushes != b.pushes ? a.pushes > b.pushes : a.id < b.id;
  }

  const int64_t limit_;
  const int64_t dim_;
  int64_t seen_ = 0;
  std::vector<Entry> heap_;
  std::vector<float> pool_;
};

std::string FileNameOf(const std::string& table) {
  std::string name = table;
  for (char& c : name) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    if (!keep) c = '_';
  }
  return name;
}

// A raw value as one TSV field: tabs and line breaks would split it.
std::string TsvField(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

// Deletes the files of run_dir/projector/<step> for every step but `keep`.
void DeleteOtherSets(Env* env, const std::string& base, const std::string& keep) {
  absl::StatusOr<std::vector<std::string>> steps = env->ListDir(base);
  if (!steps.ok()) return;
  for (const std::string& step : *steps) {
    int64_t unused;
    if (step == keep || !absl::SimpleAtoi(step, &unused)) continue;
    const std::string dir = JoinPath(base, step);
    absl::StatusOr<std::vector<std::string>> files = env->ListDir(dir);
    if (!files.ok()) continue;
    for (const std::string& file : *files) env->DeleteFile(JoinPath(dir, file)).IgnoreError();
    env->DeleteDir(dir).IgnoreError();
  }
}

}  // namespace

absl::StatusOr<ProjectorSummary> WriteProjector(Env* env, const std::string& index_path,
                                                const std::string& run_dir,
                                                const ProjectorOptions& options) {
  if (options.rows < 0 || options.rows > kMaxProjectorRows) {
    return absl::InvalidArgumentError(absl::StrCat("projector_rows must be in [0, ",
                                                   kMaxProjectorRows, "] (0: no projector), got ",
                                                   options.rows));
  }
  ProjectorSummary summary;
  if (options.rows == 0) return summary;
  PSTRAIN_ASSIGN_OR_RETURN(const CheckpointIndex index, ReadCheckpointIndex(env, index_path));
  summary.global_step = index.global_step();
  if (index.tables_size() == 0) return summary;

  std::vector<TopRows> top;
  for (const CheckpointTable& t : index.tables()) top.emplace_back(options.rows, t.dim());
  const std::string dir = DirName(index_path);
  for (const CheckpointShardFile& shard : index.shards()) {
    if (shard.rows_file().empty()) continue;
    const std::string path = JoinPath(dir, shard.rows_file());
    PSTRAIN_ASSIGN_OR_RETURN(const std::string bytes, env->ReadFile(path));
    if (bytes.size() != shard.rows_size_bytes() ||
        crc32c::Value(bytes.data(), bytes.size()) != shard.rows_crc32c()) {
      return absl::DataLossError(
          absl::StrCat(path, ": size or CRC differs from the checkpoint's index"));
    }
    // The file's table i is the index's table of[i] (-1: not in the index).
    std::vector<int> of;
    auto on_tables = [&](const RowFileContents& contents) -> absl::Status {
      for (const RowTableHeader& header : contents.tables) {
        int found = -1;
        for (int t = 0; t < index.tables_size(); ++t) {
          if (index.tables(t).name() == header.name) found = t;
        }
        if (found >= 0 && index.tables(found).dim() != header.dim) {
          return absl::DataLossError(absl::StrCat(path, ": table ", header.name, " has dim ",
                                                  header.dim, ", the index says ",
                                                  index.tables(found).dim()));
        }
        of.push_back(found);
      }
      return absl::OkStatus();
    };
    PSTRAIN_RETURN_IF_ERROR(ParseRowFile(bytes, path, on_tables,
                                         [&](int table, int64_t id, absl::Span<const float> weights,
                                             absl::Span<const float>, int64_t, int64_t pushes) {
                                           if (of[table] >= 0)
                                             top[of[table]].Offer(id, pushes, weights);
                                           return absl::OkStatus();
                                         })
                                .status());
  }

  std::vector<std::vector<TopRows::Row>> chosen;
  std::vector<RowsToName> names;
  for (int t = 0; t < index.tables_size(); ++t) {
    chosen.push_back(top[t].Sorted());
    RowsToName n;
    n.table = index.tables(t).name();
    n.feature = index.tables(t).feature();
    for (const TopRows::Row& row : chosen.back()) n.ids.push_back(row.id);
    names.push_back(std::move(n));
  }
  if (options.name_rows) options.name_rows(&names);

  const std::string step_dir = absl::StrCat(summary.global_step);
  const std::string base = JoinPath(run_dir, kProjectorDir);
  PSTRAIN_RETURN_IF_ERROR(env->CreateDirs(JoinPath(base, step_dir)));
  tensorboard::ProjectorConfig config;
  for (int t = 0; t < index.tables_size(); ++t) {
    const CheckpointTable& info = index.tables(t);
    const std::vector<TopRows::Row>& rows = chosen[t];
    if (rows.empty()) continue;
    const std::vector<std::string>& texts = names[t].texts;
    const bool named = texts.size() == rows.size();
    ProjectorTable table;
    table.name = info.name();
    table.rows_in_checkpoint = top[t].seen();
    table.rows = static_cast<int64_t>(rows.size());
    table.dim = info.dim();
    table.max_pushes = rows.front().pushes;
    table.min_pushes = rows.back().pushes;
    const std::string file = FileNameOf(info.name());
    table.tensor_path = JoinPath(JoinPath(kProjectorDir, step_dir), file + ".tsv");
    table.metadata_path = JoinPath(JoinPath(kProjectorDir, step_dir), file + ".metadata.tsv");

    std::string tensor, metadata = "id\tvalue\tpushes\n";
    for (size_t r = 0; r < rows.size(); ++r) {
      for (int64_t d = 0; d < info.dim(); ++d) {
        absl::StrAppend(&tensor, d == 0 ? "" : "\t", rows[r].weights[d]);
      }
      tensor += '\n';
      const std::string text = named ? TsvField(texts[r]) : "";
      if (!text.empty()) ++table.named;
      absl::StrAppend(&metadata, rows[r].id, "\t", text, "\t", rows[r].pushes, "\n");
    }
    PSTRAIN_RETURN_IF_ERROR(env->WriteFileAtomic(JoinPath(run_dir, table.tensor_path), tensor));
    PSTRAIN_RETURN_IF_ERROR(env->WriteFileAtomic(JoinPath(run_dir, table.metadata_path), metadata));
    summary.bytes += tensor.size() + metadata.size();

    tensorboard::EmbeddingInfo* entry = config.add_embeddings();
    entry->set_tensor_name(info.name());
    entry->set_tensor_path(table.tensor_path);
    entry->set_metadata_path(table.metadata_path);
    entry->add_tensor_shape(static_cast<uint32_t>(table.rows));
    entry->add_tensor_shape(static_cast<uint32_t>(table.dim));
    summary.tables.push_back(std::move(table));
  }
  if (summary.tables.empty()) {
    env->DeleteDir(JoinPath(base, step_dir)).IgnoreError();
    return summary;
  }
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(config, &text)) {
    return absl::InternalError("cannot print the projector's config");
  }
  PSTRAIN_RETURN_IF_ERROR(env->WriteFileAtomic(JoinPath(run_dir, kProjectorConfigFile), text));
  summary.bytes += text.size();
  DeleteOtherSets(env, base, step_dir);
  return summary;
}

}  // namespace pstrain
