#include "testing/data_test_util.h"

#include <zlib.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/record_writer.h"
#include "data/formats/idx_format.h"
#include "glog/logging.h"
#include "proto/example.pb.h"

namespace pstrain {
namespace testutil {
namespace {

void AppendBigEndian32(uint32_t value, std::string* out) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(value >> shift));
}

}  // namespace

std::string Gzip(std::string_view data) {
  z_stream zs{};
  // 16 + MAX_WBITS asks deflate for the gzip wrapper instead of zlib's.
  CHECK_EQ(deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
           Z_OK);
  std::string out(deflateBound(&zs, data.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  CHECK_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string IdxImages(uint32_t count, uint32_t rows, uint32_t cols,
                      const std::vector<uint8_t>& pixels) {
  std::string out;
  AppendBigEndian32(idx::kImagesMagic, &out);
  AppendBigEndian32(count, &out);
  AppendBigEndian32(rows, &out);
  AppendBigEndian32(cols, &out);
  out.append(pixels.begin(), pixels.end());
  return out;
}

std::string IdxLabels(const std::vector<uint8_t>& labels) {
  std::string out;
  AppendBigEndian32(idx::kLabelsMagic, &out);
  AppendBigEndian32(static_cast<uint32_t>(labels.size()), &out);
  out.append(labels.begin(), labels.end());
  return out;
}

uint8_t PatternPixel(int64_t i, int64_t j) { return static_cast<uint8_t>(i * 31 + j * 7 + 3); }

Dataset MakeDataset(int64_t n, int h, int w, int c) {
  Dataset dataset;
  dataset.height = h;
  dataset.width = w;
  dataset.channels = c;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < dataset.example_size(); ++j) {
      dataset.images.push_back(PatternPixel(i, j));
    }
    dataset.labels.push_back(static_cast<float>(i));
  }
  return dataset;
}

std::string ExampleWithId(int64_t id) {
  tf::Example e;
  auto& f = *e.mutable_features()->mutable_feature();
  f["label"].mutable_int64_list()->add_value(id % 2);
  f["dense"].mutable_float_list()->add_value(static_cast<float>(id));
  f["ids"].mutable_int64_list()->add_value(id);
  f["ids"].mutable_int64_list()->add_value(id + 1);
  return e.SerializeAsString();
}

std::vector<std::string> WriteExampleFiles(const std::string& dir, int files, int per_file,
                                           bool gzip) {
  std::vector<std::string> paths;
  int64_t id = 0;
  for (int f = 0; f < files; ++f) {
    std::string bytes;
    for (int i = 0; i < per_file; ++i) bytes += RecordWriter::Frame(ExampleWithId(id++));
    const std::string path =
        absl::StrCat(dir, "/train-", f, "-of-", files, gzip ? ".tfrecord.gz" : ".tfrecord");
    std::ofstream(path, std::ios::binary) << (gzip ? Gzip(bytes) : bytes);
    paths.push_back(path);
  }
  return paths;
}

std::vector<uint64_t> ValuesOf(const SparseFeatureColumn& column, int64_t i) {
  return std::vector<uint64_t>(column.values.begin() + column.offsets[i],
                               column.values.begin() + column.offsets[i + 1]);
}

}  // namespace testutil
}  // namespace pstrain
