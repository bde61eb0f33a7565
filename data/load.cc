#include "data/load.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/formats/cifar10.h"
#include "data/formats/criteo_dataset.h"
#include "data/formats/mnist.h"
#include "data/formats/tfrecord_dataset.h"

namespace pstrain {

absl::StatusOr<Dataset> LoadDataset(Env* env, const std::string& dir, Split split) {
  if (std::vector<std::string> files = FindExampleFiles(env, dir, split); !files.empty()) {
    return ReadExampleFiles(env, files);
  }
  const std::string cifar_first = split == Split::kTrain ? "data_batch_1.bin" : "test_batch.bin";
  if (env->FileExists(JoinPath(dir, cifar_first)) ||
      env->FileExists(JoinPath(JoinPath(dir, "cifar-10-batches-bin"), cifar_first))) {
    return LoadCifar10(env, dir, split);
  }
  absl::StatusOr<Dataset> mnist = LoadMnist(env, dir, split);
  if (!absl::IsNotFound(mnist.status())) return mnist;
  // Looked for last, so a directory that loaded as images before still does.
  if (std::string tsv = FindCriteoFile(env, dir, split); !tsv.empty()) {
    return ReadCriteoDataset(env, tsv);
  }
  return absl::NotFoundError(
      absl::StrCat(mnist.status().message(), "; nor TFRecord files (",
                   split == Split::kTrain ? "train.tfrecords" : "eval.tfrecords or test.tfrecords",
                   "), nor CIFAR-10 binary batches (", cifar_first, "), nor Criteo TSV (",
                   absl::StrJoin(CriteoFileNames(split), " or "), ")"));
}

absl::Status CheckExampleShape(const Dataset& dataset, int height, int width, int channels,
                               const std::string& model, const std::string& dir) {
  if (dataset.tabular) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", model, " takes ", height, "x", width, "x", channels, " images, but ", dir,
        " holds tabular examples (", dataset.num_dense, " dense and ", dataset.sparse.size(),
        " sparse features, e.g. Criteo TSV); pass --data_dir with images, or a model for "
        "tabular data"));
  }
  if (dataset.height == height && dataset.width == width && dataset.channels == channels) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model ", model, " takes ", height, "x", width, "x", channels, " images, but ",
                   dir, " holds ", dataset.height, "x", dataset.width, "x", dataset.channels,
                   " ones; pass --data_dir with data for this model, or another --model"));
}

}  // namespace pstrain
