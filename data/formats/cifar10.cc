#include "data/formats/cifar10.h"

#include <cstdint>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "data/formats/cifar10_format.h"
#include "data/formats/gzip.h"

namespace pstrain {
namespace {

std::vector<std::string> BatchNames(Split split) {
  if (split == Split::kTest) return {cifar10::kTestBatch};
  std::vector<std::string> names;
  for (int i = 1; i <= cifar10::kNumTrainBatches; ++i) {
    names.push_back(absl::StrCat(cifar10::kTrainBatchPrefix, i, ".bin"));
  }
  return names;
}

// Appends the records of one batch file to `dataset`.
absl::Status AppendFile(std::string_view contents, const std::string& path, Dataset* dataset) {
  if (contents.empty()) {
    return absl::DataLossError(absl::StrCat(path, ": empty file; download it again"));
  }
  if (contents.size() % cifar10::kRecordSize != 0) {
    return absl::DataLossError(absl::StrCat(
        path, ": size ", contents.size(), " is not a multiple of the ", cifar10::kRecordSize,
        "-byte CIFAR-10 record (", contents.size() / cifar10::kRecordSize, " records and ",
        contents.size() % cifar10::kRecordSize,
        " extra bytes); the file is truncated or not a CIFAR-10 binary batch"));
  }
  const size_t num_records = contents.size() / cifar10::kRecordSize;
  const size_t first_image = dataset->labels.size();
  dataset->labels.resize(first_image + num_records);
  dataset->images.resize((first_image + num_records) * cifar10::kImageSize);
  for (size_t r = 0; r < num_records; ++r) {
    const auto* record =
        reinterpret_cast<const uint8_t*>(contents.data()) + r * cifar10::kRecordSize;
    if (record[0] >= cifar10::kNumClasses) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": label ", int{record[0]}, " of record ", r, " (byte offset ",
                       r * cifar10::kRecordSize, ") is outside [0, ", cifar10::kNumClasses - 1,
                       "]; the file is corrupt or not CIFAR-10 (CIFAR-100 is not supported)"));
    }
    dataset->labels[first_image + r] = record[0];
    const uint8_t* planes = record + 1;
    uint8_t* hwc = dataset->images.data() + (first_image + r) * cifar10::kImageSize;
    for (int p = 0; p < cifar10::kPlaneSize; ++p) {
      for (int c = 0; c < cifar10::kChannels; ++c) {
        hwc[p * cifar10::kChannels + c] = planes[c * cifar10::kPlaneSize + p];
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Dataset> ReadCifar10Files(Env* env, const std::vector<std::string>& paths) {
  if (paths.empty()) {
    return absl::InvalidArgumentError("no CIFAR-10 batch files to read");
  }
  Dataset dataset;
  dataset.height = cifar10::kHeight;
  dataset.width = cifar10::kWidth;
  dataset.channels = cifar10::kChannels;
  for (const std::string& path : paths) {
    absl::StatusOr<std::string> contents = env->ReadFile(path);
    if (!contents.ok()) {
      if (absl::IsNotFound(contents.status())) {
        return absl::NotFoundError(absl::StrCat(path, ": no such file"));
      }
      return contents.status();
    }
    PSTRAIN_ASSIGN_OR_RETURN(std::string raw, MaybeGunzip(*std::move(contents), path));
    PSTRAIN_RETURN_IF_ERROR(AppendFile(raw, path, &dataset));
  }
  return dataset;
}

absl::StatusOr<Dataset> LoadCifar10(Env* env, const std::string& dir, Split split) {
  const std::vector<std::string> names = BatchNames(split);
  // The directory holding the first batch is where all of them must be, so a
  // missing later batch is reported as missing rather than silently skipped.
  const std::string subdir = JoinPath(dir, cifar10::kSubdir);
  std::string found_dir;
  for (const std::string& candidate : {dir, subdir}) {
    if (env->FileExists(JoinPath(candidate, names.front()))) {
      found_dir = candidate;
      break;
    }
  }
  if (found_dir.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no CIFAR-10 ", SplitName(split), " data in ", dir,
        env->FileExists(dir) ? "" : " (no such directory)", " or ", subdir, ": looked for ",
        absl::StrJoin(names, ", "),
        "; download cifar-10-binary.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html, "
        "unpack it, and pass --data_dir=<the directory holding it>"));
  }
  std::vector<std::string> paths;
  for (const std::string& name : names) paths.push_back(JoinPath(found_dir, name));
  return ReadCifar10Files(env, paths);
}

}  // namespace pstrain
