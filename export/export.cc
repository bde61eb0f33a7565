#include "export/export.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "config/cluster_config.h"
#include "io/checkpoint.h"
#include "models/model_options.h"
#include "onnx/onnx_export.h"

namespace pstrain {

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
                            state, tables, onnx);
}

namespace {

absl::Status DataLoss(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrCat(path, ": ", what));
}

// A checkpoint's model and values, read for an export.
struct CheckpointValues {
  std::unique_ptr<Model> model;
  ModelOptions options;
  int64_t global_step = 0;
  std::string hparams_yaml;
  std::vector<float> params, state;
  std::vector<TrainedTableRows> tables;  // per model table
};

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

}  // namespace

absl::StatusOr<std::string> ExportCheckpoint(Env* env, const std::string& index_path,
                                             const std::string& export_base) {
  PSTRAIN_ASSIGN_OR_RETURN(CheckpointValues c, ReadCheckpointValues(env, index_path));
  return WriteExport(env, export_base, *c.model, c.options, c.global_step, c.hparams_yaml, c.params,
                     c.state, c.tables);
}

absl::Status ExportCheckpointAsOnnx(Env* env, const std::string& index_path,
                                    const std::string& output_path) {
  PSTRAIN_ASSIGN_OR_RETURN(CheckpointValues c, ReadCheckpointValues(env, index_path));
  PSTRAIN_ASSIGN_OR_RETURN(std::string onnx, ModelToOnnx(*c.model, c.params, c.state, c.tables));
  return env->WriteFileAtomic(output_path, onnx);
}

}  // namespace pstrain
