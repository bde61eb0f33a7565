#ifndef PSTRAIN_IO_PROJECTOR_H_
#define PSTRAIN_IO_PROJECTOR_H_

// TensorBoard's PROJECTOR tab for a model's embedding tables
// (docs/tensorboard.md): from a checkpoint, each table's most trained rows
// (the most pushes, io/row_checkpoint.h; ties: the smaller id first), written
// where TensorBoard's projector plugin reads them, in a run's directory:
//
//   projector_config.pbtxt    a ProjectorConfig (proto/projector_config.proto)
//                             in protobuf's text form, an `embeddings` entry per
//                             table: tensor_name (the table), tensor_path,
//                             tensor_shape [rows, dim] and metadata_path, the
//                             paths relative to the run's directory
//   projector/<step>/<table>.tsv           a line per row: its dim weights,
//                                          tab-separated
//   projector/<step>/<table>.metadata.tsv  the header "id\tvalue\tpushes", then
//                                          a line per row in the tensor's order:
//                                          its id, its raw value where it is
//                                          known (a CSV column's text; empty
//                                          otherwise) and how often it was
//                                          trained
//
// <table> is the table's name with every byte but [A-Za-z0-9._-] as '_'. The
// TSVs are written first, then the config is replaced at once, then the
// files of other steps are deleted: a reader sees the last whole set or the
// new one. A table with no rows gets no entry; a checkpoint with no table
// writes nothing.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "common/rows_to_name.h"

namespace pstrain {

inline constexpr char kProjectorConfigFile[] = "projector_config.pbtxt";
inline constexpr char kProjectorDir[] = "projector";
// The most rows `rows` may ask for per table: the projector computes its
// PCA, t-SNE and UMAP in a browser tab.
inline constexpr int64_t kMaxProjectorRows = 100000;

struct ProjectorOptions {
  int64_t rows = 10000;  // per table, in [0, kMaxProjectorRows]; 0: write nothing
  // Names the rows chosen, every table at once (one pass over the input
  // names them all). Optional; it reports its own problems (a row without a
  // name is no error).
  std::function<void(std::vector<RowsToName>* rows)> name_rows;
};

struct ProjectorTable {
  std::string name;
  int64_t rows_in_checkpoint = 0;
  int64_t rows = 0;  // written
  int64_t dim = 0;
  int64_t named = 0;       // rows with a raw value
  int64_t min_pushes = 0;  // of the rows written
  int64_t max_pushes = 0;
  std::string tensor_path;  // relative to the run's directory
  std::string metadata_path;
};

struct ProjectorSummary {
  int64_t global_step = 0;
  std::vector<ProjectorTable> tables;  // those with an entry
  uint64_t bytes = 0;                  // of the files written
};

// Writes the projector's files for the checkpoint whose index is at
// `index_path` into `run_dir`, as the file comment says. Reads every rows
// file of the checkpoint (checked against the index's size and CRC), one
// file at a time, keeping each table's best `rows` rows: memory is one file
// and rows x dim floats per table. InvalidArgument for a bad `rows`;
// NotFound or DataLoss for a checkpoint that is not there or damaged; the
// Env's errors. A checkpoint written before rows were counted has every
// row's pushes 0: the rows with the smallest ids are written.
absl::StatusOr<ProjectorSummary> WriteProjector(Env* env, const std::string& index_path,
                                                const std::string& run_dir,
                                                const ProjectorOptions& options);

}  // namespace pstrain

#endif  // PSTRAIN_IO_PROJECTOR_H_
