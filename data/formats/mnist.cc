#include "data/formats/mnist.h"

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "data/formats/gzip.h"
#include "data/formats/idx_format.h"

namespace pstrain {
namespace {

// Images wider or taller than this are not plausible idx data; the bound also
// keeps height * width * channels within int64 and the dimensions within int.
constexpr uint32_t kMaxSide = 1 << 15;

uint32_t ReadBigEndian32(std::string_view bytes, size_t offset) {
  auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(bytes[offset + i])); };
  return (b(0) << 24) | (b(1) << 16) | (b(2) << 8) | b(3);
}

std::string Hex32(uint32_t value) { return absl::StrCat("0x", absl::Hex(value, absl::kZeroPad8)); }

// Reads `path` through `env`, decompressing it if it is gzip.
absl::StatusOr<std::string> ReadMaybeCompressed(Env* env, const std::string& path) {
  absl::StatusOr<std::string> contents = env->ReadFile(path);
  if (!contents.ok()) {
    if (absl::IsNotFound(contents.status())) {
      return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    }
    return contents.status();
  }
  return MaybeGunzip(*std::move(contents), path);
}

absl::Status CheckHeader(std::string_view contents, const std::string& path, size_t header_size,
                         uint32_t magic, const char* what) {
  // The magic is checked first when present, so a wrong file (say, labels
  // passed as images) is reported as such even when it is short.
  if (contents.size() >= 4) {
    uint32_t actual = ReadBigEndian32(contents, 0);
    if (actual != magic) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": bad magic ", Hex32(actual),
                                                     ", expected ", Hex32(magic), " (", what,
                                                     "); is this the right file?"));
    }
  }
  if (contents.size() < header_size) {
    return absl::DataLossError(absl::StrCat(path, ": truncated header (", contents.size(),
                                            " bytes, an ", what, " header has ", header_size,
                                            "); the file is incomplete"));
  }
  return absl::OkStatus();
}

// Checks that exactly `expected` bytes follow the header.
absl::Status CheckBodySize(std::string_view contents, const std::string& path, size_t header_size,
                           uint64_t expected, const char* what) {
  uint64_t actual = contents.size() - header_size;
  if (actual < expected) {
    return absl::DataLossError(absl::StrCat(path, ": truncated ", what, " (", actual,
                                            " bytes, the header promises ", expected,
                                            "); the file is incomplete"));
  }
  if (actual > expected) {
    return absl::DataLossError(absl::StrCat(path, ": ", actual - expected,
                                            " unexpected bytes after the ", expected, " bytes of ",
                                            what, " the header promises"));
  }
  return absl::OkStatus();
}

absl::Status ParseImages(std::string_view contents, const std::string& path, Dataset* dataset) {
  PSTRAIN_RETURN_IF_ERROR(
      CheckHeader(contents, path, idx::kImagesHeaderSize, idx::kImagesMagic, "idx3 images"));
  uint32_t count = ReadBigEndian32(contents, 4);
  uint32_t rows = ReadBigEndian32(contents, 8);
  uint32_t cols = ReadBigEndian32(contents, 12);
  if (rows == 0 || cols == 0 || rows > kMaxSide || cols > kMaxSide) {
    return absl::DataLossError(absl::StrCat(path, ": implausible image size ", rows, "x", cols,
                                            " in the header; the file is corrupt"));
  }
  // count < 2^32 and rows * cols <= 2^30, so the product fits in uint64.
  uint64_t pixels = uint64_t{count} * rows * cols;
  PSTRAIN_RETURN_IF_ERROR(CheckBodySize(contents, path, idx::kImagesHeaderSize, pixels, "pixels"));
  dataset->height = static_cast<int>(rows);
  dataset->width = static_cast<int>(cols);
  dataset->channels = 1;
  dataset->images.assign(contents.begin() + idx::kImagesHeaderSize, contents.end());
  return absl::OkStatus();
}

absl::Status ParseLabels(std::string_view contents, const std::string& path, Dataset* dataset) {
  PSTRAIN_RETURN_IF_ERROR(
      CheckHeader(contents, path, idx::kLabelsHeaderSize, idx::kLabelsMagic, "idx1 labels"));
  uint32_t count = ReadBigEndian32(contents, 4);
  PSTRAIN_RETURN_IF_ERROR(CheckBodySize(contents, path, idx::kLabelsHeaderSize, count, "labels"));
  dataset->labels.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    auto label = static_cast<uint8_t>(contents[idx::kLabelsHeaderSize + i]);
    if (label >= idx::kNumClasses) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": label ", int{label}, " at index ", i,
                                                     " is outside [0, ", idx::kNumClasses - 1,
                                                     "]; the file is corrupt or not MNIST"));
    }
    dataset->labels[i] = label;
  }
  return absl::OkStatus();
}

// The first of `names` that exists in `dir`, as a path.
absl::StatusOr<std::string> FindFirst(Env* env, const std::string& dir,
                                      const std::vector<std::string>& names, const char* what,
                                      Split split) {
  for (const std::string& name : names) {
    std::string path = JoinPath(dir, name);
    if (env->FileExists(path)) return path;
  }
  std::string hint = dir == kDefaultFashionMnistDir
                         ? "install Fashion-MNIST with `apt-get install dataset-fashion-mnist`, "
                           "or pass --data_dir=<directory holding the idx files>"
                         : "pass --data_dir=<directory holding the idx files>";
  return absl::NotFoundError(absl::StrCat("no MNIST ", SplitName(split), " ", what, " in ", dir,
                                          env->FileExists(dir) ? "" : " (no such directory)",
                                          ": looked for ", absl::StrJoin(names, ", "), "; ", hint));
}

}  // namespace

absl::StatusOr<Dataset> ReadIdx(Env* env, const std::string& images_path,
                                const std::string& labels_path) {
  Dataset dataset;
  {
    // Scoped so the decompressed file is freed before the labels are read.
    PSTRAIN_ASSIGN_OR_RETURN(std::string images, ReadMaybeCompressed(env, images_path));
    PSTRAIN_RETURN_IF_ERROR(ParseImages(images, images_path, &dataset));
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::string labels, ReadMaybeCompressed(env, labels_path));
  PSTRAIN_RETURN_IF_ERROR(ParseLabels(labels, labels_path, &dataset));

  int64_t num_images = static_cast<int64_t>(dataset.images.size()) / dataset.example_size();
  if (num_images != dataset.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        images_path, " holds ", num_images, " images but ", labels_path, " holds ", dataset.size(),
        " labels; they must come from the same split of the same dataset"));
  }
  return dataset;
}

absl::StatusOr<Dataset> LoadMnist(Env* env, const std::string& dir, Split split) {
  std::string prefix = split == Split::kTrain ? idx::kTrainPrefix : idx::kTestPrefix;
  std::string images = absl::StrCat(prefix, idx::kImagesSuffix);
  std::string labels = absl::StrCat(prefix, idx::kLabelsSuffix);
  // ".gz" first: an interrupted gunzip leaves a truncated raw file beside it.
  PSTRAIN_ASSIGN_OR_RETURN(
      std::string images_path,
      FindFirst(env, dir, {absl::StrCat(images, ".gz"), images}, "images", split));
  PSTRAIN_ASSIGN_OR_RETURN(
      std::string labels_path,
      FindFirst(env, dir, {absl::StrCat(labels, ".gz"), labels}, "labels", split));
  return ReadIdx(env, images_path, labels_path);
}

}  // namespace pstrain
