#include "io/export_format.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/crc32c.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "io/checkpoint.h"
#include "io/row_checkpoint.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

constexpr char kManifest[] = "model.json";
constexpr char kVariables[] = "variables.bin";
constexpr char kOnnx[] = "model.onnx";
constexpr char kEmbeddings[] = "embeddings.rows";
constexpr char kFormat[] = "pstrain-export";
// 2: a click model's embeddings.rows and tables; 3: a delta of a click
// model (delta_of). Exports without tables are still written as 1, full
// click models as 2, which every earlier reader takes.
constexpr int kFormatVersion = 3;
// Bounds a chain of deltas read back to its full version.
constexpr int kMaxDeltaChain = 100000;
constexpr char kNoOptimizer[] = "none";  // the export's rows carry no slots

bool AllDigits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isdigit(c); });
}

absl::Status DataLoss(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrCat(path, ": ", what));
}

// What embeddings.rows holds, for the manifest.
struct EmbeddingsFile {
  uint64_t bytes = 0;
  uint32_t crc = 0;
  std::vector<int64_t> rows;  // per table
};

nlohmann::json Manifest(const Model& model, const ModelOptions& options, int64_t global_step,
                        int64_t version, const std::string& hparams_yaml, uint64_t bytes,
                        uint32_t crc, const EmbeddingsFile* embeddings, int64_t delta_of) {
  nlohmann::json variables = nlohmann::json::array();
  for (const VariableInfo& v : model.variables()) {
    variables.push_back({{"name", v.name},
                         {"shape", v.shape},
                         {"trainable", v.trainable},
                         {"offset", v.offset},
                         {"size", v.size}});
  }
  nlohmann::json m = {
      {"format", kFormat},
      {"format_version", embeddings == nullptr ? 1
                         : delta_of > 0        ? 3
                                               : 2},
      {"model", model.name()},
      {"model_spec", model.spec_yaml()},
      {"model_options",
       {{"dropout_rate", options.dropout_rate},
        {"num_layers", options.num_layers},
        {"batch_norm_epsilon", options.batch_norm_epsilon}}},
      {"global_step", global_step},
      {"version", version},
      {"input",
       {{"name", "image"},
        {"shape", model.input_shape()},
        {"dtype", "float32"},
        {"range", {0.0, 1.0}},
        {"scaling", "pixel / 255"},
        {"per_image_standardization", model.input_preprocessing().per_image_standardization}}},
      {"num_classes", model.num_classes()},
      {"outputs",
       {{"classes", "int64: the arg-max class"},
        {"probabilities", "float32 [num_classes]: softmax of the logits"}}},
      {"num_params", model.num_params()},
      {"num_state", model.num_state()},
      {"variables", variables},
      {"variables_file", kVariables},
      {"variables_bytes", bytes},
      {"variables_crc32c", crc},
      {"hparams_yaml", hparams_yaml}};
  if (model.head() == Head::kBinary) {
    m["outputs"] = {{"classes", "int64: 1 when logistic > 0.5, else 0"},
                    {"probabilities", "float32 [2]: 1 - logistic, logistic"},
                    {"logistic", "float32 [1]: the sigmoid of the logit"}};
  }
  if (embeddings != nullptr) {
    m["input"] = {{"name", "dense"},
                  {"shape", model.input_shape()},
                  {"dtype", "float32"},
                  {"per_image_standardization", false},
                  {"sparse_features", model.sparse_features()}};
    nlohmann::json tables = nlohmann::json::array();
    for (size_t t = 0; t < model.sparse_tables().size(); ++t) {
      const SparseTableInfo& info = model.sparse_tables()[t];
      nlohmann::json table = {{"name", info.name},
                              {"feature", model.sparse_features()[info.feature]},
                              {"dim", info.dim},
                              {"buckets", info.buckets},
                              {"rows", embeddings->rows[t]}};
      if (!info.shared_features.empty()) {
        // A shared table (embedding's table:): the features besides `feature` that read it.
        nlohmann::json shared = nlohmann::json::array();
        for (int f : info.shared_features) shared.push_back(model.sparse_features()[f]);
        table["shared_by"] = shared;
      }
      if (!info.cross.empty()) {
        // A crossed table (linear's crosses): the features it crosses.
        table.erase("feature");
        nlohmann::json crossed = nlohmann::json::array();
        for (int f : info.cross) crossed.push_back(model.sparse_features()[f]);
        table["cross"] = crossed;
      }
      tables.push_back(table);
    }
    m["tables"] = tables;
    m["embeddings_file"] = kEmbeddings;
    m["embeddings_bytes"] = embeddings->bytes;
    m["embeddings_crc32c"] = embeddings->crc;
    if (delta_of > 0) m["delta_of"] = delta_of;
  }
  return m;
}

