#ifndef PSTRAIN_DATA_FORMATS_CSV_FORMAT_H_
#define PSTRAIN_DATA_FORMATS_CSV_FORMAT_H_

// CSV files with a header row, read as tabular examples (data/dataset.h) by a
// schema, the `csv:` section of the YAML file that training.csv_schema names:
//
//   csv:
//     delimiter: ","          # optional; one character
//     label: clicked
//     numeric:                # in this order they form each example's dense
//       - {name: price, transform: log1p}
//       - {name: age, transform: standardize, mean: 35.2, std: 12.1, default: 35}
//       - {name: count}
//     categorical:            # each a sparse column of the same name
//       - {name: country, hash_buckets: 1000}
//       - {name: tags, hash_buckets: 10000, separator: "|"}
//       - {name: age, bucketize: [18, 25, 35, 50, 65]}   # 6 ids
//     missing: default        # error (the default) | default | skip
//
// The format (RFC 4180, with the leniencies said here):
//  - Records are lines; the first is the header, the columns' names. A UTF-8
//    byte order mark before it is skipped. A '\r' ending any line (CRLF
//    files) is dropped. The header may have columns the schema does not name
//    (never read) and in any order; a name the schema reads may not occur
//    twice.
//  - Every record has as many fields as the header, separated by the
//    delimiter. A field that begins with '"' is quoted: it ends at the next
//    '"' not doubled, and must be followed by the delimiter or the end of the
//    record; inside it "" is one '"', and delimiters and line breaks are data.
//    A '"' elsewhere in an unquoted field is data. Spaces are data, except
//    around a number.
//  - A record may span lines when a quoted field holds a line break: the
//    reader joins lines with '\n' until CsvRecordComplete says the quotes are
//    closed, and hands the joined record to CsvParser::AppendLine.
//  - A blank line is no record (as at the end of a file).
//
// What a record becomes, column by column:
//  - label: a class id, an integer >= 0 (0 or 1 for a click model) that fits
//    an int32; a number with a zero fraction ("1.0") is read as that integer.
//    For a regression head (CsvLabel::kValue) any number, read as the
//    numeric columns' are (finite, within float's range).
//  - numeric: a decimal number ("-1.5", "2e3", "+7", ".5"; spaces around it
//    are ignored; no locale), finite and within float's range, then
//    transformed: none; log1p, log(1 + x), which needs x > -1; standardize,
//    (x - mean) / std. The numeric columns in schema order are the example's
//    dense features (Dataset::num_dense of them).
//  - categorical: the field's text, exactly (unquoted), as one token, or
//    split at `separator` into tokens (empty pieces skipped: "a||b" is two).
//    A token's id is HashBucketFast(token, hash_buckets) (data/feature_hash.h:
//    tf.strings.to_hash_bucket_fast), stored as a kIds sparse column named
//    as the CSV column, so an embedding's table needs at least hash_buckets
//    rows. This is TensorFlow's categorical_column_with_hash_bucket.
//  - bucketized categorical (`bucketize: [b1, ..., bn]`, finite and strictly
//    increasing): the field is a number, as a numeric column's (untransformed),
//    and its one id is the number of boundaries <= it: 0 below b1, i in
//    [bi, bi+1), n from bn up, so n + 1 ids. This is TensorFlow's
//    bucketized_column (its Bucketize op), compared in double. The column may
//    also be a numeric column of the schema: it is then read twice, once as
//    each.
//  - A field is missing when it is empty (a quoted "" is empty too). Then, by
//    the schema's `missing` rule:
//      error:   the record is an error naming the column;
//      default: a numeric column takes its `default` (a raw value, transformed
//               as a read one is) or, without one, 0 as the dense feature (so
//               a standardized column takes its mean); a categorical column
//               has no ids (its embedding is the combiner's zero); a missing
//               label is still an error, a label has no default;
//      skip:    the record is dropped and counted (CsvParser::skipped).
//    A field of spaces is not missing: in a numeric column it is not a number.
//
// The schema is read in csv_schema.cc and checked in csv_schema_check.cc,
// records become examples
// in csv_parser.cc (CsvParser), and the text rules both follow (fields and
// quotes, numbers, transforms) are csv_format.cc's.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "data/dataset.h"
#include "yaml-cpp/yaml.h"

namespace pstrain {

// The most bytes one record may have, its joined lines included. A reader
// stops joining lines at this size: a stray '"' would otherwise join the
// rest of the file into one record.
inline constexpr size_t kCsvMaxRecordBytes = size_t{1} << 20;

enum class CsvTransform { kNone, kLog1p, kStandardize };

enum class CsvMissing { kError, kDefault, kSkip };

struct CsvNumericColumn {
  std::string name;
  CsvTransform transform = CsvTransform::kNone;
  double mean = 0.0;    // kStandardize only
  double stddev = 1.0;  // kStandardize only; > 0 (the YAML key is `std`)
  // The raw value of a missing field under CsvMissing::kDefault.
  std::optional<float> default_value;
};

struct CsvCategoricalColumn {
  std::string name;
  int64_t hash_buckets = 0;  // >= 1, or 0 when bucketized
  // A multi-valued column's separator; without one the field is one token.
  std::optional<char> separator;
  // Bucketized (the YAML key is `bucketize`): the boundaries, finite and
  // strictly increasing; empty for a hashed column.
  std::vector<double> boundaries;

