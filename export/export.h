#ifndef PSTRAIN_EXPORT_EXPORT_H_
#define PSTRAIN_EXPORT_EXPORT_H_

// Exporting, above io and onnx: a trained model (or a checkpoint) written as
// an export version (io/export_format.h) with its ONNX graph
// (onnx/onnx_export.h), or a checkpoint as one ONNX file.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/env.h"
#include "io/export_format.h"

namespace pstrain {

// A checkpoint's values and the model they are of.
struct CheckpointValues {
  std::unique_ptr<Model> model;  // built from the job config the checkpoint records
  ModelOptions options;
  int64_t global_step = 0;
  std::string hparams_yaml;  // that job config
  std::vector<float> params, state;
  std::vector<TrainedTableRows> tables;  // per model table: its rows files' rows
};

// Reads the checkpoint whose index is `index_path`: every shard and rows
// file, each checked against the index's size and CRC. DataLoss naming the
// file for a damaged or inconsistent one (or a model other than its job
// config's), NotFound for a missing one.
absl::StatusOr<CheckpointValues> ReadCheckpointValues(Env* env, const std::string& index_path);

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

// What a job's exports while training remember so that a click model's
// versions can be deltas: the last version's rows, as a fingerprint of each
// row's weights per id (about 20-40 bytes a row in the chief's memory, only
// when deltas are asked for). A new history (a restarted chief) writes a
// full version first.
class ExportHistory {
 public:
  // A full version every `full_every` exports, deltas between (1: none).
  explicit ExportHistory(int full_every) : full_every_(full_every) {}

  // ExportCheckpoint, as a delta of the last version this history wrote
  // when one is due and that version is still the newest under
  // `export_base`; else full. Thread-safe (one export at a time).
  absl::StatusOr<std::string> ExportCheckpoint(Env* env, const std::string& index_path,
                                               const std::string& export_base);

 private:
  const int full_every_;
  absl::Mutex mu_;
  int64_t last_version_ ABSL_GUARDED_BY(mu_) = 0;
  int since_full_ ABSL_GUARDED_BY(mu_) = 0;  // deltas written since the last full version
  std::vector<absl::flat_hash_map<int64_t, uint64_t>> rows_ ABSL_GUARDED_BY(mu_);
};

// Where a job's chief keeps the CSV schema it read its rows with:
// <job_dir>/csv_schema.yaml, a copy of training.csv_schema's file made as it
// starts.
std::string JobCsvSchemaPath(const std::string& job_dir);

// The text of the CSV schema the job of `hparams_yaml` (its job config) read
// its rows with, for an export of `model` to keep (WriteExportVersion's
// csv_schema): the job dir's copy (JobCsvSchemaPath), or csv_schema's file
// for a job from before such copies; empty for a job without one. A schema
// that cannot be read or does not fit the model (CheckCsvSchemaFits) is not
// kept, with a warning saying why: the version then takes the id form only.
std::string CsvSchemaForExport(Env* env, const std::string& hparams_yaml, const Model& model);

// Writes the checkpoint whose index is `index_path` as one ONNX file at
// `output_path` (replaced atomically), the model.onnx an export version holds.
// InvalidArgument for a checkpoint whose model has no spec.
absl::Status ExportCheckpointAsOnnx(Env* env, const std::string& index_path,
                                    const std::string& output_path);

}  // namespace pstrain

#endif  // PSTRAIN_EXPORT_EXPORT_H_
