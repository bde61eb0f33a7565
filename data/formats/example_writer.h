#ifndef PSTRAIN_DATA_FORMATS_EXAMPLE_WRITER_H_
#define PSTRAIN_DATA_FORMATS_EXAMPLE_WRITER_H_

// Tabular examples written as sharded, gzip'd TFRecord files of
// tf.train.Example, in the layout TabularExampleParser reads back
// (data/formats/tabular_examples.h): what `pstrain-data convert` makes of Criteo TSV
// and CSV, so that a job streams them as TFRecords (tf.data's
// TFRecordDataset(..., compression_type="GZIP") reads them too).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "data/dataset.h"
#include "data/formats/criteo.h"
#include "data/formats/gzip.h"

namespace pstrain {

// Writes <prefix>-00000-of-0000N.tfrecord.gz ... : example i (counted from
// the first Add) goes to shard i % N, so the shards differ by at most one
// example. The shards are AtomicWritableFiles committed together at Close
// (CommitFiles): none is visible before every one is whole and durable, and
// a conversion that fails or is abandoned (destroyed before Close) leaves
// no file that looks whole. Not thread-safe.
class ShardedExampleWriter {
 public:
  // InvalidArgument for shards outside [1, 99999]; the Env's errors.
  static absl::StatusOr<std::unique_ptr<ShardedExampleWriter>> Create(Env* env,
                                                                      const std::string& prefix,
                                                                      int shards);
  ~ShardedExampleWriter() = default;  // not closed: the shards' temp files are deleted

  // Appends one serialized tf.train.Example.
  absl::Status Add(std::string_view example);
  // Finishes every shard and commits them together.
  absl::Status Close();

  const std::vector<std::string>& paths() const { return paths_; }
  int64_t examples() const { return examples_; }

 private:
  struct Shard {
    std::unique_ptr<AtomicWritableFile> file;
    std::unique_ptr<GzipWriter> zipped;  // into `file`, so destroyed first
  };
  ShardedExampleWriter(std::vector<std::string> paths, std::vector<Shard> shards)
      : paths_(std::move(paths)), shards_(std::move(shards)) {}

  const std::vector<std::string> paths_;
  std::vector<Shard> shards_;
  int64_t examples_ = 0;
};

// Example `i` of the tabular dataset `data` as a serialized tf.train.Example:
// its labels under `label_names` (one per label; "label" for a single-head
// model's), each (an int64 class id, or with `float_label` a float, a regression
// head's value: one type for all the examples of a file, as
// tf.io.FixedLenFeature reads one), "dense" (num_dense floats, when there are
// any) and each sparse column as an int64_list under its name (none for an
// example without values). InvalidArgument for a column of kTokens (only the
// strings' fingerprints are left, which an Example cannot carry as strings)
// and for an int64 label that is not a whole number >= 0.
absl::StatusOr<std::string> EncodeTabularExample(const Dataset& data, int64_t i,
                                                 bool float_label = false,
                                                 const std::vector<std::string>& label_names = {
                                                     "label"});

// Row `row` of a Criteo batch as a serialized tf.train.Example: "label",
// "dense" (the 13 counts through CriteoLog1p, as training from the TSV
// takes them) and C1..C26 as bytes_lists of the 8 hex digits (none when
// missing), so that training from the Examples hashes the same tokens.
std::string EncodeCriteoExample(const CriteoBatch& batch, int64_t row);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_EXAMPLE_WRITER_H_
