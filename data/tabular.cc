#include "data/tabular.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {
namespace {

// Enough names to recognize the data, few enough to read in one line.
constexpr size_t kNamesShown = 30;

// "C1, C2, ..., C30 and 4 more", or "none".
std::string FeatureList(const Dataset& data) {
  if (data.sparse.empty()) return "none";
  std::vector<std::string> names;
  for (size_t i = 0; i < data.sparse.size() && i < kNamesShown; ++i) {
    names.push_back(data.sparse[i].name);
  }
  std::string list = absl::StrJoin(names, ", ");
  if (data.sparse.size() > kNamesShown) {
    absl::StrAppend(&list, " and ", data.sparse.size() - kNamesShown, " more");
  }
  return list;
}

}  // namespace

absl::StatusOr<std::vector<int>> SelectSparseFeatures(const Dataset& data,
                                                      const std::vector<std::string>& names,
                                                      const std::string& dir) {
  std::vector<int> columns;
  columns.reserve(names.size());
  for (const std::string& name : names) {
    const auto it = std::find_if(data.sparse.begin(), data.sparse.end(),
                                 [&](const SparseFeatureColumn& c) { return c.name == name; });
    if (it == data.sparse.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sparse feature \"", name, "\" is not in the examples of ", dir,
                       "; their sparse features are: ", FeatureList(data),
                       ". Name features the data has in the model's config, or pass another "
                       "--data_dir"));
    }
    columns.push_back(static_cast<int>(it - data.sparse.begin()));
  }
  return columns;
}

absl::Status CheckTabularShape(const Dataset& data, int64_t num_dense, const std::string& model,
                               const std::string& dir) {
  if (data.tabular && data.num_dense == num_dense) return absl::OkStatus();
  const std::string holds =
      data.tabular ? absl::StrCat("tabular examples with ", data.num_dense, " dense features")
                   : absl::StrCat(data.height, "x", data.width, "x", data.channels, " images");
  return absl::InvalidArgumentError(absl::StrCat(
      "model ", model, " takes tabular examples with ", num_dense, " dense features, but ", dir,
      " holds ", holds, "; pass --data_dir with data for this model, or another --model"));
}

}  // namespace pstrain
