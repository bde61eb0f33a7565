// The export's manifest and its versions: writing, listing, pruning and
// reading one version's files. A delta's chain is export_delta.cc's, the
// tables' rows export_rows.cc's.
#include "io/export_format.h"

#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/crc32c.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "io/export_format_internal.h"
#include "io/row_checkpoint.h"
#include "nlohmann/json.hpp"

namespace pstrain {

using export_format_internal::DataLoss;
using export_format_internal::EmbeddingsFile;
using export_format_internal::kEmbeddings;
using export_format_internal::kManifest;
using export_format_internal::kOnnx;
using export_format_internal::kVariables;
using export_format_internal::ReadEmbeddings;

namespace {

constexpr char kFormat[] = "pstrain-export";
// 2: a click model's embeddings.rows and tables; 3: a delta of a click
// model (delta_of); 4: embeddings.rows is a row file of version 2
// (TFRecord-framed, io/row_checkpoint.h), which readers of 2 and 3 cannot
// read: they refuse the export as newer than theirs; 5: a regression head
// (one value, no classes), which readers of 4 and before cannot serve.
// 6: a multi-task model (heads:, an output per head), which readers of 5
// and before cannot build.
// Exports without tables are still written as 1, which every earlier reader
// takes; click models' (full or delta) as 4; regression models' as 5;
// multi-task models' as 6.
constexpr int kFormatVersion = 6;
constexpr int kRegressionFormatVersion = 5;
constexpr int kMultiHeadFormatVersion = 6;
constexpr char kNoOptimizer[] = "none";  // the export's rows carry no slots

bool AllDigits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isdigit(c); });
}

nlohmann::json Manifest(const Model& model, const ModelOptions& options, int64_t global_step,
                        int64_t version, const std::string& hparams_yaml, uint64_t bytes,
                        uint32_t crc, const EmbeddingsFile* embeddings, int64_t delta_of,
                        const std::string& csv_schema) {
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
      {"format_version", embeddings == nullptr ? 1 : 4},
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
  if (model.head() == Head::kRegression) {
    // Readers before regression heads refuse it as newer than they read.
    m["format_version"] = kRegressionFormatVersion;
    m["outputs"] = {{"predictions", "float32: the predicted value"}};
  }
  if (model.head() == Head::kBinary) {
    m["outputs"] = {{"classes", "int64: 1 when logistic > 0.5, else 0"},
                    {"probabilities", "float32 [2]: 1 - logistic, logistic"},
                    {"logistic", "float32 [1]: the sigmoid of the logit"}};
  }
  if (model.multi_head()) {
    // Readers before heads refuse it as newer than they read.
    m["format_version"] = kMultiHeadFormatVersion;
    nlohmann::json outputs = nlohmann::json::object();
    for (const ModelHead& h : model.heads()) {
      outputs[h.name] = h.kind == Head::kRegression ? "float32: the predicted value"
                        : h.kind == Head::kBinary   ? "float32: the sigmoid of the logit"
                                                    : "float32 [classes]: softmax of the logits";
    }
    m["outputs"] = outputs;
  }
  if (model.input_shape().size() == 1) {
    // A tabular model's dense features (with or without tables), any values.
    m["input"] = {{"name", "dense"},
                  {"shape", model.input_shape()},
                  {"dtype", "float32"},
                  {"per_image_standardization", false},
                  {"sparse_features", model.sparse_features()}};
  }
  // Readers before it ignore it (and take the id form only).
  if (!csv_schema.empty()) m["csv_schema"] = csv_schema;
  if (embeddings != nullptr) {
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
    out->csv_schema = m.value("csv_schema", "");
    out->params.resize(m.at("num_params").get<int64_t>());
    out->state.resize(m.at("num_state").get<int64_t>());
    *bytes = m.at("variables_bytes").get<uint64_t>();
    *crc = m.at("variables_crc32c").get<uint32_t>();
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(path, absl::StrCat("a field is missing or of the wrong type: ", e.what()));
  }
  return absl::OkStatus();
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

absl::StatusOr<std::string> WriteExportVersion(
    Env* env, const std::string& export_base, const Model& model, const ModelOptions& options,
    int64_t global_step, const std::string& hparams_yaml, absl::Span<const float> params,
    absl::Span<const float> state, absl::Span<const TrainedTableRows> tables,
    const ExportOnnxFile& onnx, int64_t delta_of, const std::string& csv_schema) {
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
               embeddings ? &*embeddings : nullptr, delta_of, csv_schema);
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
}  // namespace pstrain
