#include "data/formats/tfrecord_dataset.h"

#include <algorithm>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/record_reader.h"
#include "common/record_writer.h"
#include "common/status_macros.h"
#include "data/formats/record_stream.h"
#include "proto/example.pb.h"

namespace pstrain {
namespace {

void SetInt64(tf::Features* features, const std::string& name, int64_t value) {
  (*features->mutable_feature())[name].mutable_int64_list()->add_value(value);
}

void SetBytes(tf::Features* features, const std::string& name, std::string value) {
  (*features->mutable_feature())[name].mutable_bytes_list()->add_value(std::move(value));
}

// The one int64 of feature `name`, or `fallback` if absent (when allowed).
absl::StatusOr<int64_t> GetInt64(const tf::Features& features, const std::string& name,
                                 const std::string& where, std::optional<int64_t> fallback) {
  auto it = features.feature().find(name);
  if (it == features.feature().end()) {
    if (fallback) return *fallback;
    return absl::InvalidArgumentError(absl::StrCat(where, " has no \"", name, "\" feature"));
  }
  if (!it->second.has_int64_list() || it->second.int64_list().value_size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": feature \"", name, "\" is not a single int64"));
  }
  return it->second.int64_list().value(0);
}

// HWC from CHW, for 3-channel CIFAR layouts.
void ChwToHwc(const std::string& chw, int64_t h, int64_t w, int64_t c, uint8_t* hwc) {
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        hwc[(y * w + x) * c + ch] = static_cast<uint8_t>(chw[(ch * h + y) * w + x]);
      }
    }
  }
}

// Appends one Example to `dataset` (whose shape the first one fixes).
absl::Status AppendExample(const tf::Example& example, const std::string& where, Dataset* dataset) {
  const tf::Features& f = example.features();
  const bool cifar = f.feature().contains("image");
  const std::string image_name = cifar ? "image" : "image_raw";
  auto image = f.feature().find(image_name);
  if (image == f.feature().end()) {
    std::vector<std::string> names;
    for (const auto& [name, feature] : f.feature()) names.push_back(name);
    std::sort(names.begin(), names.end());
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        " has neither an \"image\" (CIFAR-10) nor an \"image_raw\" (MNIST) feature; features: ",
        absl::StrJoin(names, ", ")));
  }
  if (!image->second.has_bytes_list() || image->second.bytes_list().value_size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": feature \"", image_name, "\" is not a single bytes value"));
  }
  const std::string& pixels = image->second.bytes_list().value(0);
  // The shape: the features when present, else what the byte count implies.
  std::optional<int64_t> h, w, c;
  if (pixels.size() == 3072) h = 32, w = 32, c = 3;
  if (pixels.size() == 784) h = 28, w = 28, c = 1;
  PSTRAIN_ASSIGN_OR_RETURN(int64_t height, GetInt64(f, "height", where, h));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t width, GetInt64(f, "width", where, w));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t depth, GetInt64(f, "depth", where, c));
  if (height <= 0 || width <= 0 || depth <= 0 || height > 4096 || width > 4096 || depth > 4 ||
      static_cast<int64_t>(pixels.size()) != height * width * depth) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": feature \"", image_name, "\" holds ", pixels.size(), " bytes, not a ", height,
        "x", width, "x", depth,
        " uint8 image (float pixels are not supported; write the images as uint8 bytes)"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(int64_t label, GetInt64(f, "label", where, std::nullopt));
  if (label < 0 || label > 9) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": label ", label, " is outside [0, 9]"));
  }
  if (dataset->size() == 0) {
    dataset->height = static_cast<int>(height);
    dataset->width = static_cast<int>(width);
    dataset->channels = static_cast<int>(depth);
  } else if (dataset->height != height || dataset->width != width || dataset->channels != depth) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": a ", height, "x", width, "x", depth, " image after ",
                     dataset->height, "x", dataset->width, "x", dataset->channels, " ones"));
  }
  const size_t at = dataset->images.size();
  dataset->images.resize(at + pixels.size());
  if (cifar) {
    ChwToHwc(pixels, height, width, depth, dataset->images.data() + at);
  } else {
    std::copy(pixels.begin(), pixels.end(), dataset->images.begin() + at);
  }
  dataset->labels.push_back(static_cast<float>(label));
  return absl::OkStatus();
}

// Calls fn(example, "PATH: record at offset N") for every record of `path`.
// DataLoss for a damaged record or one that is not an Example.
template <typename Fn>
absl::Status ForEachExample(Env* env, const std::string& path, Fn&& fn) {
  // Read in pieces, gzip'd when the name ends .gz.
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<RecordStream> reader,
      RecordStream::Open(env, path, Compression::kAuto, RecordFraming::kTfRecord));
  tf::Example example;
  while (true) {
    const uint64_t offset = reader->offset();
    absl::StatusOr<std::string_view> record = reader->Next();
    if (absl::IsOutOfRange(record.status())) return absl::OkStatus();
    PSTRAIN_RETURN_IF_ERROR(record.status());
    const std::string where = absl::StrCat(path, ": record at offset ", offset);
    if (!example.ParseFromArray(record->data(), static_cast<int>(record->size()))) {
      return absl::DataLossError(absl::StrCat(where, " is not a tf.train.Example"));
    }
    PSTRAIN_RETURN_IF_ERROR(fn(example, where));
  }
}

}  // namespace

