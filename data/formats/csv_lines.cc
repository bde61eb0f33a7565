#include "data/formats/csv_lines.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/formats/csv_format.h"

namespace pstrain {

absl::StatusOr<std::string> ReadCsvHeader(Env* env, const std::string& path,
                                          Compression compression, uint64_t offset,
                                          RecordStream* stream) {
  // Its first line is its header: read here, or (resumed inside the file)
  // from a look at its start.
  std::unique_ptr<RecordStream> start;
  if (offset > 0) {
    PSTRAIN_ASSIGN_OR_RETURN(start,
                             RecordStream::Open(env, path, compression, RecordFraming::kLines));
    start->AcceptUnterminatedLastLine();
  }
  absl::StatusOr<std::string_view> header = (offset > 0 ? start.get() : stream)->Next();
  if (absl::IsOutOfRange(header.status())) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": an empty CSV file (its first line is the header)"));
  }
  PSTRAIN_RETURN_IF_ERROR(header.status());
  return std::string(*header);
}

absl::StatusOr<std::string_view> JoinCsvRecord(RecordStream* stream, std::string_view line,
                                               char delimiter, std::string* joined,
                                               absl::FunctionRef<void(uint64_t)> count) {
  if (CsvRecordComplete(line, delimiter)) return line;
  joined->assign(line.data(), line.size());
  CsvQuoteScanner scanner(delimiter);
  while (!scanner.Complete(*joined) && joined->size() <= kCsvMaxRecordBytes) {
    const uint64_t offset = stream->offset();
    absl::StatusOr<std::string_view> next = stream->Next();
    count(stream->offset() - offset);
    if (absl::IsOutOfRange(next.status())) break;  // AppendLine names the open quote
    PSTRAIN_RETURN_IF_ERROR(next.status());
    joined->push_back('\n');
    joined->append(next->data(), next->size());
  }
  if (joined->size() > kCsvMaxRecordBytes) {
    // A quote that never closes: where the next record begins is lost, so
    // the rest of the file is damaged (skipped with max_bad_records).
    return absl::DataLossError(absl::StrCat(
        stream->path(), ": a record begun before offset ", stream->offset(),
        " has a quoted field not closed within ", kCsvMaxRecordBytes,
        " bytes: a stray '\"'? (fields with quotes in them are quoted, the quotes doubled)"));
  }
  return std::string_view(*joined);
}

}  // namespace pstrain
