#include "export/export.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "config/cluster_config.h"
#include "data/formats/csv_format.h"
#include "glog/logging.h"
#include "io/checkpoint.h"
#include "models/model_options.h"
#include "onnx/onnx_export.h"

namespace pstrain {

std::string JobCsvSchemaPath(const std::string& job_dir) {
  return JoinPath(job_dir, "csv_schema.yaml");
}

std::string CsvSchemaForExport(Env* env, const std::string& hparams_yaml, const Model& model) {
  if (hparams_yaml.empty() || model.input_shape().size() != 1) return "";
  absl::StatusOr<JobConfig> job = ParseJobConfig(hparams_yaml, "the export's job config");
  if (!job.ok()) {
    LOG(WARNING) << "export of " << model.name() << ": its job config does not parse ("
                 << job.status().message() << "); no CSV schema is kept";
    return "";
  }
  if (job->training.csv_schema.empty()) return "";
  const std::string copy = JobCsvSchemaPath(job->training.job_dir);
  const std::string& path = env->FileExists(copy) ? copy : job->training.csv_schema;
  absl::StatusOr<std::string> text = env->ReadFile(path);
  absl::StatusOr<CsvSchema> schema =
      text.ok() ? ParseCsvSchemaText(*text, path) : absl::StatusOr<CsvSchema>(text.status());
  absl::Status fits =
      schema.ok() ? CheckCsvSchemaFits(*schema, model.input_shape()[0], model.sparse_features())
                  : schema.status();
  if (!fits.ok()) {
    LOG(WARNING) << "export of " << model.name() << ": its CSV schema " << path << " is not kept ("
                 << fits.message()
                 << "); the version takes the features' id form only, not raw rows";
    return "";
  }
  return *text;
}

absl::StatusOr<std::string> WriteExport(Env* env, const std::string& export_base,
                                        const Model& model, const ModelOptions& options,
                                        int64_t global_step, const std::string& hparams_yaml,
                                        absl::Span<const float> params,
                                        absl::Span<const float> state,
                                        absl::Span<const TrainedTableRows> tables) {
  PSTRAIN_RETURN_IF_ERROR(CheckExportValues(model, params, state, tables));
  // The ONNX graph first: an error that stops the export leaves no files.
  ExportOnnxFile onnx;
  if (model.spec_yaml().empty()) {
    onnx.missing_reason = "the model has no spec, which the ONNX graph is written from";
  } else if (absl::StatusOr<std::string> graph = ModelToOnnx(model, params, state, tables);
             graph.ok()) {
    onnx.graph = std::move(*graph);
  } else if (absl::IsResourceExhausted(graph.status()) || absl::IsUnimplemented(graph.status()) ||
             model.has_sparse()) {
    // The version still serves pstrain-serve: a model ONNX cannot hold (past
    // protobuf's 2 GiB, a dynamic table, a click model's names) loses only
    // its model.onnx.
    onnx.missing_reason = std::string(graph.status().message());
  } else {
    return graph.status();
  }
  return WriteExportVersion(env, export_base, model, options, global_step, hparams_yaml, params,
                            state, tables, onnx, /*delta_of=*/0,
                            CsvSchemaForExport(env, hparams_yaml, model));
}

namespace {

absl::Status DataLoss(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrCat(path, ": ", what));
}

// A checkpoint's model and values, read for an export.
}  // namespace

absl::StatusOr<CheckpointValues> ReadCheckpointValues(Env* env, const std::string& index_path) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                           CheckpointReader::Open(env, index_path));
  const CheckpointIndex& index = reader->index();
  absl::StatusOr<JobConfig> job =
      ParseJobConfig(index.hparams_yaml(), absl::StrCat(index_path, " (its job config)"));
  if (!job.ok()) return job.status();
  if (job->training.model != index.model()) {
    return DataLoss(index_path, absl::StrCat("holds ", index.model(), " but its job config says ",
                                             job->training.model));
  }
  CheckpointValues out;
  PSTRAIN_ASSIGN_OR_RETURN(out.model, BuildJobModel(job->training));
  const Model& model = *out.model;
  if (model.num_params() != index.num_params() || model.num_state() != index.num_state()) {
    return DataLoss(index_path,
                    absl::StrCat("holds ", index.num_params(), " parameters and ",
                                 index.num_state(), " state values; ", index.model(), " has ",
                                 model.num_params(), " and ", model.num_state()));
  }
  out.params.resize(model.num_params());
  out.state.resize(model.num_state());
  PSTRAIN_RETURN_IF_ERROR(reader->ReadRange(0, model.num_params(), out.params.data(), {}).status());
  PSTRAIN_RETURN_IF_ERROR(reader->ReadState(out.state.data()));
  if (model.has_sparse()) {
    PSTRAIN_ASSIGN_OR_RETURN(out.tables, ReadCheckpointRows(env, index_path, index, model));
  }
  out.options = ModelOptionsFromSpec(job->training);
  out.global_step = index.global_step();
  out.hparams_yaml = index.hparams_yaml();
  return out;
}

