#ifndef PSTRAIN_DATA_FORMATS_CIFAR10_H_
#define PSTRAIN_DATA_FORMATS_CIFAR10_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "data/dataset.h"

namespace pstrain {

// Reads CIFAR-10 binary batch files (format in data/formats/cifar10_format.h) and
// concatenates their records in the order given. Pixels are converted from the
// files' CHW order to HWC; the result is 32x32x3. A file may also be
// gzip-compressed.
//
// Errors name the file and the problem: NotFound for a missing file,
// DataLoss for a size that is not a whole number of 3073-byte records (or an
// empty file), InvalidArgument for a label outside [0, 9] or no paths.
absl::StatusOr<Dataset> ReadCifar10Files(Env* env, const std::vector<std::string>& paths);

// Loads the CIFAR-10 `split` from `dir`: data_batch_1.bin .. data_batch_5.bin
// for kTrain, test_batch.bin for kTest. The files are looked for in `dir` and,
// failing that, in `dir`/cifar-10-batches-bin (where the official tarball
// unpacks). A missing file is NotFound naming where it looked.
absl::StatusOr<Dataset> LoadCifar10(Env* env, const std::string& dir, Split split);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_CIFAR10_H_
