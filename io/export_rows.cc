// The rows of embedding tables as row files hold them: an export's
// embeddings.rows and a checkpoint's rows files (what pstrain-export reads)
// share one reader, which checks each file's size and CRC first.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/status_macros.h"
#include "io/checkpoint.h"
#include "io/export_format.h"
#include "io/export_format_internal.h"
#include "io/row_checkpoint.h"
#include "nlohmann/json.hpp"

namespace pstrain {

using export_format_internal::DataLoss;
using export_format_internal::kEmbeddings;
using export_format_internal::kManifest;

namespace {

// Reads `path` (a row file) after checking its size and CRC against
// `bytes` and `crc`, calling `fn` for each of its rows after `on_tables`.
absl::Status ReadCheckedRowFile(Env* env, const std::string& path, uint64_t bytes, uint32_t crc,
                                RowFileTablesVisitor on_tables, RowFileVisitor fn) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string data, env->ReadFile(path));
  if (data.size() != bytes) {
    return DataLoss(path, absl::StrCat("holds ", data.size(), " bytes; ", bytes, " were written"));
  }
  if (crc32c::Value(data.data(), data.size()) != crc) {
    return DataLoss(path, "checksum mismatch: the file is damaged or not the one written with it");
  }
  return ParseRowFile(data, path, on_tables, fn).status();
}

// Appends a row to `out` (one table's rows), refusing a bad id or value.
absl::Status TakeRow(const std::string& path, const std::string& table, int64_t dim, int64_t id,
                     absl::Span<const float> weights, TrainedTableRows* out) {
  if (id < 0)
    return DataLoss(path, absl::StrCat("table ", table, " has a row of negative id ", id));
  if (static_cast<int64_t>(weights.size()) != dim) {
    return DataLoss(path, absl::StrCat("table ", table, " has rows of ", weights.size(),
                                       " floats; the model's has ", dim));
  }
  for (float w : weights) {
    if (!std::isfinite(w)) {
      return DataLoss(path, absl::StrCat("table ", table, ", row ", id, " holds ", w));
    }
  }
  out->ids.push_back(id);
  out->weights.insert(out->weights.end(), weights.begin(), weights.end());
  return absl::OkStatus();
}

}  // namespace

namespace export_format_internal {

absl::Status ReadEmbeddings(Env* env, const std::string& dir, const nlohmann::json& tables,
                            const EmbeddingsFile& file, ExportedModel* e) {
  const std::string path = JoinPath(dir, kEmbeddings);
  struct Want {
    std::string name;
    int64_t dim = 0, rows = 0;
  };
  std::vector<Want> want;
  try {
    for (const nlohmann::json& t : tables) {
      want.push_back({t.at("name").get<std::string>(), t.at("dim").get<int64_t>(),
                      t.at("rows").get<int64_t>()});
    }
  } catch (const nlohmann::json::exception& ex) {
    return DataLoss(JoinPath(dir, kManifest), absl::StrCat("a table is malformed: ", ex.what()));
  }
  e->tables.assign(want.size(), {});
  for (const Want& w : want) {
    e->table_names.push_back(w.name);
    e->table_dims.push_back(w.dim);
  }
  auto on_tables = [&](const RowFileContents& contents) -> absl::Status {
    if (contents.tables.size() != want.size()) {
      return DataLoss(path, absl::StrCat("holds ", contents.tables.size(), " tables; ", kManifest,
                                         " lists ", want.size()));
    }
    for (size_t t = 0; t < want.size(); ++t) {
      const RowTableHeader& h = contents.tables[t];
      if (h.name != want[t].name || h.dim != want[t].dim || contents.rows[t] != want[t].rows) {
        return DataLoss(
            path, absl::StrCat("table ", t, " is ", h.name, " of dim ", h.dim, " with ",
                               contents.rows[t], " rows; ", kManifest, " lists ", want[t].name,
                               " of dim ", want[t].dim, " with ", want[t].rows));
      }
      e->tables[t].ids.reserve(want[t].rows);
      e->tables[t].weights.reserve(want[t].rows * want[t].dim);
    }
    return absl::OkStatus();
  };
  return ReadCheckedRowFile(env, path, file.bytes, file.crc, on_tables,
                            [&](int table, int64_t id, absl::Span<const float> weights,
                                absl::Span<const float>, int64_t, int64_t) {
                              return TakeRow(path, want[table].name, want[table].dim, id, weights,
                                             &e->tables[table]);
                            });
}

}  // namespace export_format_internal

absl::StatusOr<std::string> ResolveCheckpointIndex(Env* env, const std::string& path) {
  if (absl::EndsWith(path, ".index") && env->FileExists(path)) return path;
  if (env->FileExists(IndexFileName(path))) return IndexFileName(path);
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> steps, ListCheckpointSteps(env, path));
  if (!steps.empty()) return JoinPath(path, IndexFileName(CheckpointPrefix(steps.front())));
  return absl::NotFoundError(
      absl::StrCat("no checkpoint at ", path, ": looked for ", IndexFileName(path),
                   " and for model.ckpt-N.index files in it; give a job dir or a checkpoint "
                   "(job_dir/model.ckpt-2000)"));
}

absl::StatusOr<std::vector<TrainedTableRows>> ReadCheckpointRows(Env* env,
                                                                 const std::string& index_path,
                                                                 const CheckpointIndex& index,
                                                                 const Model& model) {
  const std::vector<SparseTableInfo>& infos = model.sparse_tables();
  std::vector<TrainedTableRows> tables(infos.size());
  const std::string dir = index_path.substr(0, index_path.find_last_of('/') + 1);
  int files = 0;
  for (const CheckpointShardFile& shard : index.shards()) {
    if (shard.rows_file().empty()) continue;
    ++files;
    const std::string path = dir + shard.rows_file();
    std::vector<int> to_model;  // the file's table index -> the model's
    auto on_tables = [&](const RowFileContents& contents) -> absl::Status {
      for (const RowTableHeader& h : contents.tables) {
        auto it = std::find_if(infos.begin(), infos.end(),
                               [&](const SparseTableInfo& i) { return i.name == h.name; });
        if (it == infos.end() || it->dim != h.dim) {
          return DataLoss(path, absl::StrCat("holds table ", h.name, " of dim ", h.dim, ", which ",
                                             model.name(), " does not have"));
        }
        to_model.push_back(static_cast<int>(it - infos.begin()));
      }
      return absl::OkStatus();
    };
    PSTRAIN_RETURN_IF_ERROR(ReadCheckedRowFile(
        env, path, shard.rows_size_bytes(), shard.rows_crc32c(), on_tables,
        [&](int table, int64_t id, absl::Span<const float> weights, absl::Span<const float>,
            int64_t, int64_t) {
          const int t = to_model[table];
          return TakeRow(path, infos[t].name, infos[t].dim, id, weights, &tables[t]);
        }));
  }
  if (files == 0) {
    return DataLoss(index_path, absl::StrCat("names no rows files, but ", model.name(), " has ",
                                             infos.size(), " embedding tables"));
  }
  return tables;
}

}  // namespace pstrain
