// CSV records become tabular examples (data/formats/csv_format.h): CsvParser.

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "data/feature_hash.h"
#include "data/formats/csv_format.h"
#include "data/formats/csv_format_internal.h"

namespace pstrain {

using csv_internal::CharName;
using csv_internal::ColumnList;
using csv_internal::kByteOrderMark;
using csv_internal::NumberError;
using csv_internal::NumberProblem;
using csv_internal::ParseNumber;
using csv_internal::Shown;
using csv_internal::SplitFields;
using csv_internal::Sv;
using csv_internal::Transform;

CsvParser::CsvParser(const CsvSchema& schema, std::string file, int num_fields,
                     std::vector<CsvLabel> labels)
    : schema_(schema),
      file_(std::move(file)),
      num_fields_(num_fields),
      label_kinds_(std::move(labels)) {
  Reset();
}

void CsvParser::Reset() {
  data_ = Dataset();
  data_.tabular = true;
  data_.num_dense = static_cast<int64_t>(schema_.numeric.size());
  data_.label_width = std::max<int>(1, static_cast<int>(schema_.labels.size()));
  data_.sparse.resize(schema_.categorical.size());
  for (size_t c = 0; c < schema_.categorical.size(); ++c) {
    data_.sparse[c].name = schema_.categorical[c].name;
    data_.sparse[c].kind = SparseValueKind::kIds;
  }
}

absl::StatusOr<CsvParser> CsvParser::Create(const CsvSchema& schema, std::string_view header_line,
                                            const std::string& file, CsvLabel label) {
  return Create(schema, header_line, file,
                std::vector<CsvLabel>(std::max<size_t>(1, schema.labels.size()), label));
}

absl::StatusOr<CsvParser> CsvParser::Create(const CsvSchema& schema, std::string_view header_line,
                                            const std::string& file,
                                            const std::vector<CsvLabel>& labels) {
  PSTRAIN_RETURN_IF_ERROR(CheckCsvSchema(schema));
  std::string_view line = header_line;
  if (line.substr(0, kByteOrderMark.size()) == kByteOrderMark) {
    line.remove_prefix(kByteOrderMark.size());
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::vector<std::string_view> fields;
  std::string unescaped;
  size_t bad_field = 0;
  const char* problem = SplitFields(line, schema.delimiter, &fields, &unescaped, &bad_field);
  if (*problem != '\0') {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ":1: the header's column ", bad_field + 1, ": ", problem));
  }
  return CreateForColumns(schema, std::vector<std::string>(fields.begin(), fields.end()), file,
                          labels);
}

absl::StatusOr<CsvParser> CsvParser::CreateForColumns(const CsvSchema& schema,
                                                      std::vector<std::string> header,
                                                      const std::string& file, CsvLabel label) {
  return CreateForColumns(schema, std::move(header), file,
                          std::vector<CsvLabel>(std::max<size_t>(1, schema.labels.size()), label));
}

absl::StatusOr<CsvParser> CsvParser::CreateForColumns(const CsvSchema& schema,
                                                      std::vector<std::string> header,
                                                      const std::string& file,
                                                      const std::vector<CsvLabel>& labels) {
  PSTRAIN_RETURN_IF_ERROR(CheckCsvSchema(schema));
  const bool none =
      std::all_of(labels.begin(), labels.end(), [](CsvLabel l) { return l == CsvLabel::kNone; });
  if (!none && labels.size() != schema.labels.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": the csv schema has ", schema.labels.size(), " label column",
                     schema.labels.size() == 1 ? "" : "s", " (", absl::StrJoin(schema.labels, ", "),
                     ") but the model has ", labels.size(), " head", labels.size() == 1 ? "" : "s",
                     "; give csv.labels one column per head, in the heads' order"));
  }
  CsvParser parser(schema, file, static_cast<int>(header.size()),
                   none ? std::vector<CsvLabel>() : labels);

  // The header position of column `name`, read as `what`.
  auto bind = [&](const std::string& name, std::string_view what) -> absl::StatusOr<int> {
    int found = -1;
    std::string case_differs;
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) {
        if (found >= 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(file, ":1: the header names column ", Shown(name), " (", Sv(what),
                           ") twice, as columns ", found + 1, " and ", i + 1,
                           "; rename one, so that the schema reads one column by that name"));
        }
        found = static_cast<int>(i);
      } else if (header[i].size() == name.size() && case_differs.empty() &&
                 absl::EqualsIgnoreCase(header[i], name)) {
        case_differs = header[i];
      }
    }
    if (found >= 0) return found;
    std::string hint;
    if (!case_differs.empty()) {
      hint = absl::StrCat(" (", Shown(case_differs), " differs in case; names must match exactly)");
    } else if (header.size() == 1) {
      for (char d : {',', ';', '\t', '|'}) {
        if (d != schema.delimiter && header[0].find(d) != std::string::npos) {
          hint = absl::StrCat(" (the header is one column: is the delimiter ", CharName(d),
                              "? set csv.delimiter)");
          break;
        }
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(file, ": the header has no column ", Shown(name),
                                                   " (", Sv(what),
                                                   "); its columns: ", ColumnList(header), hint));
  };
  for (size_t l = 0; l < parser.label_kinds_.size(); ++l) {
    PSTRAIN_ASSIGN_OR_RETURN(const int field, bind(schema.labels[l], "a label"));
    parser.label_fields_.push_back(field);
  }
  for (const CsvNumericColumn& c : schema.numeric) {
    PSTRAIN_ASSIGN_OR_RETURN(const int field, bind(c.name, "a numeric column of the schema"));
    parser.numeric_fields_.push_back(field);
  }
  for (const CsvCategoricalColumn& c : schema.categorical) {
    PSTRAIN_ASSIGN_OR_RETURN(const int field, bind(c.name, "a categorical column of the schema"));
    parser.categorical_fields_.push_back(field);
  }
  parser.header_ = std::move(header);
  parser.dense_row_.resize(schema.numeric.size());
  parser.missing_dense_.resize(schema.numeric.size());
  parser.bucket_ids_.resize(schema.categorical.size());
  for (size_t i = 0; i < schema.numeric.size(); ++i) {
    const CsvNumericColumn& c = schema.numeric[i];
    if (c.default_value) (void)Transform(c, *c.default_value, &parser.missing_dense_[i]);
  }
  return parser;
}