// The manifest's fields, checked; InvalidArgument/DataLoss naming `path`.
absl::Status ParseManifest(const std::string& path, const std::string& text, ExportedModel* out,
                           uint64_t* bytes, uint32_t* crc, nlohmann::json* tables,
                           EmbeddingsFile* embeddings) {
  nlohmann::json m = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (m.is_discarded() || !m.is_object()) return DataLoss(path, "is not a JSON object");
  try {
    if (m.value("format", "") != kFormat) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": not a pstrain export (format is not \"", kFormat, "\")"));
    }
    if (m.at("format_version").get<int>() > kFormatVersion) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": export format version ", m.at("format_version").get<int>(),
                       " is newer than this pstrain reads (", kFormatVersion, ")"));
    }
    out->model = m.at("model").get<std::string>();
    out->model_spec = m.value("model_spec", "");
    const nlohmann::json& o = m.at("model_options");
    out->options.dropout_rate = o.at("dropout_rate").get<float>();
    out->options.num_layers = o.at("num_layers").get<int>();
    out->options.batch_norm_epsilon = o.at("batch_norm_epsilon").get<float>();
    out->global_step = m.at("global_step").get<int64_t>();
    out->version = m.at("version").get<int64_t>();
    out->input_shape = m.at("input").at("shape").get<std::vector<int64_t>>();
    out->per_image_standardization = m.at("input").at("per_image_standardization").get<bool>();
    out->num_classes = m.at("num_classes").get<int>();
    out->delta_of = m.value("delta_of", int64_t{0});
    if (out->delta_of < 0 ||
        (out->delta_of > 0 && (out->delta_of >= out->version || !m.contains("tables")))) {
      return DataLoss(path,
                      absl::StrCat("\"delta_of\": ", out->delta_of, " is not a version before ",
                                   out->version, " of a click model"));
    }
    if (m.contains("tables")) {
      *tables = m.at("tables");
      if (!tables->is_array()) return DataLoss(path, "\"tables\" is not a list");
      embeddings->bytes = m.at("embeddings_bytes").get<uint64_t>();
      embeddings->crc = m.at("embeddings_crc32c").get<uint32_t>();
    }
    out->hparams_yaml = m.value("hparams_yaml", "");
    out->params.resize(m.at("num_params").get<int64_t>());
    out->state.resize(m.at("num_state").get<int64_t>());
    *bytes = m.at("variables_bytes").get<uint64_t>();
    *crc = m.at("variables_crc32c").get<uint32_t>();
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(path, absl::StrCat("a field is missing or of the wrong type: ", e.what()));
  }
  return absl::OkStatus();
}

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

