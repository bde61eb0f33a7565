#ifndef PSTRAIN_DATA_FORMATS_EXAMPLE_COLUMNS_H_
#define PSTRAIN_DATA_FORMATS_EXAMPLE_COLUMNS_H_

// tf.train.Examples as columns (one per feature, every example's values of
// it): written to TFRecord files from columns, and read back in pieces.
// What the Python module's pstrain.data.write_examples and read_examples do
// with NumPy arrays (python/).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "data/formats/record_stream.h"

namespace pstrain {

// One feature of `examples` examples: example i's values are
// [offsets[i], offsets[i + 1]) of the list of its kind (an int64_list,
// float_list or bytes_list); an example without values has no feature.
struct ExampleColumn {
  enum class Kind { kInt64, kFloat, kBytes };
  std::string name;
  Kind kind = Kind::kInt64;
  std::vector<int64_t> offsets = {0};
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> bytes;

  int64_t examples() const { return static_cast<int64_t>(offsets.size()) - 1; }
  int64_t values() const { return offsets.back(); }
};

// "int64", "float" or "bytes".
const char* ExampleKindName(ExampleColumn::Kind kind);

// InvalidArgument naming the column for columns that are not one set of
// examples: no column, an empty or repeated name, offsets that do not start
// at 0 and rise to the values' count, or columns of different lengths.
absl::Status CheckExampleColumns(const std::vector<ExampleColumn>& columns);

// Writes the columns' examples as TFRecord files of tf.train.Example, the
// features in the columns' order: with `shards` 1, the file `path`; with
// more, "<path>-00000-of-0000N.tfrecord" ... (".tfrecord.gz" when gzip'd),
// example i in shard i % N, one file open at a time. `gzip`: the files
// gzip'd (tf.data's compression_type="GZIP"). The files are
// AtomicWritableFiles committed together (CommitFiles): none is renamed into
// place before every one is whole and durable, and an error leaves none that
// looks whole. Returns the files. CheckExampleColumns' errors;
// InvalidArgument for shards outside [1, 99999], or a single file whose
// name does not say its compression (readers go by the name: a gzip'd file
// ends ".gz", a plain one does not); the Env's errors.
absl::StatusOr<std::vector<std::string>> WriteExampleColumns(
    Env* env, const std::string& path, const std::vector<ExampleColumn>& columns, int shards,
    bool gzip);

// Some examples as columns.
struct ExamplePiece {
  int64_t examples = 0;
  // Every feature an example of the piece has, in the order first seen (an
  // example's features by name); none when no example has one.
  std::vector<ExampleColumn> columns;
};

// Reads the Examples of TFRecord files (gzip'd when named .gz) in order, in
// pieces. A feature's kind is that of its first Example in the files. Not
// thread-safe.
class ExampleColumnReader {
 public:
  // The files `patterns` (comma-separated paths or globs, local or gs://)
  // names. NotFound for a pattern that matches no file.
  static absl::StatusOr<std::unique_ptr<ExampleColumnReader>> Open(Env* env,
                                                                   const std::string& patterns);

  // The next up to `n` examples; 0 examples at the end. DataLoss naming the
  // file and offset for a damaged record or one that is not an Example;
  // InvalidArgument for a feature whose kind differs from its first
  // Example's (naming both).
  absl::StatusOr<ExamplePiece> Next(int64_t n);

  const std::vector<std::string>& files() const { return files_; }

 private:
  ExampleColumnReader(Env* env, std::vector<std::string> files)
      : env_(env), files_(std::move(files)) {}

  Env* const env_;
  const std::vector<std::string> files_;
  size_t file_ = 0;
  std::unique_ptr<RecordStream> stream_;
  // Per feature: its kind and where it was first seen.
  std::map<std::string, std::pair<ExampleColumn::Kind, std::string>> kinds_;
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_EXAMPLE_COLUMNS_H_
