#ifndef PSTRAIN_DATA_FORMATS_TABULAR_EXAMPLES_H_
#define PSTRAIN_DATA_FORMATS_TABULAR_EXAMPLES_H_

// Tabular examples (a label, dense features and sparse id or token features)
// from TFRecord files of tf.train.Example, read as TensorFlow's
// tf.io.parse_example reads them with this feature spec:
//
//   {"label": tf.io.FixedLenFeature([], tf.int64),
//    "dense": tf.io.FixedLenFeature([num_dense], tf.float32),
//    "user": tf.io.VarLenFeature(tf.int64),      # each sparse feature
//    "tokens": tf.io.VarLenFeature(tf.string)}
//
// Such files are written in Python like this:
//
//   import tensorflow as tf
//   def example(label, dense, user_ids, tokens):
//     f = tf.train.Feature
//     return tf.train.Example(features=tf.train.Features(feature={
//         "label": f(int64_list=tf.train.Int64List(value=[label])),
//         "dense": f(float_list=tf.train.FloatList(value=dense)),
//         "user": f(int64_list=tf.train.Int64List(value=user_ids)),
//         "tokens": f(bytes_list=tf.train.BytesList(
//             value=[t.encode() for t in tokens])),
//     }))
//   with tf.io.TFRecordWriter("train.tfrecords") as w:
//     w.write(example(1, [0.5, 2.0], [17], ["good", "day"]).SerializeToString())
//
// The rules, feature by feature:
//  - label: an int64_list (or float_list) of one value, 0 or 1 (or for a
//    model of more classes, a whole number in [0, num_classes)).
//  - dense: one float_list (or int64_list, converted to float) of exactly
//    num_dense values, in the order the model's input takes them. Not read
//    when num_dense is 0.
//  - each sparse feature: an int64_list of ids (SparseValueKind::kIds, kept
//    as they are: a negative id is read, and the model refuses it with its
//    own message) or a bytes_list of tokens (kTokens, each stored as the
//    FarmHash Fingerprint64 of exactly its bytes, data/feature_hash.h: what
//    tf.strings.to_hash_bucket_fast hashes). A float_list is refused: a
//    float belongs in "dense". A feature absent from an Example, or present
//    with no values, gives that example no values, as VarLenFeature does
//    (an embedding of no values is the combiner's zero). Its kind must be
//    the same in every Example that has it (as VarLenFeature's one dtype);
//    a feature no Example has is an empty kIds column.
//  - other features are ignored.
// The number of values per example is not limited here: limits are the
// model's to enforce.
//
// ReadTabularExamples and LoadTabularExamples read whole files into memory;
// data/stream/example_stream.h streams them.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "data/dataset.h"
#include "proto/example.pb.h"

namespace pstrain {

// The features a model reads from each tf.train.Example.
// A label feature and what it holds: `num_classes` 2 for a click (0 or 1),
// more for a classifier of tabular or token input (a whole number in [0,
// num_classes)), 0 for a regression head's label (a finite number).
struct TabularLabel {
  std::string name = "label";
  int num_classes = 2;
};

struct TabularFeatures {
  // One per head of the model, in its order (Dataset::label_width).
  std::vector<TabularLabel> labels = {TabularLabel{}};
  // One feature of num_dense values; ignored when num_dense is 0.
  std::string dense = "dense";
  int64_t num_dense = 0;
  // The sparse features, in the order of Dataset::sparse.
  std::vector<std::string> sparse;
};

// InvalidArgument for `features` that repeat a name or have an empty one, a
// negative num_dense, no label, or a label's num_classes 1 or negative.
absl::Status CheckTabularFeatures(const TabularFeatures& features);

// Turns serialized tf.train.Examples into tabular examples of `features`
// (checked by CheckTabularFeatures first), by the rules above; a sparse
// feature's kind is fixed by the first Example that has it, for as long as
// the parser lives. Not thread-safe.
class TabularExampleParser {
 public:
  explicit TabularExampleParser(const TabularFeatures& features);

  // Appends the Example in `record`; `where` ("file: record 7 (offset
  // 912)") begins every error: DataLoss for bytes that are not an Example,
  // InvalidArgument as ReadTabularExamples says. On an error nothing of the
  // record is appended.
  absl::Status AppendRecord(std::string_view record, const std::string& where);
  // Every record of a whole file (in memory), as ReadTabularExamples.
  absl::Status ReadFile(Env* env, const std::string& path);

  // The examples appended since the last Take (a tabular Dataset).
  Dataset Take();
  int64_t size() const { return data_.size(); }

 private:
  void Reset();
  absl::Status Append(const tf::Features& f, const std::string& where);
  absl::Status AppendLabel(const tf::Features& f, const TabularLabel& label,
                           const std::string& where);
  absl::Status AppendDense(const tf::Features& f, const std::string& where);
  absl::Status AppendSparse(const tf::Features& f, size_t c, const std::string& where);

  const TabularFeatures features_;
  tf::Example example_;
  Dataset data_;
  // Per sparse column: where its kind was fixed ("" while no Example had
  // it), and the kinds the columns had at the last Take.
  std::vector<std::string> first_seen_;
  std::vector<SparseValueKind> kinds_;
};

// Reads the TFRecord file at `path` as a tabular Dataset of `features`
// (tabular = true, num_dense, dense, labels, one sparse column per
// features.sparse in that order). Errors:
//  - DataLoss naming the file and offset: a damaged or cut-short record, or
//    one that is not a tf.train.Example;
//  - InvalidArgument naming the file, the record (0-based, and its offset)
//    and the feature, saying what the feature must hold: a missing or
//    mistyped label or dense feature, a dense feature with the wrong count,
//    a float_list sparse feature, a sparse feature whose kind differs from
//    an earlier Example's; also `features` that repeat a name, and a file
//    with no records;
//  - NotFound for a missing file.
absl::StatusOr<Dataset> ReadTabularExamples(Env* env, const std::string& path,
                                            const TabularFeatures& features);

// Reads the TFRecord files of `split` in `dir`, named as FindExampleFiles
// (data/formats/tfrecord_dataset.h) looks for them: train.tfrecords; eval.tfrecords
// or test.tfrecords. NotFound naming the names looked for when there are
// none; else the errors of ReadTabularExamples.
absl::StatusOr<Dataset> LoadTabularExamples(Env* env, const std::string& dir, Split split,
                                            const TabularFeatures& features);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_TABULAR_EXAMPLES_H_
