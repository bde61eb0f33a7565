#ifndef PSTRAIN_DATA_FORMATS_CONVERT_H_
#define PSTRAIN_DATA_FORMATS_CONVERT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace pstrain {

struct ConvertedFile {
  std::string path;
  int64_t examples = 0;
};

// Converts the data in `in_dir` to TFRecord files of tf.train.Example in
// `out_dir` (created if needed), laid out as the TensorFlow scripts users
// already have write them:
//  - CIFAR-10 binary batches, as generate_cifar10_tfrecords.py:
//    train.tfrecords (data_batch_1..4), validation.tfrecords (data_batch_5),
//    eval.tfrecords (test_batch), each Example "image" (CHW bytes) + "label";
//  - MNIST idx files, as create_records.py: train.tfrecords and
//    test.tfrecords, each Example "image_raw" (HWC bytes), "label",
//    "height", "width", "depth".
// `progress` (if set) hears one line per file written.
absl::StatusOr<std::vector<ConvertedFile>> ConvertToTfRecords(
    Env* env, const std::string& in_dir, const std::string& out_dir,
    const std::function<void(const std::string&)>& progress = nullptr);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_CONVERT_H_