// Reads embeddings.rows of the export in `dir` into e->tables, as the
// manifest's `tables` list them.
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
                                absl::Span<const float>, int64_t) {
                              return TakeRow(path, want[table].name, want[table].dim, id, weights,
                                             &e->tables[table]);
                            });
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ListExportVersions(Env* env, const std::string& export_base) {
  absl::StatusOr<std::vector<std::string>> names = env->ListDir(export_base);
  if (absl::IsNotFound(names.status())) return std::vector<int64_t>{};
  PSTRAIN_RETURN_IF_ERROR(names.status());
  std::vector<int64_t> versions;
  for (std::string name : *names) {
    if (!name.empty() && name.back() == '/') name.pop_back();  // an object store's prefix
    int64_t v;
    if (!AllDigits(name) || !absl::SimpleAtoi(name, &v)) continue;
    if (env->FileExists(JoinPath(JoinPath(export_base, name), kManifest))) versions.push_back(v);
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

absl::Status CheckExportValues(const Model& model, absl::Span<const float> params,
                               absl::Span<const float> state,
                               absl::Span<const TrainedTableRows> tables) {
  const std::vector<SparseTableInfo>& infos = model.sparse_tables();
  if (tables.size() != infos.size()) {
    return absl::InvalidArgumentError(absl::StrCat("export of ", model.name(), " with the rows of ",
                                                   tables.size(), " embedding tables; it has ",
                                                   infos.size()));
  }
  for (size_t t = 0; t < tables.size(); ++t) {
    if (tables[t].weights.size() != tables[t].ids.size() * infos[t].dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "export of ", model.name(), ": table ", infos[t].name, " has ", tables[t].ids.size(),
          " ids and ", tables[t].weights.size(), " weights, not ", infos[t].dim, " per row"));
    }
  }
  if (static_cast<int64_t>(params.size()) != model.num_params() ||
      static_cast<int64_t>(state.size()) != model.num_state()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "export of ", params.size(), " parameters and ", state.size(), " state values for ",
        model.name(), ", which has ", model.num_params(), " and ", model.num_state()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> WriteExportVersion(Env* env, const std::string& export_base,
                                               const Model& model, const ModelOptions& options,
                                               int64_t global_step, const std::string& hparams_yaml,
                                               absl::Span<const float> params,
                                               absl::Span<const float> state,
                                               absl::Span<const TrainedTableRows> tables,
                                               const ExportOnnxFile& onnx, int64_t delta_of) {
  PSTRAIN_RETURN_IF_ERROR(CheckExportValues(model, params, state, tables));
  const std::vector<SparseTableInfo>& infos = model.sparse_tables();
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> versions, ListExportVersions(env, export_base));
  if (delta_of > 0 && (infos.empty() || versions.empty() || versions.back() != delta_of)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a delta of version ", delta_of, " in ", export_base, ": ",
        infos.empty() ? "the model has no embedding tables"
                      : absl::StrCat("the newest version is ",
                                     versions.empty() ? "none" : std::to_string(versions.back()))));
  }
  int64_t version = absl::ToUnixSeconds(absl::Now());
  if (!versions.empty() && versions.back() >= version) version = versions.back() + 1;
  const std::string dir = JoinPath(export_base, std::to_string(version));
  PSTRAIN_RETURN_IF_ERROR(env->CreateDirs(dir));
  std::string bytes((params.size() + state.size()) * sizeof(float), '\0');
  // std::copy, not memcpy: an empty span's data() may be null.
  std::copy(params.begin(), params.end(), reinterpret_cast<float*>(bytes.data()));
  std::copy(state.begin(), state.end(), reinterpret_cast<float*>(bytes.data()) + params.size());
  const uint32_t crc = crc32c::Value(bytes.data(), bytes.size());
  PSTRAIN_RETURN_IF_ERROR(env->WriteFileAtomic(JoinPath(dir, kVariables), bytes));
  std::optional<EmbeddingsFile> embeddings;
  if (!infos.empty()) {
    std::vector<RowTableHeader> headers;
    for (const SparseTableInfo& info : infos)
      headers.push_back({info.name, info.dim, 0, kNoOptimizer});
    RowFileWriter writer(std::move(headers));
    for (size_t t = 0; t < tables.size(); ++t) {
      const TrainedTableRows& rows = tables[t];
      for (size_t r = 0; r < rows.ids.size(); ++r) {
        writer.Add(static_cast<int>(t), rows.ids[r],
                   absl::MakeConstSpan(rows.weights).subspan(r * infos[t].dim, infos[t].dim), {},
                   global_step);
      }
    }
    PSTRAIN_ASSIGN_OR_RETURN(RowFileSummary summary,
                             writer.Write(env, JoinPath(dir, kEmbeddings), global_step));
    embeddings = EmbeddingsFile{summary.size_bytes, summary.crc32c, summary.rows};
  }
  if (onnx.graph.has_value()) {
    PSTRAIN_RETURN_IF_ERROR(env->WriteFileAtomic(JoinPath(dir, kOnnx), *onnx.graph));
  } else {
    LOG(WARNING) << "export of " << model.name() << " to " << dir << ": no " << kOnnx << " ("
                 << onnx.missing_reason << ")";
  }
  const nlohmann::json manifest =
      Manifest(model, options, global_step, version, hparams_yaml, bytes.size(), crc,
               embeddings ? &*embeddings : nullptr, delta_of);
  PSTRAIN_RETURN_IF_ERROR(env->WriteFileAtomic(JoinPath(dir, kManifest), manifest.dump(2) + "\n"));
  return dir;
}

