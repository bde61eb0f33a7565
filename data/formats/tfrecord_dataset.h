#ifndef PSTRAIN_DATA_FORMATS_TFRECORD_DATASET_H_
#define PSTRAIN_DATA_FORMATS_TFRECORD_DATASET_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "data/dataset.h"

namespace pstrain {

// The two tf.train.Example layouts users bring, and pstrain-data writes:
//  - kCifar10, as the CIFAR-10 estimator's generate_cifar10_tfrecords.py:
//    "image" (bytes: the 3072 pixels in CIFAR's CHW order) and "label"
//    (int64);
//  - kMnist, as TensorFlow's convert_to_records.py and Cloud ML Engine's
//    create_records.py: "image_raw" (bytes: uint8 pixels, HWC), "label",
//    "height", "width", "depth" (int64).
enum class ExampleLayout { kCifar10, kMnist };

// Example `index` of `dataset` (HWC uint8) serialized in `layout`.
std::string EncodeExample(const Dataset& dataset, int64_t index, ExampleLayout layout);

// Writes every example of `dataset` to a TFRecord file at `path`, an
// AtomicWritableFile: a crash leaves no half-written file.
absl::Status WriteExampleFile(Env* env, const std::string& path, const Dataset& dataset,
                              ExampleLayout layout);

// Reads TFRecord files of tf.train.Example in either layout (recognized by
// the feature names; "height"/"width"/"depth" give the shape when present,
// else 3072 bytes are a 32x32x3 CHW image and 784 a 28x28x1 one) and
// concatenates them, pixels as HWC. Errors name the file and the record's
// offset: DataLoss for a damaged record or one that is not an Example,
// InvalidArgument for a missing or mistyped feature, an image of the wrong
// size or shape, or a label outside [0, 9]; NotFound for a missing file.
absl::StatusOr<Dataset> ReadExampleFiles(Env* env, const std::vector<std::string>& paths);

// A summary of any TFRecord file of tf.train.Example: the record count and
// every feature's name, type and value counts (min..max over records);
// DataLoss naming the offset of a damaged record.
absl::StatusOr<std::string> DescribeExampleFile(Env* env, const std::string& path);

// The TFRecord files of `split` in `dir`, as the two scripts name them:
// train.tfrecords for kTrain; eval.tfrecords (CIFAR-10 estimator) or
// test.tfrecords (MNIST) for kTest. Empty if there are none.
std::vector<std::string> FindExampleFiles(Env* env, const std::string& dir, Split split);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_TFRECORD_DATASET_H_