  bool bucketized() const { return !boundaries.empty(); }
  // How many ids the column's values take: hash_buckets, or one more than
  // the boundaries.
  int64_t num_ids() const {
    return bucketized() ? static_cast<int64_t>(boundaries.size()) + 1 : hash_buckets;
  }
};

// A bucketized column's id for value `x`: the number of boundaries <= x.
int64_t BucketOf(const std::vector<double>& boundaries, double x);

struct CsvSchema {
  char delimiter = ',';
  // The label columns: one (`label: clicked`), or one per head of a
  // multi-task model, in its heads' order (`labels: [delayed, delay]`).
  std::vector<std::string> labels;
  std::vector<CsvNumericColumn> numeric;
  std::vector<CsvCategoricalColumn> categorical;
  CsvMissing missing = CsvMissing::kError;
};

// Reads the schema from the YAML map under `csv:` (the form above). `where`
// ("job.yaml") begins every error; an error names the key ("csv.numeric[1].std")
// and the YAML line, and says what to write instead: InvalidArgument for an
// unknown or repeated key, a value of the wrong kind or range, a missing
// label or name, a name used twice, and anything CheckCsvSchema refuses.
absl::StatusOr<CsvSchema> ParseCsvSchema(const YAML::Node& node, const std::string& where);

// Reads the schema from a YAML file that holds the map above, under `csv:`
// or at its top: NotFound for a file that is not there, InvalidArgument
// naming the file for YAML that is not a schema.
absl::StatusOr<CsvSchema> LoadCsvSchema(Env* env, const std::string& path);
// The same for the file's text (an export carries it); `path` names it in
// errors.
absl::StatusOr<CsvSchema> ParseCsvSchemaText(const std::string& text, const std::string& path);

// InvalidArgument for a schema that no file can satisfy: no label, an empty
// or repeated column name (the labels count; a bucketized column may share a numeric
// one's), hash_buckets < 1 or with bucketize, boundaries that are not finite
// and strictly increasing, a separator on a bucketized column, a standardize std that is
// not > 0 or a mean that is not finite, a default that is not finite (or
// <= -1 for log1p), a delimiter or separator that is '"', '\r' or '\n'.
absl::Status CheckCsvSchema(const CsvSchema& schema);

// Whether rows read by `schema` are the input of a model of `num_dense`
// dense features and these sparse ones: as many numeric columns, and each
// feature a categorical column. InvalidArgument saying which does not fit.
absl::Status CheckCsvSchemaFits(const CsvSchema& schema, int64_t num_dense,
                                const std::vector<std::string>& sparse_features);

// Whether `text` (one or more lines joined with '\n', without the final line
// break) is a whole record, i.e. every quoted field in it is closed. When it
// is not, the record goes on: the caller appends '\n' and the next line, and
// asks again (up to kCsvMaxRecordBytes; a file that ends first ends inside a
// quoted field, which AppendLine reports). Quotes are read as AppendLine
// reads them, so it takes the same delimiter. A reader that saves its place
// in a file saves it at the start of a record, never inside one.
bool CsvRecordComplete(std::string_view text, char delimiter);

// CsvRecordComplete for a record that grows a line at a time: each call reads
// only what was appended since the last, so joining a record of n bytes
// reads each byte about once (asking CsvRecordComplete of the whole text
// after every line read a quote left open up to kCsvMaxRecordBytes once per
// line: tens of seconds before the error). Each `text` must begin with the
// whole text of the previous call.
class CsvQuoteScanner {
 public:
  explicit CsvQuoteScanner(char delimiter) : delimiter_(delimiter) {}

  bool Complete(std::string_view text);

