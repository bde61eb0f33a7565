#ifndef PSTRAIN_TESTING_DATA_TEST_UTIL_H_
#define PSTRAIN_TESTING_DATA_TEST_UTIL_H_

// Writers for the data formats, for tests only: they build small files byte
// by byte from the format headers, independently of the readers under test.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/dataset.h"
#include "data/sparse_features.h"

namespace pstrain {
namespace testutil {

// Compresses `data` as a gzip file (header, deflate stream, CRC-32 trailer).
std::string Gzip(std::string_view data);

// An idx3 images file of `count` rows x cols images holding `pixels`
// (count * rows * cols bytes).
std::string IdxImages(uint32_t count, uint32_t rows, uint32_t cols,
                      const std::vector<uint8_t>& pixels);

// An idx1 labels file.
std::string IdxLabels(const std::vector<uint8_t>& labels);

// Pixel value of example `i` at byte `j`, a pattern that differs between
// examples and positions.
uint8_t PatternPixel(int64_t i, int64_t j);

// A dataset of `n` h x w x c examples; example i has PatternPixel(i, j)
// pixels and label i (not a class, so tests can tell examples apart).
Dataset MakeDataset(int64_t n, int h, int w, int c);

// A serialized tf.train.Example whose "dense" feature is its id and whose
// "ids" feature holds the id and id + 1; "label" id % 2.
std::string ExampleWithId(int64_t id);

// `files` TFRecord files (gzip'd: .tfrecord.gz) of `per_file` ExampleWithId
// examples in `dir`, ids numbered across them: their paths.
std::vector<std::string> WriteExampleFiles(const std::string& dir, int files, int per_file,
                                           bool gzip);

// The values of example `i` in a sparse column, in order.
std::vector<uint64_t> ValuesOf(const SparseFeatureColumn& column, int64_t i);

}  // namespace testutil
}  // namespace pstrain

#endif  // PSTRAIN_TESTING_DATA_TEST_UTIL_H_