std::string CsvParser::ColumnName(size_t field) const {
  return field < header_.size() ? absl::StrCat("column ", Shown(header_[field]))
                                : absl::StrCat("field ", field + 1);
}

std::string CsvParser::Where(int64_t line_number) const {
  return record_where_.empty() ? absl::StrCat(file_, ":", line_number) : std::string(record_where_);
}

absl::Status CsvParser::FieldError(int64_t line_number, size_t field, std::string_view text,
                                   std::string_view problem) const {
  return absl::InvalidArgumentError(absl::StrCat(Where(line_number), ": ", ColumnName(field), ": ",
                                                 Shown(text), " ", Sv(problem)));
}

absl::Status CsvParser::MissingError(int64_t line_number, size_t field) const {
  if (IsLabelField(field)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(line_number), ": the label column ", Shown(header_[field]),
        " is empty; every record needs its label (csv.missing: skip drops such records)"));
  }
  if (!record_where_.empty()) {
    // A row to predict: the export's schema (the training's) says what is
    // missing.
    return absl::InvalidArgumentError(absl::StrCat(
        Sv(record_where_), ": column ", Shown(header_[field]),
        " is missing or empty, and the model's CSV schema has missing: ",
        schema_.missing == CsvMissing::kSkip ? "skip" : "error", " (a value is needed)"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      file_, ":", line_number, ": column ", Shown(header_[field]),
      " is empty (a missing value); write a value, or set csv.missing to default (a numeric "
      "column takes its default or 0, a categorical one no ids) or to skip (the record is "
      "dropped)"));
}

absl::Status CsvParser::AppendLine(std::string_view line, int64_t line_number) {
  if (line.size() > kCsvMaxRecordBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        file_, ":", line_number, ": a record of ", line.size(), " bytes, over the limit of ",
        kCsvMaxRecordBytes, " (is a quoted field not closed?)"));
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return absl::OkStatus();
  size_t bad_field = 0;
  const char* problem = SplitFields(line, schema_.delimiter, &fields_, &unescaped_, &bad_field);
  if (*problem != '\0') {
    return absl::InvalidArgumentError(
        absl::StrCat(file_, ":", line_number, ": ", ColumnName(bad_field), ": ", problem));
  }
  if (fields_.size() != static_cast<size_t>(num_fields_)) {
    return absl::InvalidArgumentError(absl::StrCat(file_, ":", line_number, ": ", fields_.size(),
                                                   " fields, but the header has ", num_fields_,
                                                   " (", ColumnList(header_),
                                                   "); every record has one field per column (the "
                                                   "delimiter is ",
                                                   CharName(schema_.delimiter), ")"));
  }
  return AppendRecord(line_number);
}

absl::Status CsvParser::AppendFields(const std::vector<std::string_view>& fields,
                                     std::string_view where) {
  if (fields.size() != static_cast<size_t>(num_fields_)) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(where), ": ", fields.size(),
                                                   " fields for the ", num_fields_, " columns ",
                                                   ColumnList(header_)));
  }
  fields_ = fields;
  record_where_ = where;
  const int64_t before = size();
  absl::Status s = AppendRecord(0);
  record_where_ = {};
  if (s.ok() && size() == before) {
    // Dropped by `missing: skip`: a row to predict has no such way out.
    for (size_t f = 0; f < fields.size(); ++f) {
      if (fields[f].empty() && !IsLabelField(f)) {
        record_where_ = where;
        s = MissingError(0, f);
        record_where_ = {};
        break;
      }
    }
  }
  return s;
}

