#ifndef PSTRAIN_DATA_FORMATS_RECORD_STREAM_H_
#define PSTRAIN_DATA_FORMATS_RECORD_STREAM_H_

// The records of one data file, read in pieces (data/formats/input_stream.h): TFRecord
// records (common/record_format.h) or text lines. Each record's offset is its
// place in the decompressed bytes, so a stream can be reopened at any record
// it handed out.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "data/formats/input_stream.h"

namespace pstrain {

enum class RecordFraming {
  kTfRecord,  // TFRecord framing with both CRCs checked
  kLines,     // lines ending '\n' (a '\r' before it is dropped)
};

// The most bytes one record (or line) may have; a longer one is DataLoss.
inline constexpr size_t kMaxRecordBytes = size_t{256} << 20;

class RecordStream {
 public:
  // Opens `path` at decompressed `offset`, the start of record number
  // `record` (0-based; a line's number is record + 1): 0 and 0, or a
  // position this stream's offset() and record() gave. The errors of
  // InputStream::Open.
  static absl::StatusOr<std::unique_ptr<RecordStream>> Open(Env* env, const std::string& path,
                                                            Compression compression,
                                                            RecordFraming framing,
                                                            uint64_t offset = 0,
                                                            int64_t record = 0);

  // The next record (valid until the next call). OutOfRange at the end of
  // the file. DataLoss naming the file and the record's offset for a damaged
  // or cut-short TFRecord record, and for a last line without its '\n' when
  // lines must end with one (a file cut short); the errors of the stream.
  // After an error the stream stays where it failed.
  absl::StatusOr<std::string_view> Next();

  // After a DataLoss from Next for a TFRecord record whose length and its
  // checksum are intact (only its data is damaged): steps past it to the
  // next record and returns true. False otherwise: past a damaged length
  // or a file cut short, the framing cannot be trusted.
  bool SkipDamagedRecord();

  // A last line without '\n' is a line (CSV files often end so); by default
  // it is a file cut short.
  void AcceptUnterminatedLastLine() { unterminated_ok_ = true; }

  // Offset (decompressed) and number of the next record.
  uint64_t offset() const { return offset_; }
  int64_t record() const { return record_; }
  // Bytes read from the file (compressed), for rates.
  uint64_t file_bytes() const { return stream_->file_bytes(); }
  const std::string& path() const { return stream_->path(); }

 private:
  RecordStream(std::unique_ptr<InputStream> stream, RecordFraming framing, uint64_t offset,
               int64_t record)
      : stream_(std::move(stream)), framing_(framing), offset_(offset), record_(record) {}

  // At least `n` bytes from begin_ in buf_, fewer only at the end of the file.
  absl::Status Fill(size_t n);
  absl::StatusOr<std::string_view> NextRecord();
  absl::StatusOr<std::string_view> NextLine();

  std::unique_ptr<InputStream> stream_;
  const RecordFraming framing_;
  bool unterminated_ok_ = false;
  std::string buf_;  // bytes read and not yet handed out start at begin_
  size_t begin_ = 0;
  bool at_end_ = false;  // the stream has nothing more
  std::string piece_;
  uint64_t offset_;
  int64_t record_;
  size_t damaged_ = 0;  // the whole size of a record whose data only failed its checksum
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_RECORD_STREAM_H_
