#ifndef PSTRAIN_DATA_FORMATS_CSV_LINES_H_
#define PSTRAIN_DATA_FORMATS_CSV_LINES_H_

// A CSV file (data/formats/csv_format.h) read from a RecordStream of lines
// (data/formats/record_stream.h), as an ExampleStream reads it: its header, and its
// records, a record's lines joined while a quoted field in it goes on.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "data/formats/input_stream.h"
#include "data/formats/record_stream.h"

namespace pstrain {

// The header (first line) of CSV file `path`, whose lines `stream` reads
// from decompressed `offset`: the stream's next line at offset 0, else the
// first line of a second look at the file's start. InvalidArgument for an
// empty file; the errors of RecordStream.
absl::StatusOr<std::string> ReadCsvHeader(Env* env, const std::string& path,
                                          Compression compression, uint64_t offset,
                                          RecordStream* stream);

// One CSV record of `stream`, whose last line read was `line`: `line` when
// it is a whole record (CsvRecordComplete with `delimiter`), else it and the
// lines after it joined with '\n' into `*joined` until the quotes close (at
// the file's end the record is handed back open: CsvParser::AppendLine names
// the open quote). `count(bytes)` is called after each line read past
// `line`, with the decompressed bytes it took. DataLoss once the record is
// over kCsvMaxRecordBytes (a quote that never closes: the rest of the file
// is damaged); the errors of the stream. The view is valid until the next
// read of `stream` or change of `*joined`.
absl::StatusOr<std::string_view> JoinCsvRecord(RecordStream* stream, std::string_view line,
                                               char delimiter, std::string* joined,
                                               absl::FunctionRef<void(uint64_t)> count);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_CSV_LINES_H_