absl::Status CsvParser::AppendRecord(int64_t line_number) {
  // Missing fields: the whole record is dropped or refused before anything
  // of it is parsed.
  if (schema_.missing == CsvMissing::kSkip) {
    bool missing = false;
    for (int f : label_fields_) missing = missing || fields_[f].empty();
    for (int f : numeric_fields_) missing = missing || fields_[f].empty();
    for (int f : categorical_fields_) missing = missing || fields_[f].empty();
    if (missing) {
      ++skipped_;
      return absl::OkStatus();
    }
  }
  for (int f : label_fields_) {
    if (fields_[f].empty()) return MissingError(line_number, f);
  }
  if (schema_.missing == CsvMissing::kError) {
    for (int f : numeric_fields_) {
      if (fields_[f].empty()) return MissingError(line_number, f);
    }
    for (int f : categorical_fields_) {
      if (fields_[f].empty()) return MissingError(line_number, f);
    }
  }

  // The labels (0 for rows without them: rows to predict).
  label_row_.assign(data_.label_width, 0.0f);
  for (size_t l = 0; l < label_fields_.size(); ++l) {
    const int field = label_fields_[l];
    const std::string_view label_text = fields_[field];
    double label = 0;
    NumberError label_error = ParseNumber(label_text, &label);
    if (label_kinds_[l] == CsvLabel::kValue) {
      if (label_error == NumberError::kNone &&
          std::abs(label) > static_cast<double>(std::numeric_limits<float>::max())) {
        label_error = NumberError::kOutOfRange;  // a float label
      }
      if (label_error != NumberError::kNone) {
        return FieldError(
            line_number, field, label_text,
            absl::StrCat(NumberProblem(label_error), ": a regression head's label is a number"));
      }
    } else if (label_error != NumberError::kNone || label < 0 ||
               label > std::numeric_limits<int32_t>::max() || label != std::floor(label)) {
      return FieldError(line_number, field, label_text,
                        "is not a label: a class id, an integer >= 0 (0 or 1 for a click model)");
    }
    label_row_[l] = static_cast<float>(label);
  }

  // The dense features.
  for (size_t i = 0; i < numeric_fields_.size(); ++i) {
    const std::string_view text = fields_[numeric_fields_[i]];
    if (text.empty()) {
      dense_row_[i] = missing_dense_[i];
      continue;
    }
    double x = 0;
    const NumberError e = ParseNumber(text, &x);
    if (e != NumberError::kNone) {
      return FieldError(line_number, numeric_fields_[i], text, NumberProblem(e));
    }
    const char* transform_problem = Transform(schema_.numeric[i], x, &dense_row_[i]);
    if (*transform_problem != '\0') {
      return FieldError(line_number, numeric_fields_[i], text, transform_problem);
    }
  }

  // The bucketized columns' ids (a missing field has none).
  for (size_t c = 0; c < categorical_fields_.size(); ++c) {
    const CsvCategoricalColumn& column = schema_.categorical[c];
    const std::string_view text = fields_[categorical_fields_[c]];
    if (!column.bucketized() || text.empty()) continue;
    double x = 0;
    const NumberError e = ParseNumber(text, &x);
    if (e != NumberError::kNone) {
      return FieldError(line_number, categorical_fields_[c], text,
                        absl::StrCat(NumberProblem(e), ": the column is bucketized by its value"));
    }
    bucket_ids_[c] = BucketOf(column.boundaries, x);
  }

  // Nothing below fails: the example is appended whole.
  data_.labels.insert(data_.labels.end(), label_row_.begin(), label_row_.end());
  data_.dense.insert(data_.dense.end(), dense_row_.begin(), dense_row_.end());
  for (size_t c = 0; c < categorical_fields_.size(); ++c) {
    const CsvCategoricalColumn& column = schema_.categorical[c];
    SparseFeatureColumn& out = data_.sparse[c];
    std::string_view text = fields_[categorical_fields_[c]];
    if (column.bucketized()) {
      if (!text.empty()) out.values.push_back(static_cast<uint64_t>(bucket_ids_[c]));
    } else {
      csv_internal::ForEachToken(text, column.separator, [&](std::string_view token) {
        out.values.push_back(static_cast<uint64_t>(HashBucketFast(token, column.hash_buckets)));
      });
    }
    out.offsets.push_back(static_cast<int64_t>(out.values.size()));
  }
  return absl::OkStatus();
}

Dataset CsvParser::Take() {
  Dataset out = std::move(data_);
  Reset();
  return out;
}

}  // namespace pstrain
