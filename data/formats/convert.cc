#include "data/formats/convert.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/formats/cifar10.h"
#include "data/formats/mnist.h"
#include "data/formats/tfrecord_dataset.h"

namespace pstrain {
namespace {

absl::Status WriteOne(Env* env, const std::string& path, const Dataset& data, ExampleLayout layout,
                      const std::function<void(const std::string&)>& progress,
                      std::vector<ConvertedFile>* out) {
  PSTRAIN_RETURN_IF_ERROR(WriteExampleFile(env, path, data, layout));
  out->push_back({path, data.size()});
  if (progress) progress(absl::StrCat("wrote ", path, ": ", data.size(), " examples"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<ConvertedFile>> ConvertToTfRecords(
    Env* env, const std::string& in_dir, const std::string& out_dir,
    const std::function<void(const std::string&)>& progress) {
  std::vector<ConvertedFile> out;
  std::string cifar_dir;
  for (const std::string& d : {in_dir, JoinPath(in_dir, "cifar-10-batches-bin")}) {
    if (env->FileExists(JoinPath(d, "data_batch_1.bin"))) cifar_dir = d;
  }
  PSTRAIN_RETURN_IF_ERROR(env->CreateDirs(out_dir));
  if (!cifar_dir.empty()) {
    std::vector<std::string> train;
    for (int i = 1; i <= 4; ++i) {
      train.push_back(JoinPath(cifar_dir, absl::StrCat("data_batch_", i, ".bin")));
    }
    const std::vector<std::pair<std::string, std::vector<std::string>>> splits = {
        {"train.tfrecords", train},
        {"validation.tfrecords", {JoinPath(cifar_dir, "data_batch_5.bin")}},
        {"eval.tfrecords", {JoinPath(cifar_dir, "test_batch.bin")}}};
    for (const auto& [name, files] : splits) {
      PSTRAIN_ASSIGN_OR_RETURN(Dataset data, ReadCifar10Files(env, files));
      PSTRAIN_RETURN_IF_ERROR(
          WriteOne(env, JoinPath(out_dir, name), data, ExampleLayout::kCifar10, progress, &out));
    }
    return out;
  }
  absl::StatusOr<Dataset> train = LoadMnist(env, in_dir, Split::kTrain);
  if (absl::IsNotFound(train.status())) {
    return absl::NotFoundError(absl::StrCat(
        "nothing to convert in ", in_dir,
        ": it holds neither CIFAR-10 binary batches (data_batch_1.bin ...) nor MNIST idx files (",
        train.status().message(), ")"));
  }
  PSTRAIN_RETURN_IF_ERROR(train.status());
  PSTRAIN_RETURN_IF_ERROR(WriteOne(env, JoinPath(out_dir, "train.tfrecords"), *train,
                                   ExampleLayout::kMnist, progress, &out));
  PSTRAIN_ASSIGN_OR_RETURN(Dataset test, LoadMnist(env, in_dir, Split::kTest));
  PSTRAIN_RETURN_IF_ERROR(WriteOne(env, JoinPath(out_dir, "test.tfrecords"), test,
                                   ExampleLayout::kMnist, progress, &out));
  return out;
}

}  // namespace pstrain
