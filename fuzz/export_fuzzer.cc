// The export reader (io/export_format.h) on arbitrary version files: a
// version 2 whose model.json, embeddings.rows and variables.bin come from
// the input, beside a valid full version 1 of a click model it may be a
// delta of. Input: [manifest length LE16][model.json][rows length LE16]
// [embeddings.rows][variables.bin]. Checks: no crash, leak or allocation
// beyond the input's size; a version it reads has the values and rows its
// manifest lists; pruning never deletes what a kept version is read from.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/env.h"
#include "io/export_format.h"
#include "nlohmann/json.hpp"
#include "testing/click_test_model.h"

namespace {

// Version 1's files, written once.
struct Base {
  std::string manifest, rows, variables;
};

const Base& BaseFiles() {
  static const Base* base = [] {
    pstrain::MemEnv env;
    pstrain::ClickModel c = pstrain::MakeClickModel();
    pstrain::ExportOnnxFile no_onnx;
    no_onnx.missing_reason = "fuzzing";
    const std::string dir = *pstrain::WriteExportVersion(
        &env, "/e", *c.model, pstrain::ModelOptions(), 1, "", c.params, c.state, c.tables, no_onnx);
    // Named version 1, as its directory.
    nlohmann::json manifest = nlohmann::json::parse(*env.ReadFile(dir + "/model.json"));
    manifest["version"] = 1;
    return new Base{manifest.dump(), *env.ReadFile(dir + "/embeddings.rows"),
                    *env.ReadFile(dir + "/variables.bin")};
  }();
  return *base;
}

// The next `length`-prefixed piece of `in` (all that is left if it is short).
std::string_view Take(std::string_view* in) {
  if (in->size() < 2) {
    std::string_view all = *in;
    *in = {};
    return all;
  }
  const size_t n = static_cast<uint8_t>((*in)[0]) | static_cast<size_t>((*in)[1]) << 8;
  in->remove_prefix(2);
  std::string_view piece = in->substr(0, n);
  in->remove_prefix(piece.size());
  return piece;
}

void CheckWhole(const pstrain::ExportedModel& e) {
  if (e.tables.size() != e.table_dims.size()) std::abort();
  for (size_t t = 0; t < e.tables.size(); ++t) {
    if (e.tables[t].weights.size() != e.tables[t].ids.size() * e.table_dims[t]) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Base& base = BaseFiles();
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::string_view manifest = Take(&in);
  const std::string_view rows = Take(&in);
  pstrain::MemEnv env;
  if (!env.WriteFileAtomic("/e/1/embeddings.rows", base.rows).ok() ||
      !env.WriteFileAtomic("/e/1/variables.bin", base.variables).ok() ||
      !env.WriteFileAtomic("/e/1/model.json", base.manifest).ok() ||
      !env.WriteFileAtomic("/e/2/embeddings.rows", std::string(rows)).ok() ||
      !env.WriteFileAtomic("/e/2/variables.bin", std::string(in)).ok() ||
      !env.WriteFileAtomic("/e/2/model.json", std::string(manifest)).ok()) {
    std::abort();
  }
  absl::StatusOr<pstrain::ExportedModel> files = pstrain::ReadExportFiles(&env, "/e/2");
  absl::StatusOr<pstrain::ExportedModel> whole = pstrain::ReadExport(&env, "/e/2");
  if (files.ok()) CheckWhole(*files);
  if (whole.ok()) {
    CheckWhole(*whole);
    if (!files.ok()) std::abort();  // read whole, but not its own files
  }
  // Keeping the newest keeps its base, if it names one that is there.
  absl::StatusOr<std::vector<int64_t>> pruned = pstrain::PruneExports(&env, "/e", 1);
  if (pruned.ok() && whole.ok() && whole->delta_of == 1 && !pruned->empty()) std::abort();
  return 0;
}
