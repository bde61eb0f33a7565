// Deltas of a click model's export, apart from the manifest: a delta is read
// through its chain back to a full version, and a server applies one to the
// model it holds.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "io/export_format.h"
#include "io/export_format_internal.h"

namespace pstrain {

using export_format_internal::DataLoss;
using export_format_internal::kManifest;

namespace {

// Bounds a chain of deltas read back to its full version.
constexpr int kMaxDeltaChain = 100000;

}  // namespace

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
}  // namespace pstrain
