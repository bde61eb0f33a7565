#ifndef PSTRAIN_DATA_STREAM_EXAMPLE_DECODER_H_
#define PSTRAIN_DATA_STREAM_EXAMPLE_DECODER_H_

// The records of an ExampleStream (data/stream/example_stream.h) decoded into
// tabular examples, whatever their format: tf.train.Examples
// (data/formats/tabular_examples.h), Criteo TSV lines (data/formats/criteo.h) or CSV records
// (data/formats/csv_format.h). The examples gather until Take, one window's at a
// time.
//
// Not thread-safe: the stream's reading thread owns it. Holds copies of what
// it is given.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "data/dataset.h"
#include "data/formats/criteo.h"
#include "data/formats/csv_format.h"
#include "data/formats/example_format.h"
#include "data/formats/tabular_examples.h"

namespace pstrain {

class ExampleDecoder {
 public:
  // A decoder of `format`: kTfExamples reads `features`; kCsv reads by `csv`
  // (a schema CheckCsvSchema accepts) once UseCsvHeader has seen a header.
  ExampleDecoder(ExampleFormat format, const TabularFeatures& features,
                 std::optional<CsvSchema> csv);

  // kCsv: `header` is the first line of file `path`. The first file's makes
  // the parser (CsvParser::Create's errors); every later file must repeat
  // it, or InvalidArgument names both files: the CSV files of a stream have
  // the same columns in the same order.
  absl::Status UseCsvHeader(const std::string& path, std::string_view header);

  // Decodes `data`, record number `record` (0-based; a line's number is
  // record + 1) of file `path` at decompressed `offset`, and appends its
  // example: true, or false for a record that holds none (a blank CSV line,
  // or a record dropped by `missing: skip`). For a record that does not
  // decode, DataLoss or InvalidArgument naming the file and the record or
  // line, and nothing of it is appended. kCsv: after UseCsvHeader.
  absl::StatusOr<bool> Append(std::string_view data, const std::string& path, int64_t record,
                              uint64_t offset);

  // The examples appended since the last Take (a tabular Dataset; a CSV
  // stream that has read no header yet has no examples and the schema's
  // num_dense).
  Dataset Take();

 private:
  const ExampleFormat format_;
  const std::optional<CsvSchema> csv_schema_;
  // Per label column: a regression head's (num_classes 0) are values.
  const std::vector<CsvLabel> csv_labels_;
  std::unique_ptr<TabularExampleParser> examples_;  // kTfExamples
  CriteoBatch criteo_;                              // kCriteoTsv: this window's lines
  // kCsv: the parser, made from the first file's header (which every file
  // repeats).
  std::optional<CsvParser> csv_;
  std::string csv_header_;
  std::string csv_header_file_;
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_STREAM_EXAMPLE_DECODER_H_
