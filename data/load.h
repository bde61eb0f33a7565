#ifndef PSTRAIN_DATA_LOAD_H_
#define PSTRAIN_DATA_LOAD_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "data/dataset.h"

namespace pstrain {

// Loads `split` from `dir`, in whichever format it holds, looked for in this
// order: TFRecord files of tf.train.Example (train.tfrecords;
// eval.tfrecords or test.tfrecords), CIFAR-10 binary batches
// (data_batch_1..5.bin, test_batch.bin, also under cifar-10-batches-bin/),
// MNIST idx files (gzip or raw), Criteo TSV click logs (train.tsv; test.tsv or
// eval.tsv) as tabular examples (data/formats/criteo_dataset.h). NotFound naming what
// was looked for when the directory holds none of them. TFRecord files are
// read as images here; tabular Examples need the model's feature names and
// are read by LoadTabularExamples (data/formats/tabular_examples.h).
absl::StatusOr<Dataset> LoadDataset(Env* env, const std::string& dir, Split split);

// InvalidArgument unless `dataset`'s examples are height x width x channels,
// the input of `model`: "model cifar10_resnet takes 32x32x3 images, but DIR
// holds 28x28x1 ones"; also for tabular data (data/tabular.h checks that).
absl::Status CheckExampleShape(const Dataset& dataset, int height, int width, int channels,
                               const std::string& model, const std::string& dir);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_LOAD_H_
