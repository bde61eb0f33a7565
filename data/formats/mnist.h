#ifndef PSTRAIN_DATA_FORMATS_MNIST_H_
#define PSTRAIN_DATA_FORMATS_MNIST_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "data/dataset.h"

namespace pstrain {

// Where Debian's `dataset-fashion-mnist` package installs the real
// Fashion-MNIST; the default data directory.
inline constexpr char kDefaultFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// Reads an idx3 images file and its idx1 labels file (format in
// data/formats/idx_format.h), each either gzip-compressed (detected by content, not by
// name) or raw. The result is height = rows, width = cols, channels = 1.
//
// Errors name the file and the problem: NotFound for a missing file,
// InvalidArgument for a wrong magic number, image/label count mismatch or a
// label outside [0, 9]; DataLoss for truncated or corrupt contents.
absl::StatusOr<Dataset> ReadIdx(Env* env, const std::string& images_path,
                                const std::string& labels_path);

// Loads the MNIST or Fashion-MNIST `split` from `dir`: the files
// {train,t10k}-{images-idx3,labels-idx1}-ubyte, each found as ".gz" or
// uncompressed. When both exist the ".gz" one is read, because an interrupted
// `gunzip` leaves a truncated raw file next to the intact archive. A missing
// file is NotFound naming the directory and the names looked for.
absl::StatusOr<Dataset> LoadMnist(Env* env, const std::string& dir, Split split);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_MNIST_H_
