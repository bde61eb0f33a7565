#include "common/record_writer.h"

#include <cstdint>

#include "common/coding.h"
#include "common/crc32c.h"
#include "common/record_format.h"

namespace pstrain {

std::string RecordWriter::Frame(std::string_view data) {
  std::string out(record::kHeaderSize + data.size() + record::kFooterSize, '\0');
  EncodeFixed64(out.data(), data.size());
  EncodeFixed32(out.data() + record::kLengthSize,
                crc32c::Mask(crc32c::Value(out.data(), record::kLengthSize)));
  out.replace(record::kHeaderSize, data.size(), data.data(), data.size());
  EncodeFixed32(out.data() + record::kHeaderSize + data.size(),
                crc32c::Mask(crc32c::Value(data.data(), data.size())));
  return out;
}

std::string RecordWriter::Header(std::string_view data) {
  std::string out(record::kHeaderSize, '\0');
  EncodeFixed64(out.data(), data.size());
  EncodeFixed32(out.data() + record::kLengthSize,
                crc32c::Mask(crc32c::Value(out.data(), record::kLengthSize)));
  return out;
}

std::string RecordWriter::Footer(std::string_view data) {
  std::string out(record::kFooterSize, '\0');
  EncodeFixed32(out.data(), crc32c::Mask(crc32c::Value(data.data(), data.size())));
  return out;
}

absl::Status RecordWriter::WriteRecord(std::string_view data) { return file_->Append(Frame(data)); }

}  // namespace pstrain
