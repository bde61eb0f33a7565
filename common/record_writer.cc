#include "common/record_writer.h"

#include <cstdint>

#include "common/crc32c.h"
#include "common/record_format.h"

namespace pstrain {
namespace {

void PutFixed64(uint64_t v, char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}
void PutFixed32(uint32_t v, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

}  // namespace

std::string RecordWriter::Frame(std::string_view data) {
  std::string out(record::kHeaderSize + data.size() + record::kFooterSize, '\0');
  PutFixed64(data.size(), out.data());
  PutFixed32(crc32c::Mask(crc32c::Value(out.data(), record::kLengthSize)),
             out.data() + record::kLengthSize);
  out.replace(record::kHeaderSize, data.size(), data.data(), data.size());
  PutFixed32(crc32c::Mask(crc32c::Value(data.data(), data.size())),
             out.data() + record::kHeaderSize + data.size());
  return out;
}

std::string RecordWriter::Header(std::string_view data) {
  std::string out(record::kHeaderSize, '\0');
  PutFixed64(data.size(), out.data());
  PutFixed32(crc32c::Mask(crc32c::Value(out.data(), record::kLengthSize)),
             out.data() + record::kLengthSize);
  return out;
}

std::string RecordWriter::Footer(std::string_view data) {
  std::string out(record::kFooterSize, '\0');
  PutFixed32(crc32c::Mask(crc32c::Value(data.data(), data.size())), out.data());
  return out;
}

absl::Status RecordWriter::WriteRecord(std::string_view data) { return file_->Append(Frame(data)); }

}  // namespace pstrain
