#ifndef PSTRAIN_COMMON_RECORD_WRITER_H_
#define PSTRAIN_COMMON_RECORD_WRITER_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/env.h"

namespace pstrain {

// Appends TFRecord-framed records (common/record_format.h) to a file. `*file`
// must remain live while this writer is in use; the writer does not close it.
// Not thread-safe.
class RecordWriter {
 public:
  explicit RecordWriter(WritableFile* file) : file_(file) {}

  // Appends one record (header, data and CRC in one Append, so a flushed file
  // never ends inside a header).
  absl::Status WriteRecord(std::string_view data);

  // The framed bytes of one record.
  static std::string Frame(std::string_view data);

  // The parts of Frame(data) before and after the data, for writers that
  // append large records without copying them.
  static std::string Header(std::string_view data);
  static std::string Footer(std::string_view data);

 private:
  WritableFile* const file_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_RECORD_WRITER_H_
