#include "common/record_reader.h"

#include "absl/strings/str_cat.h"
#include "common/coding.h"
#include "common/crc32c.h"
#include "common/record_format.h"

namespace pstrain {

absl::StatusOr<std::string_view> RecordReader::ReadRecord() {
  cut_short_ = false;
  const uint64_t left = contents_.size() - offset_;
  if (left == 0) return absl::OutOfRangeError(absl::StrCat(name_, ": end of file"));
  if (left < record::kHeaderSize) {
    cut_short_ = true;
    return absl::DataLossError(absl::StrCat(name_, ": record at offset ", base_ + offset_,
                                            " is cut short: its header needs ", record::kHeaderSize,
                                            " bytes, ", left, " are left"));
  }
  const char* p = contents_.data() + offset_;
  const uint64_t length = DecodeFixed64(p);
  if (crc32c::Unmask(DecodeFixed32(p + record::kLengthSize)) !=
      crc32c::Value(p, record::kLengthSize)) {
    return absl::DataLossError(
        absl::StrCat(name_, ": record at offset ", base_ + offset_, " has a corrupted length"));
  }
  if (length > left - record::kHeaderSize ||
      left - record::kHeaderSize - length < record::kFooterSize) {
    cut_short_ = true;
    return absl::DataLossError(absl::StrCat(name_, ": record at offset ", base_ + offset_, " of ",
                                            length, " bytes is cut short: ", left,
                                            " bytes are left in the file"));
  }
  const char* data = p + record::kHeaderSize;
  if (crc32c::Unmask(DecodeFixed32(data + length)) != crc32c::Value(data, length)) {
    return absl::DataLossError(absl::StrCat(name_, ": record at offset ", base_ + offset_,
                                            " has corrupted data (CRC mismatch)"));
  }
  offset_ += record::kHeaderSize + length + record::kFooterSize;
  return std::string_view(data, length);
}

}  // namespace pstrain
