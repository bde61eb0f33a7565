#ifndef PSTRAIN_DATA_TABULAR_H_
#define PSTRAIN_DATA_TABULAR_H_

// Checks of a tabular Dataset (dense and sparse features, data/dataset.h)
// against what a model takes, with messages that say how to fix the run.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/dataset.h"

namespace pstrain {

// The index in data.sparse of the column of each of `names`, in the order of
// `names` (what BatchIterator::SetSparseFeatures takes). InvalidArgument for
// a name the data lacks, naming it, `dir` (where the data came from) and the
// features the data has (the first few, if there are many).
absl::StatusOr<std::vector<int>> SelectSparseFeatures(const Dataset& data,
                                                      const std::vector<std::string>& names,
                                                      const std::string& dir);

// InvalidArgument unless `data` is tabular with `num_dense` dense features,
// the input of `model`: "model dlrm takes tabular examples with 13 dense
// features, but DIR holds 28x28x1 images".
absl::Status CheckTabularShape(const Dataset& data, int64_t num_dense, const std::string& model,
                               const std::string& dir);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_TABULAR_H_
