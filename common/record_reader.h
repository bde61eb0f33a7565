#ifndef PSTRAIN_COMMON_RECORD_READER_H_
#define PSTRAIN_COMMON_RECORD_READER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pstrain {

// Reads TFRecord-framed records (common/record_format.h) from a file's contents.
// `contents` must remain live while this reader is in use. Not thread-safe.
class RecordReader {
 public:
  // `name` (the file's path) appears in every error. `base` is the file
  // offset `contents` starts at (a piece of a file read in pieces): offsets
  // in errors and offset() count from the file's start.
  RecordReader(std::string_view contents, std::string name, uint64_t base = 0)
      : contents_(contents), name_(std::move(name)), base_(base) {}

  // The next record's data (a view into `contents`). OutOfRange at a clean
  // end of file; DataLoss, naming the file and the record's offset, for a
  // record cut short or whose length or data CRC does not match. After an
  // error the reader stays at the damaged record.
  absl::StatusOr<std::string_view> ReadRecord();

  // Offset of the next record.
  uint64_t offset() const { return base_ + offset_; }

  // Whether the last ReadRecord failed because the file ends inside the
  // record (what a writer killed mid-append leaves), rather than a checksum
  // mismatch.
  bool cut_short() const { return cut_short_; }

 private:
  std::string_view contents_;
  std::string name_;
  uint64_t base_ = 0;
  uint64_t offset_ = 0;  // in contents_
  bool cut_short_ = false;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_RECORD_READER_H_
