#ifndef PSTRAIN_IO_EXPORT_FORMAT_INTERNAL_H_
#define PSTRAIN_IO_EXPORT_FORMAT_INTERNAL_H_

// Internal to export_*.cc: what the export's files share, so that the
// manifest (export_format.cc), deltas (export_delta.cc) and table rows
// (export_rows.cc) name the same files and report damage alike.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "io/export_format.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace export_format_internal {

inline constexpr char kManifest[] = "model.json";
inline constexpr char kVariables[] = "variables.bin";
inline constexpr char kOnnx[] = "model.onnx";
inline constexpr char kEmbeddings[] = "embeddings.rows";

inline absl::Status DataLoss(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrCat(path, ": ", what));
}

// What embeddings.rows holds, for the manifest.
struct EmbeddingsFile {
  uint64_t bytes = 0;
  uint32_t crc = 0;
  std::vector<int64_t> rows;  // per table
};

// Reads embeddings.rows of the export in `dir` into e->tables, as the
// manifest's `tables` list them (export_rows.cc).
absl::Status ReadEmbeddings(Env* env, const std::string& dir, const nlohmann::json& tables,
                            const EmbeddingsFile& file, ExportedModel* e);

}  // namespace export_format_internal
}  // namespace pstrain

#endif  // PSTRAIN_IO_EXPORT_FORMAT_INTERNAL_H_
