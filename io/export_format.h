#ifndef PSTRAIN_IO_EXPORT_FORMAT_H_
#define PSTRAIN_IO_EXPORT_FORMAT_H_

// The export format: a trained model, exported for serving (TensorFlow's
// `export/<name>/<ts>` habit), and what reads it. Writing one from a model
// (with its ONNX graph) or a checkpoint is export/export.h's. Each version is
// a directory named by its Unix time under the export base (<job_dir>/export/):
//
//   <job_dir>/export/1795478400/variables.bin  every parameter, then the
//                                               batch-norm statistics
//                                               (float32, little-endian)
//   <job_dir>/export/1795478400/model.onnx     the same model as an ONNX graph
//                                               for ONNX Runtime and the like
//                                               (onnx/onnx_export.h), when the
//                                               model has a spec (always, but
//                                               for models built in code)
//   <job_dir>/export/1795478400/embeddings.rows the trained rows of a click
//                                               model's embedding tables (a
//                                               row file, io/row_checkpoint.h,
//                                               without optimizer slots), when
//                                               the model has tables
//   <job_dir>/export/1795478400/model.json     the manifest, written last:
//                                               model name, spec and options,
//                                               input spec, class count,
//                                               variables, size and CRC-32C
//                                               of variables.bin (and of
//                                               embeddings.rows, with its
//                                               tables), hparams
//
// A version without model.json is not one (a crash mid-export leaves nothing
// a loader would read); model.json names the size and checksum of the
// variables it goes with, so a damaged or swapped file is refused.
//
// A click model's version may be a delta ("delta_of": its base, the version
// before it): every dense value, and in embeddings.rows only the rows that
// changed since the base, a row removed since (evicted) written as zeros
// (what a row that is not there reads as). Reading a delta reads its chain
// back to the full version it starts from; a server holding the base applies
// the delta's rows to the tables it has (ApplyExportDelta).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/env.h"
#include "io/checkpoint.h"
#include "models/registry.h"
#include "models/sparse_input.h"

namespace pstrain {

// What a loaded export holds.
struct ExportedModel {
  std::string dir;      // the version directory it was read from
  int64_t version = 0;  // its name
  std::string model;    // the model's name, e.g. "mnist_cnn"
  // Its model spec (ModelSpecToYaml's text), what a loader builds; empty in
  // exports written before specs, which name a built-in: BuildModel(model,
  // options).
  std::string model_spec;
  ModelOptions options;
  int64_t global_step = 0;
  std::vector<int64_t> input_shape;  // HWC
  int num_classes = 0;
  bool per_image_standardization = false;
  std::string hparams_yaml;  // the job's training section
  // The CSV schema's text (the file the job's csv_schema named) when the job
  // read CSV rows: the version then takes raw rows (serving/click_request.h).
  std::string csv_schema;
  std::vector<float> params, state;
  // A click model's trained rows, per Model::sparse_tables() entry in order
  // (empty for a model without tables).
  std::vector<TrainedTableRows> tables;
  // Their names and dims as the manifest lists them (a loader checks them
  // against the model it builds).
  std::vector<std::string> table_names;
  std::vector<int64_t> table_dims;
  // A delta's base version (0: a full version). ReadExport gives the whole
  // model at a delta, ReadExportFiles the delta's own rows.
  int64_t delta_of = 0;
};

// The ONNX graph a version holds as model.onnx, or why it has none.
struct ExportOnnxFile {
  std::optional<std::string> graph;  // a serialized onnx.ModelProto
  std::string missing_reason;        // logged when `graph` is empty
};

// InvalidArgument if the value counts or `tables` (one per
// Model::sparse_tables() entry, `dim` floats per row) do not match `model`.
absl::Status CheckExportValues(const Model& model, absl::Span<const float> params,
                               absl::Span<const float> state,
                               absl::Span<const TrainedTableRows> tables);

// Writes a new version under `export_base` from the values of `model` (built
// with `options`) and returns its directory: variables.bin, embeddings.rows
// (a model with tables: their trained rows, Model::sparse_tables() order),
// model.onnx (`onnx.graph`; without one, `onnx.missing_reason` is logged),
// then model.json. Its name is the Unix time, or one more than the newest
// version if that is not newer. InvalidArgument as CheckExportValues.
// `delta_of` > 0: a delta of that version (`tables` the changed rows), which
// must be the newest (FailedPrecondition otherwise). `csv_schema`: the text
// of the CSV schema the job read its rows with (data/formats/csv_format.h),
// kept in the manifest so that the version takes raw rows; empty for none.
absl::StatusOr<std::string> WriteExportVersion(
    Env* env, const std::string& export_base, const Model& model, const ModelOptions& options,
    int64_t global_step, const std::string& hparams_yaml, absl::Span<const float> params,
    absl::Span<const float> state, absl::Span<const TrainedTableRows> tables,
    const ExportOnnxFile& onnx, int64_t delta_of = 0, const std::string& csv_schema = "");

// Versions under `export_base` that have a manifest, oldest first; empty if
// there is none or no such directory.
absl::StatusOr<std::vector<int64_t>> ListExportVersions(Env* env, const std::string& export_base);

// Deletes every version but the newest `keep` and the versions a kept delta
// is read from (the manifest first, so a version half deleted is not taken
// for whole). Returns the deleted ones.
absl::StatusOr<std::vector<int64_t>> PruneExports(Env* env, const std::string& export_base,
                                                  int keep);

// The version directory `path` names: itself if it holds model.json, else
// the newest version under it, else the newest under `path`/export (a job
// dir). NotFound saying where it looked.
absl::StatusOr<std::string> ResolveExportDir(Env* env, const std::string& path);

// Reads a version directory: the whole model (a delta with its chain, from
// the directories beside it). DataLoss naming the file for a damaged,
// truncated or mismatched one, or a delta whose base is gone;
// InvalidArgument for a manifest pstrain cannot use (unknown model, wrong
// format).
absl::StatusOr<ExportedModel> ReadExport(Env* env, const std::string& version_dir);
// The files of one version as they are: a delta's changed rows only.
absl::StatusOr<ExportedModel> ReadExportFiles(Env* env, const std::string& version_dir);
// Applies `delta` (ReadExportFiles of a delta of `model`'s version) to
// `model`: its dense values, version and step, and its rows (a row of zeros
// removes the row). InvalidArgument if it is not a delta of that version or
// its tables do not match.
absl::Status ApplyExportDelta(const ExportedModel& delta, ExportedModel* model);
// A version's base ("delta_of"; 0 for a full version), from its manifest.
absl::StatusOr<int64_t> ExportDeltaOf(Env* env, const std::string& version_dir);

// The index file of the checkpoint `path` names: an index file, a checkpoint
// prefix (job_dir/model.ckpt-2000), or a job dir (its newest checkpoint).
// NotFound saying where it looked.
absl::StatusOr<std::string> ResolveCheckpointIndex(Env* env, const std::string& path);

// The rows of every table of `model` in the rows files of the checkpoint
// `index` (read from `index_path`), each file checked against the index's size
// and CRC. DataLoss naming the file for a damaged one, a table `model` does
// not have, or a checkpoint with no rows files.
absl::StatusOr<std::vector<TrainedTableRows>> ReadCheckpointRows(Env* env,
                                                                 const std::string& index_path,
                                                                 const CheckpointIndex& index,
                                                                 const Model& model);

}  // namespace pstrain

#endif  // PSTRAIN_IO_EXPORT_FORMAT_H_