absl::StatusOr<std::string> ExportCheckpoint(Env* env, const std::string& index_path,
                                             const std::string& export_base) {
  PSTRAIN_ASSIGN_OR_RETURN(CheckpointValues c, ReadCheckpointValues(env, index_path));
  return WriteExport(env, export_base, *c.model, c.options, c.global_step, c.hparams_yaml, c.params,
                     c.state, c.tables);
}

absl::StatusOr<std::string> ExportHistory::ExportCheckpoint(Env* env, const std::string& index_path,
                                                            const std::string& export_base) {
  // One export at a time, each from the checkpoint it was given.
  absl::MutexLock lock(&mu_);
  PSTRAIN_ASSIGN_OR_RETURN(CheckpointValues c, ReadCheckpointValues(env, index_path));
  if (!c.model->has_sparse() || full_every_ <= 1) {
    return WriteExport(env, export_base, *c.model, c.options, c.global_step, c.hparams_yaml,
                       c.params, c.state, c.tables);
  }
  // Each row's fingerprint now.
  std::vector<absl::flat_hash_map<int64_t, uint64_t>> rows(c.tables.size());
  for (size_t t = 0; t < c.tables.size(); ++t) {
    const TrainedTableRows& table = c.tables[t];
    const size_t dim = table.ids.empty() ? 0 : table.weights.size() / table.ids.size();
    rows[t].reserve(table.ids.size());
    for (size_t r = 0; r < table.ids.size(); ++r) {
      rows[t][table.ids[r]] = absl::HashOf(absl::string_view(
          reinterpret_cast<const char*>(table.weights.data() + r * dim), dim * sizeof(float)));
    }
  }
  bool delta = full_every_ > 1 && last_version_ > 0 && since_full_ + 1 < full_every_ &&
               rows_.size() == rows.size();
  if (delta) {
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> versions, ListExportVersions(env, export_base));
    delta = !versions.empty() && versions.back() == last_version_;
  }
  std::string dir;
  if (delta) {
    // The rows that changed or are new, and those gone as zeros.
    std::vector<TrainedTableRows> changed(c.tables.size());
    for (size_t t = 0; t < c.tables.size(); ++t) {
      const TrainedTableRows& table = c.tables[t];
      const int64_t dim = c.model->sparse_tables()[t].dim;
      for (size_t r = 0; r < table.ids.size(); ++r) {
        const auto before = rows_[t].find(table.ids[r]);
        if (before != rows_[t].end() && before->second == rows[t][table.ids[r]]) continue;
        changed[t].ids.push_back(table.ids[r]);
        changed[t].weights.insert(changed[t].weights.end(), table.weights.begin() + r * dim,
                                  table.weights.begin() + (r + 1) * dim);
      }
      for (const auto& [id, fingerprint] : rows_[t]) {
        if (rows[t].contains(id)) continue;
        changed[t].ids.push_back(id);
        changed[t].weights.resize(changed[t].weights.size() + dim, 0.0f);
      }
    }
    ExportOnnxFile onnx;
    onnx.missing_reason = "a delta version; the full version it is read from may hold one";
    absl::StatusOr<std::string> written = WriteExportVersion(
        env, export_base, *c.model, c.options, c.global_step, c.hparams_yaml, c.params, c.state,
        changed, onnx, last_version_, CsvSchemaForExport(env, c.hparams_yaml, *c.model));
    // Another version landed first: a full one instead.
    delta = written.ok() || !absl::IsFailedPrecondition(written.status());
    if (delta) {
      PSTRAIN_ASSIGN_OR_RETURN(dir, std::move(written));
      ++since_full_;
    }
  }
  if (!delta) {
    PSTRAIN_ASSIGN_OR_RETURN(dir, WriteExport(env, export_base, *c.model, c.options, c.global_step,
                                              c.hparams_yaml, c.params, c.state, c.tables));
    since_full_ = 0;
  }
  int64_t version = 0;
  if (!absl::SimpleAtoi(dir.substr(dir.find_last_of('/') + 1), &version)) {
    return absl::InternalError(absl::StrCat("an export version named ", dir));
  }
  last_version_ = version;
  rows_ = std::move(rows);
  return dir;
}

absl::Status ExportCheckpointAsOnnx(Env* env, const std::string& index_path,
                                    const std::string& output_path) {
  PSTRAIN_ASSIGN_OR_RETURN(CheckpointValues c, ReadCheckpointValues(env, index_path));
  PSTRAIN_ASSIGN_OR_RETURN(std::string onnx, ModelToOnnx(*c.model, c.params, c.state, c.tables));
  return env->WriteFileAtomic(output_path, onnx);
}

}  // namespace pstrain