std::string EncodeExample(const Dataset& dataset, int64_t index, ExampleLayout layout) {
  const int64_t size = dataset.example_size();
  const uint8_t* hwc = dataset.images.data() + index * size;
  tf::Example example;
  tf::Features* f = example.mutable_features();
  if (layout == ExampleLayout::kCifar10) {
    std::string chw(size, '\0');
    const int64_t h = dataset.height, w = dataset.width, c = dataset.channels;
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t y = 0; y < h; ++y) {
        for (int64_t x = 0; x < w; ++x) {
          chw[(ch * h + y) * w + x] = static_cast<char>(hwc[(y * w + x) * c + ch]);
        }
      }
    }
    SetBytes(f, "image", std::move(chw));
  } else {
    SetInt64(f, "height", dataset.height);
    SetInt64(f, "width", dataset.width);
    SetInt64(f, "depth", dataset.channels);
    SetBytes(f, "image_raw", std::string(reinterpret_cast<const char*>(hwc), size));
  }
  SetInt64(f, "label", static_cast<int64_t>(dataset.labels[index]));
  return example.SerializeAsString();
}

absl::Status WriteExampleFile(Env* env, const std::string& path, const Dataset& dataset,
                              ExampleLayout layout) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<AtomicWritableFile> file,
                           env->NewAtomicWritableFile(path));
  RecordWriter writer(file.get());
  for (int64_t i = 0; i < dataset.size(); ++i) {
    PSTRAIN_RETURN_IF_ERROR(writer.WriteRecord(EncodeExample(dataset, i, layout)));
  }
  return file->Commit();
}

absl::StatusOr<Dataset> ReadExampleFiles(Env* env, const std::vector<std::string>& paths) {
  if (paths.empty()) return absl::InvalidArgumentError("no TFRecord files to read");
  Dataset dataset;
  for (const std::string& path : paths) {
    PSTRAIN_RETURN_IF_ERROR(
        ForEachExample(env, path, [&](const tf::Example& example, const std::string& where) {
          return AppendExample(example, where, &dataset);
        }));
  }
  if (dataset.size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("no examples in ", absl::StrJoin(paths, ", ")));
  }
  return dataset;
}

absl::StatusOr<std::string> DescribeExampleFile(Env* env, const std::string& path) {
  struct Seen {
    std::string type;
    int64_t records = 0;
    int64_t min_count = INT64_MAX, max_count = 0;
    int64_t min_bytes = INT64_MAX, max_bytes = 0;  // bytes lists: per-value sizes
  };
  std::map<std::string, Seen> features;
  int64_t records = 0;
  PSTRAIN_RETURN_IF_ERROR(
      ForEachExample(env, path, [&](const tf::Example& example, const std::string&) {
        ++records;
        for (const auto& [name, feature] : example.features().feature()) {
          Seen& s = features[name];
          int64_t count = 0;
          if (feature.has_bytes_list()) {
            s.type = "bytes";
            count = feature.bytes_list().value_size();
            for (const std::string& v : feature.bytes_list().value()) {
              s.min_bytes = std::min<int64_t>(s.min_bytes, v.size());
              s.max_bytes = std::max<int64_t>(s.max_bytes, v.size());
            }
          } else if (feature.has_float_list()) {
            s.type = "float";
            count = feature.float_list().value_size();
          } else if (feature.has_int64_list()) {
            s.type = "int64";
            count = feature.int64_list().value_size();
          } else {
            s.type = "empty";
          }
          ++s.records;
          s.min_count = std::min(s.min_count, count);
          s.max_count = std::max(s.max_count, count);
        }
        return absl::OkStatus();
      }));
  std::string out = absl::StrCat(path, ": ", records, " tf.train.Example records, checksums OK\n");
  for (const auto& [name, s] : features) {
    absl::StrAppend(&out, "  ", name, ": ", s.type, ", ",
                    s.min_count == s.max_count ? absl::StrCat(s.min_count)
                                               : absl::StrCat(s.min_count, "..", s.max_count),
                    s.min_count == 1 && s.max_count == 1 ? " value" : " values");
    if (s.type == "bytes" && s.max_bytes > 0) {
      absl::StrAppend(&out, " of ",
                      s.min_bytes == s.max_bytes ? absl::StrCat(s.min_bytes)
                                                 : absl::StrCat(s.min_bytes, "..", s.max_bytes),
                      " bytes");
    }
    if (s.records != records) absl::StrAppend(&out, " (in ", s.records, " records)");
    absl::StrAppend(&out, "\n");
  }
  return out;
}

std::vector<std::string> FindExampleFiles(Env* env, const std::string& dir, Split split) {
  const std::vector<std::string> names =
      split == Split::kTrain ? std::vector<std::string>{"train.tfrecords"}
                             : std::vector<std::string>{"eval.tfrecords", "test.tfrecords"};
  for (const std::string& name : names) {
    if (env->FileExists(JoinPath(dir, name))) return {JoinPath(dir, name)};
  }
  return {};
}

}  // namespace pstrain