absl::StatusOr<std::vector<int64_t>> PruneExports(Env* env, const std::string& export_base,
                                                  int keep) {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> versions, ListExportVersions(env, export_base));
  // The oldest version kept: of the newest `keep`, or a base a kept delta
  // is read from.
  size_t first = versions.size() - std::min<size_t>(std::max(keep, 1), versions.size());
  while (first < versions.size()) {
    PSTRAIN_ASSIGN_OR_RETURN(
        const int64_t base,
        ExportDeltaOf(env, JoinPath(export_base, std::to_string(versions[first]))));
    const auto it = std::find(versions.begin(), versions.begin() + first, base);
    if (base == 0 || it == versions.begin() + first) break;
    first = it - versions.begin();
  }
  std::vector<int64_t> deleted;
  for (size_t i = 0; i < first; ++i) {
    const std::string dir = JoinPath(export_base, std::to_string(versions[i]));
    PSTRAIN_RETURN_IF_ERROR(env->DeleteFile(JoinPath(dir, kManifest)));
    for (const char* file : {kVariables, kOnnx, kEmbeddings}) {
      absl::Status s = env->DeleteFile(JoinPath(dir, file));
      if (!s.ok() && !absl::IsNotFound(s)) return s;
    }
    PSTRAIN_RETURN_IF_ERROR(env->DeleteDir(dir));
    deleted.push_back(versions[i]);
  }
  return deleted;
}

absl::StatusOr<std::string> ResolveExportDir(Env* env, const std::string& path) {
  if (env->FileExists(JoinPath(path, kManifest))) return path;
  for (const std::string& base : {path, JoinPath(path, "export")}) {
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> versions, ListExportVersions(env, base));
    if (!versions.empty()) return JoinPath(base, std::to_string(versions.back()));
  }
  return absl::NotFoundError(
      absl::StrCat("no exported model in ", path, ": looked for ", JoinPath(path, kManifest),
                   ", for versions (numbered directories with a ", kManifest, ") in it and in ",
                   JoinPath(path, "export"), "; export one with: pstrain-export <job_dir>"));
}

absl::StatusOr<int64_t> ExportDeltaOf(Env* env, const std::string& version_dir) {
  const std::string path = JoinPath(version_dir, kManifest);
  PSTRAIN_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
  nlohmann::json m = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (m.is_discarded() || !m.is_object()) return DataLoss(path, "is not a JSON object");
  const auto it = m.find("delta_of");
  if (it == m.end()) return 0;
  if (!it->is_number_integer() || it->get<int64_t>() < 0) {
    return DataLoss(path, "\"delta_of\" is not a version");
  }
  return it->get<int64_t>();
}

absl::StatusOr<ExportedModel> ReadExport(Env* env, const std::string& version_dir) {
  PSTRAIN_ASSIGN_OR_RETURN(ExportedModel e, ReadExportFiles(env, version_dir));
  if (e.delta_of == 0) return e;
  // The chain back to its full version, then each delta on it in turn.
  std::string dir = version_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string base = dir.substr(0, dir.find_last_of('/') + 1);
  std::vector<int64_t> chain = {e.version};
  for (int64_t v = e.delta_of; v > 0;) {
    if (chain.size() > kMaxDeltaChain || v >= chain.back()) {
      return DataLoss(
          JoinPath(version_dir, kManifest),
          absl::StrCat("its chain of deltas does not lead back to a full version (at ", v, ")"));
    }
    chain.push_back(v);
    const std::string at = base + std::to_string(v);
    absl::StatusOr<int64_t> next = ExportDeltaOf(env, at);
    if (!next.ok()) {
      return DataLoss(JoinPath(version_dir, kManifest),
                      absl::StrCat("a delta of version ", e.delta_of, ", read from version ", v,
                                   ", which cannot be read: ", next.status().message(),
                                   "; a delta is read through every version back to its full "
                                   "one: restore the missing version, or serve a full one "
                                   "(pstrain-export writes one from a checkpoint)"));
    }
    v = *next;
  }
  PSTRAIN_ASSIGN_OR_RETURN(ExportedModel whole,
                           ReadExportFiles(env, base + std::to_string(chain.back())));
  for (size_t i = chain.size() - 1; i-- > 1;) {
    PSTRAIN_ASSIGN_OR_RETURN(ExportedModel delta,
                             ReadExportFiles(env, base + std::to_string(chain[i])));
    PSTRAIN_RETURN_IF_ERROR(ApplyExportDelta(delta, &whole));
  }
  PSTRAIN_RETURN_IF_ERROR(ApplyExportDelta(e, &whole));
  return whole;
}

