// CSV with a header read by a schema (data/formats/csv_format.h), over one file in
// memory. Byte 0: bits 0-1 pick the delimiter (, ; tab |), bits 2-3 % 3 the
// missing rule, bit 6 a second label z (of the other kind: a multi-task
// model's heads), bit 7 the first label's kind; the rest is the file
// (columns y, a, b, c, d, and z; b is read as a number and bucketized). Its first record is the
// header; when Create refuses it, the whole file is read under the header the schema
// wants, so every input reaches the records. Lines are joined into records
// as CsvRecordComplete says. Checks: no crash; every error is
// InvalidArgument; after every record the Dataset is whole (the columns agree
// on its size), its ids are within their buckets, its dense features finite;
// the same bytes as a file whose ids NameCsvIds names: every name is the
// text whose hash (or bucket) is the id.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/env.h"
#include "data/feature_hash.h"
#include "data/formats/csv_format.h"
#include "data/formats/csv_id_text.h"

namespace {

// The categorical columns' ids: two hashed, and column b bucketized.
constexpr int64_t kBuckets[] = {7, 1000, 4};

pstrain::CsvSchema Schema(char delimiter, pstrain::CsvMissing missing, bool two_labels) {
  pstrain::CsvSchema s;
  s.delimiter = delimiter;
  // One label, or two (a multi-task model's heads: y of the kind the first
  // byte says, z of the other).
  s.labels = {"y"};
  if (two_labels) s.labels.push_back("z");
  s.numeric.resize(2);
  s.numeric[0].name = "a";
  s.numeric[0].transform = pstrain::CsvTransform::kLog1p;
  s.numeric[1].name = "b";
  s.numeric[1].transform = pstrain::CsvTransform::kStandardize;
  s.numeric[1].mean = 1;
  s.numeric[1].stddev = 2;
  s.numeric[1].default_value = 3;
  s.categorical.resize(3);
  s.categorical[0].name = "c";
  s.categorical[0].hash_buckets = kBuckets[0];
  s.categorical[1].name = "d";
  s.categorical[1].hash_buckets = kBuckets[1];
  s.categorical[1].separator = delimiter == '|' ? ';' : '|';
  s.categorical[2].name = "b";  // also numeric[1]: read as a number and as its bucket
  s.categorical[2].boundaries = {-1, 0, 2.5};
  s.missing = missing;
  return s;
}

void CheckStatus(const absl::Status& s) {
  if (!s.ok() && s.code() != absl::StatusCode::kInvalidArgument) std::abort();
}

void CheckDataset(const pstrain::Dataset& d, const std::vector<pstrain::CsvLabel>& labels) {
  if (d.label_width != static_cast<int>(labels.size())) std::abort();
  if (d.labels.size() % labels.size() != 0) std::abort();
  const size_t n = d.labels.size() / labels.size();
  if (!d.tabular || d.num_dense != 2 || d.dense.size() != n * 2 || d.sparse.size() != 3) {
    std::abort();
  }
  for (float v : d.dense) {
    if (!std::isfinite(v)) std::abort();
  }
  for (size_t k = 0; k < d.labels.size(); ++k) {
    // A class id is a whole number >= 0; a regression label any finite one.
    const float y = d.labels[k];
    if (!std::isfinite(y)) std::abort();
    if (labels[k % labels.size()] == pstrain::CsvLabel::kClassId && (y < 0 || y != std::floor(y))) {
      std::abort();
    }
  }
  for (size_t c = 0; c < d.sparse.size(); ++c) {
    const pstrain::SparseFeatureColumn& column = d.sparse[c];
    if (column.offsets.size() != n + 1 || column.offsets[0] != 0 ||
        column.offsets.back() != static_cast<int64_t>(column.values.size())) {
      std::abort();
    }
    for (size_t i = 0; i < n; ++i) {
      if (column.offsets[i] > column.offsets[i + 1]) std::abort();
      // A bucketized column has one id, or none when missing.
      if (c == 2 && column.offsets[i + 1] - column.offsets[i] > 1) std::abort();
    }
    for (uint64_t id : column.values) {
      if (id >= static_cast<uint64_t>(kBuckets[c])) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  constexpr char kDelimiters[] = {',', ';', '\t', '|'};
  const char delimiter = kDelimiters[data[0] & 3];
  const auto missing = static_cast<pstrain::CsvMissing>((data[0] >> 2) % 3);
  const bool two_labels = (data[0] & 0x40) != 0;
  const pstrain::CsvSchema schema = Schema(delimiter, missing, two_labels);
  const pstrain::CsvLabel label =
      (data[0] & 0x80) != 0 ? pstrain::CsvLabel::kValue : pstrain::CsvLabel::kClassId;
  std::vector<pstrain::CsvLabel> labels = {label};
  if (two_labels) {
    labels.push_back(label == pstrain::CsvLabel::kValue ? pstrain::CsvLabel::kClassId
                                                        : pstrain::CsvLabel::kValue);
  }
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);

  std::vector<std::string_view> lines;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  // The record that begins at lines[*i], its lines joined; *i moves past it.
  auto next_record = [&](size_t* i) {
    std::string record(lines[(*i)++]);
    // The joining reader's scanner reads each line once; it must agree with
    // reading the whole record again after every line.
    pstrain::CsvQuoteScanner scanner(delimiter);
    while (true) {
      const bool complete = pstrain::CsvRecordComplete(record, delimiter);
      if (scanner.Complete(record) != complete) std::abort();
      if (complete || *i >= lines.size() || record.size() > pstrain::kCsvMaxRecordBytes) break;
      record.append("\n").append(lines[(*i)++]);
    }
    return record;
  };

  size_t i = 0;
  absl::StatusOr<pstrain::CsvParser> parser = absl::InvalidArgumentError("no header");
  if (!lines.empty()) {
    parser = pstrain::CsvParser::Create(schema, next_record(&i), "f.csv", labels);
    CheckStatus(parser.status());
  }
  if (!parser.ok()) {
    const std::string d(1, delimiter);
    parser = pstrain::CsvParser::Create(
        schema, "y" + d + "a" + d + "b" + d + "c" + d + "d" + (two_labels ? d + "z" : ""), "f.csv",
        labels);
    if (!parser.ok()) std::abort();
    i = 0;
  }
  int64_t taken = 0;
  while (i < lines.size()) {
    const int64_t line_number = static_cast<int64_t>(i) + 1;
    const std::string record = next_record(&i);
    const int64_t before = parser->size();
    const absl::Status s = parser->AppendLine(record, line_number);
    CheckStatus(s);
    if (!s.ok() && parser->size() != before) std::abort();
    if (parser->size() > before + 1) std::abort();
    if (++taken % 4 == 0) CheckDataset(parser->Take(), labels);
  }
  CheckDataset(parser->Take(), labels);

  // The same bytes as a file whose ids are named by their text (the
  // projector's metadata, csv_id_text.h): every id named is its text's hash,
  // or its bucket's range.
  pstrain::MemEnv env;
  if (!env.WriteFileAtomic("/f.csv", text).ok()) std::abort();
  pstrain::CsvIdsWanted wanted;
  for (int64_t id = 0; id < kBuckets[0]; ++id) wanted["c"].insert(id);
  for (int64_t id = 0; id < kBuckets[1]; id += 7) wanted["d"].insert(id);
  for (int64_t id = 0; id < kBuckets[2]; ++id) wanted["b"].insert(id);
  absl::StatusOr<pstrain::CsvIdTextResult> named =
      pstrain::NameCsvIds(&env, schema, {"/f.csv"}, wanted, {.max_records = 10000});
  if (!named.ok()) {
    if (!absl::IsDataLoss(named.status())) std::abort();  // a line over the stream's bound
    return 0;
  }
  for (const auto& [column, texts] : named->texts) {
    for (const auto& [id, name] : texts) {
      if (!wanted[column].contains(id)) std::abort();
      if (column == "b") {
        if (name != pstrain::BucketText(schema.categorical[2].boundaries, id)) std::abort();
      } else if (pstrain::HashBucketFast(name, column == "c" ? kBuckets[0] : kBuckets[1]) != id ||
                 name.empty()) {
        std::abort();
      }
    }
  }
  return 0;
}
