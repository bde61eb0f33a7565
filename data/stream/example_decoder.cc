#include "data/stream/example_decoder.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/formats/criteo_dataset.h"

namespace pstrain {
namespace {

// A regression head's labels (num_classes 0) are values, the others' class ids.
std::vector<CsvLabel> CsvLabelsOf(const TabularFeatures& features) {
  std::vector<CsvLabel> kinds;
  for (const TabularLabel& label : features.labels) {
    kinds.push_back(label.num_classes == 0 ? CsvLabel::kValue : CsvLabel::kClassId);
  }
  return kinds;
}

}  // namespace

ExampleDecoder::ExampleDecoder(ExampleFormat format, const TabularFeatures& features,
                               std::optional<CsvSchema> csv)
    : format_(format), csv_schema_(std::move(csv)), csv_labels_(CsvLabelsOf(features)) {
  if (format_ == ExampleFormat::kTfExamples) {
    examples_ = std::make_unique<TabularExampleParser>(features);
  }
}

absl::Status ExampleDecoder::UseCsvHeader(const std::string& path, std::string_view header) {
  std::string_view columns = header;
  if (columns.starts_with("\xEF\xBB\xBF")) columns.remove_prefix(3);
  if (columns.ends_with('\r')) columns.remove_suffix(1);
  if (!csv_.has_value()) {
    PSTRAIN_ASSIGN_OR_RETURN(csv_, CsvParser::Create(*csv_schema_, header, path, csv_labels_));
    csv_header_ = std::string(columns);
    csv_header_file_ = path;
    return absl::OkStatus();
  }
  if (columns != csv_header_) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": its header \"",
        absl::string_view(columns.data(), std::min<size_t>(columns.size(), 200)),
        "\" differs from that of ", csv_header_file_, " (\"", csv_header_.substr(0, 200),
        "\"): the CSV files of a job have the same columns in the same order"));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> ExampleDecoder::Append(std::string_view data, const std::string& path,
                                            int64_t record, uint64_t offset) {
  absl::Status parsed;
  if (format_ == ExampleFormat::kCsv) {
    if (csv_->file() != path) csv_->set_file(path);
    const int64_t before = csv_->size();
    parsed = csv_->AppendLine(data, record + 1);
    // A blank line or a record dropped by `missing: skip`: no example.
    if (parsed.ok() && csv_->size() == before) return false;
  } else if (format_ == ExampleFormat::kCriteoTsv) {
    parsed = ParseCriteoLine(data, &criteo_);
    if (!parsed.ok()) {
      parsed =
          absl::Status(parsed.code(), absl::StrCat(path, ":", record + 1, ": ", parsed.message()));
    }
  } else {
    parsed = examples_->AppendRecord(
        data, absl::StrCat(path, ": record ", record, " (offset ", offset, ")"));
  }
  PSTRAIN_RETURN_IF_ERROR(parsed);
  return true;
}

Dataset ExampleDecoder::Take() {
  if (format_ == ExampleFormat::kCriteoTsv) {
    Dataset examples = CriteoToDataset(criteo_);
    criteo_ = CriteoBatch();
    return examples;
  }
  if (format_ == ExampleFormat::kCsv) {
    if (csv_.has_value()) return csv_->Take();
    Dataset none;
    none.tabular = true;
    none.num_dense = static_cast<int64_t>(csv_schema_->numeric.size());
    return none;
  }
  return examples_->Take();
}

}  // namespace pstrain
