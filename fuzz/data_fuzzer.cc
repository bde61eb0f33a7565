// The training-data readers, on files in memory: idx images + labels (raw or
// gzip), CIFAR-10 binary batches, and TFRecord files of tf.train.Examples,
// read both as images and as tabular examples. The first byte picks the
// reader; for idx the second byte says where the rest splits into the images
// and the labels file, for TFRecords how many dense features the tabular
// reader expects.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/env.h"
#include "data/formats/cifar10.h"
#include "data/formats/mnist.h"
#include "data/formats/tabular_examples.h"
#include "data/formats/tfrecord_dataset.h"

namespace {

void CheckShape(const absl::StatusOr<pstrain::Dataset>& d) {
  if (!d.ok()) return;
  const size_t image = static_cast<size_t>(d->height) * d->width * d->channels;
  if (d->labels.size() * image != d->images.size()) std::abort();
}

// Every column of a tabular dataset has one run of values per example.
void CheckTabular(const absl::StatusOr<pstrain::Dataset>& d, int64_t num_dense) {
  if (!d.ok()) return;
  const size_t n = d->labels.size();
  if (!d->tabular || d->num_dense != num_dense || d->dense.size() != n * num_dense) std::abort();
  for (float label : d->labels) {
    if (label != 0 && label != 1) std::abort();
  }
  for (const pstrain::SparseFeatureColumn& c : d->sparse) {
    if (c.offsets.size() != n + 1 || c.offsets[0] != 0 ||
        c.offsets.back() != static_cast<int64_t>(c.values.size())) {
      std::abort();
    }
    for (size_t i = 0; i < n; ++i) {
      if (c.offsets[i] > c.offsets[i + 1]) std::abort();
    }
  }
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
    default: {
      (void)env.WriteFileAtomic("/d/train.tfrecords", rest);
      CheckShape(pstrain::ReadExampleFiles(&env, {"/d/train.tfrecords"}));
      (void)pstrain::DescribeExampleFile(&env, "/d/train.tfrecords");
      pstrain::TabularFeatures features;
      features.num_dense = data[1] % 4;
      features.sparse = {"user", "tokens", "image_raw"};
      CheckTabular(pstrain::ReadTabularExamples(&env, "/d/train.tfrecords", features),
                   features.num_dense);
    }
  }
  return 0;
}