absl::Status ApplyExportDelta(const ExportedModel& delta, ExportedModel* model) {
  if (delta.delta_of == 0 || delta.delta_of != model->version) {
    return absl::InvalidArgumentError(
        absl::StrCat(delta.dir, " is ",
                     delta.delta_of == 0 ? "a full version"
                                         : absl::StrCat("a delta of version ", delta.delta_of),
                     ", not a delta of version ", model->version));
  }
  if (delta.model != model->model || delta.model_spec != model->model_spec ||
      delta.table_names != model->table_names || delta.table_dims != model->table_dims ||
      delta.params.size() != model->params.size() || delta.state.size() != model->state.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(delta.dir, " is a delta of another model than ", model->dir, " holds"));
  }
  model->params = delta.params;
  model->state = delta.state;
  model->version = delta.version;
  model->global_step = delta.global_step;
  model->delta_of = delta.delta_of;
  model->dir = delta.dir;
  for (size_t t = 0; t < delta.tables.size(); ++t) {
    const size_t dim = static_cast<size_t>(model->table_dims[t]);
    TrainedTableRows& rows = model->tables[t];
    absl::flat_hash_map<int64_t, size_t> row_of;
    row_of.reserve(rows.ids.size());
    for (size_t r = 0; r < rows.ids.size(); ++r) row_of[rows.ids[r]] = r;
    const TrainedTableRows& changed = delta.tables[t];
    for (size_t k = 0; k < changed.ids.size(); ++k) {
      const float* w = changed.weights.data() + k * dim;
      const bool removed = std::all_of(w, w + dim, [](float x) { return x == 0.0f; });
      const auto it = row_of.find(changed.ids[k]);
      if (it == row_of.end()) {
        if (removed) continue;
        row_of[changed.ids[k]] = rows.ids.size();
        rows.ids.push_back(changed.ids[k]);
        rows.weights.insert(rows.weights.end(), w, w + dim);
      } else if (!removed) {
        std::copy(w, w + dim, rows.weights.begin() + it->second * dim);
      } else {
        // The last row moves into its place.
        const size_t r = it->second, last = rows.ids.size() - 1;
        row_of.erase(it);
        if (r != last) {
          rows.ids[r] = rows.ids[last];
          std::copy_n(rows.weights.begin() + last * dim, dim, rows.weights.begin() + r * dim);
          row_of[rows.ids[r]] = r;
        }
        rows.ids.pop_back();
        rows.weights.resize(last * dim);
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ExportedModel> ReadExportFiles(Env* env, const std::string& version_dir) {
  const std::string manifest_path = JoinPath(version_dir, kManifest);
  PSTRAIN_ASSIGN_OR_RETURN(std::string text, env->ReadFile(manifest_path));
  ExportedModel e;
  e.dir = version_dir;
  uint64_t bytes = 0;
  uint32_t crc = 0;
  nlohmann::json tables;
  EmbeddingsFile embeddings;
  PSTRAIN_RETURN_IF_ERROR(
      ParseManifest(manifest_path, text, &e, &bytes, &crc, &tables, &embeddings));
  const std::string variables_path = JoinPath(version_dir, kVariables);
  PSTRAIN_ASSIGN_OR_RETURN(std::string data, env->ReadFile(variables_path));
  const uint64_t want = (e.params.size() + e.state.size()) * sizeof(float);
  if (data.size() != bytes || bytes != want) {
    return DataLoss(variables_path,
                    absl::StrCat("holds ", data.size(), " bytes; the manifest says ", bytes, " (",
                                 want, " for its variables)"));
  }
  if (crc32c::Value(data.data(), data.size()) != crc) {
    return DataLoss(variables_path, "checksum mismatch: the file is damaged or not this export's");
  }
  const float* values = reinterpret_cast<const float*>(data.data());
  std::copy(values, values + e.params.size(), e.params.begin());
  std::copy(values + e.params.size(), values + e.params.size() + e.state.size(), e.state.begin());
  if (!tables.is_null())
    PSTRAIN_RETURN_IF_ERROR(ReadEmbeddings(env, version_dir, tables, embeddings, &e));
  return e;
}

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
            int64_t) {
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