 private:
  char delimiter_;
  size_t next_ = 0;  // where the next call goes on reading
  bool quoted_ = false;
  bool field_start_ = true;
};

// Turns the records of one CSV file into tabular examples of a schema, by the
// rules above. The Dataset it builds has tabular = true, num_dense =
// schema.numeric.size(), labels, dense (row-major) and one kIds sparse column
// per schema.categorical in that order: the shape TabularExampleParser
// (data/formats/tabular_examples.h) builds from tf.train.Examples.
//
// Not thread-safe: one parser per file being read. Holds copies of what it
// needs; nothing passed in need outlive a call.
// What a record's label is: a class id, or a regression head's value; or
// none, for rows to predict (the label column need not be there; each
// example's label is 0).
enum class CsvLabel { kClassId, kValue, kNone };

class CsvParser {
 public:
  // A parser for the file whose first line is `header_line` (its '\r' and a
  // byte order mark may be there). `file` names the file in every error.
  // InvalidArgument: the errors of CheckCsvSchema; a header that lacks a
  // column of the schema (naming it and the header's columns), names a
  // column the schema reads twice, or is not valid CSV. `label` says what
  // the label column holds.
  static absl::StatusOr<CsvParser> Create(const CsvSchema& schema, std::string_view header_line,
                                          const std::string& file,
                                          CsvLabel label = CsvLabel::kClassId);
  // With a kind per label column of the schema (a multi-task model's heads:
  // class ids for some, values for others); InvalidArgument when their
  // counts differ.
  static absl::StatusOr<CsvParser> Create(const CsvSchema& schema, std::string_view header_line,
                                          const std::string& file,
                                          const std::vector<CsvLabel>& labels);
  // The same for a header already split into its columns' names.
  static absl::StatusOr<CsvParser> CreateForColumns(const CsvSchema& schema,
                                                    std::vector<std::string> header,
                                                    const std::string& file,
                                                    CsvLabel label = CsvLabel::kClassId);
  static absl::StatusOr<CsvParser> CreateForColumns(const CsvSchema& schema,
                                                    std::vector<std::string> header,
                                                    const std::string& file,
                                                    const std::vector<CsvLabel>& labels);

  // Parses one record (a line, or lines joined as CsvRecordComplete says;
  // a trailing '\r' is dropped) and appends its example, or nothing for a
  // blank line or a record dropped by `missing: skip`. `line_number`
  // (1-based; the header is line 1) is the record's first line, for errors.
  // InvalidArgument "file:line: column "price": "abc" is not a number", as
  // the rules above say: a field count other than the header's, a quoted
  // field not closed or followed by text, a missing field under `missing:
  // error`, a bad label or number, a record over kCsvMaxRecordBytes. On an
  // error nothing of the record is appended, so a caller may skip it and go
  // on.
  absl::Status AppendLine(std::string_view line, int64_t line_number);

  // AppendLine for a record already split into one field per header column
  // (the text of each, unquoted; empty: missing), e.g. a JSON row to
  // predict. Errors begin with `where` ("instances[3]") instead of a file and
  // line. A record `missing: skip` would drop is an error here, naming the
  // column: a row to predict needs its prediction.
  absl::Status AppendFields(const std::vector<std::string_view>& fields, std::string_view where);

  // The examples appended since the last Take.
  Dataset Take();
  // Examples appended since the last Take.
  int64_t size() const { return data_.size(); }
  // Records dropped by `missing: skip` since Create.
  int64_t skipped() const { return skipped_; }

  const CsvSchema& schema() const { return schema_; }
  // The file named in errors from now on (a stream of files with the same
  // header reads them all with one parser).
  void set_file(std::string file) { file_ = std::move(file); }
  const std::string& file() const { return file_; }

 private:
  // `labels`: a kind per label column, or empty: rows without labels.
  CsvParser(const CsvSchema& schema, std::string file, int num_fields,
            std::vector<CsvLabel> labels);
  bool IsLabelField(size_t field) const {
    return std::find(label_fields_.begin(), label_fields_.end(), static_cast<int>(field)) !=
           label_fields_.end();
  }

  void Reset();
  // The record in fields_, after its split: its example appended, or the
  // error.
  absl::Status AppendRecord(int64_t line_number);
  // "file:line", or the record's `where` (AppendFields).
  std::string Where(int64_t line_number) const;
  // "column "name"", or "field 7" past the header's columns.
  std::string ColumnName(size_t field) const;
  // InvalidArgument "file:line: column "name": "text" <problem>".
  absl::Status FieldError(int64_t line_number, size_t field, std::string_view text,
                          std::string_view problem) const;
  // InvalidArgument for an empty field under `missing: error` (or a label).
  absl::Status MissingError(int64_t line_number, size_t field) const;

  CsvSchema schema_;
  std::string file_;
  int num_fields_;                     // the header's
  std::vector<CsvLabel> label_kinds_;  // per label column; empty: none read
  std::vector<std::string> header_;    // the columns' names, for errors
  // Header positions of the schema's columns.
  std::vector<int> label_fields_;
  std::vector<int> numeric_fields_;
  std::vector<int> categorical_fields_;

  // Reused by every record, so parsing allocates nothing once warm.
  std::vector<std::string_view> fields_;  // into the record or unescaped_
  std::string unescaped_;                 // quoted fields with "" in them
  std::vector<float> dense_row_;
  std::vector<float> missing_dense_;  // per numeric column: its missing value's feature
  std::vector<int64_t> bucket_ids_;   // per categorical column: a bucketized one's id
  std::vector<float> label_row_;      // the record's labels
  std::string_view record_where_;     // AppendFields' `where`, during its call

  Dataset data_;
  int64_t skipped_ = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_CSV_FORMAT_H_
