// The training-data readers, on files in memory: idx images + labels (raw or
// gzip), CIFAR-10 binary batches, and TFRecord files of tf.train.Examples.
// The first byte picks the reader; for idx the second byte says where the
// rest splits into the images and the labels file.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/env.h"
#include "data/cifar10.h"
#include "data/mnist.h"
#include "data/tfrecord_dataset.h"

namespace {

void CheckShape(const absl::StatusOr<pstrain::Dataset>& d) {
  if (!d.ok()) return;
  const size_t image = static_cast<size_t>(d->height) * d->width * d->channels;
  if (d->labels.size() * image != d->images.size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  pstrain::MemEnv env;
  switch (data[0] % 3) {
    case 0: {
      const size_t cut = rest.size() * data[1] / 255;
      (void)env.WriteFileAtomic("/d/images", rest.substr(0, cut));
      (void)env.WriteFileAtomic("/d/labels", rest.substr(cut));
      CheckShape(pstrain::ReadIdx(&env, "/d/images", "/d/labels"));
      break;
    }
    case 1:
      (void)env.WriteFileAtomic("/d/data_batch_1.bin", rest);
      CheckShape(pstrain::ReadCifar10Files(&env, {"/d/data_batch_1.bin"}));
      break;
    default:
      (void)env.WriteFileAtomic("/d/train.tfrecords", rest);
      CheckShape(pstrain::ReadExampleFiles(&env, {"/d/train.tfrecords"}));
      (void)pstrain::DescribeExampleFile(&env, "/d/train.tfrecords");
  }
  return 0;
}
