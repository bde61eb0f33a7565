#ifndef PSTRAIN_EXPORT_EXPORT_H_
#define PSTRAIN_EXPORT_EXPORT_H_

// Exporting, above io and onnx: a trained model (or a checkpoint) written as
// an export version (io/export_format.h) with its ONNX graph
// (onnx/onnx_export.h), or a checkpoint as one ONNX file.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/env.h"
#include "io/export_format.h"

namespace pstrain {

// Writes a new version under `export_base` from the values of `model` (built
// with `options`) and returns its directory: variables.bin, model.onnx (when
// the model has a spec; logged and left out otherwise), then model.json. Its
// name is the Unix time, or one more than the newest version if that is not
// newer. `tables`: a model with embedding tables gives the trained rows of
// each (Model::sparse_tables() order), written to embeddings.rows. A model
// ONNX cannot hold (a dynamic table, past 2 GiB) is exported without
// model.onnx, saying why in the log. InvalidArgument if the value counts or
// tables do not match the model.
absl::StatusOr<std::string> WriteExport(Env* env, const std::string& export_base,
                                        const Model& model, const ModelOptions& options,
                                        int64_t global_step, const std::string& hparams_yaml,
                                        absl::Span<const float> params,
                                        absl::Span<const float> state,
                                        absl::Span<const TrainedTableRows> tables = {});

// Exports the checkpoint whose index is `index_path` under `export_base`,
// with the model and options of the job config the checkpoint records, and
// the rows of its rows files (each checked against the index's size and CRC)
// for a model with embedding tables. Returns the new version directory.
absl::StatusOr<std::string> ExportCheckpoint(Env* env, const std::string& index_path,
                                             const std::string& export_base);

// Writes the checkpoint whose index is `index_path` as one ONNX file at
// `output_path` (replaced atomically), the model.onnx an export version holds.
// InvalidArgument for a checkpoint whose model has no spec.
absl::Status ExportCheckpointAsOnnx(Env* env, const std::string& index_path,
                                    const std::string& output_path);

}  // namespace pstrain

#endif  // PSTRAIN_EXPORT_EXPORT_H_
