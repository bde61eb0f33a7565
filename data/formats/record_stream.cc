#include "data/formats/record_stream.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/coding.h"
#include "common/crc32c.h"
#include "common/record_format.h"
#include "common/record_reader.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

// Bytes asked of the input stream per read.
constexpr size_t kReadBytes = 1 << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<RecordStream>> RecordStream::Open(Env* env, const std::string& path,
                                                                 Compression compression,
                                                                 RecordFraming framing,
                                                                 uint64_t offset, int64_t record) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<InputStream> stream,
                           InputStream::Open(env, path, compression, offset));
  return std::unique_ptr<RecordStream>(
      new RecordStream(std::move(stream), framing, offset, record));
}

absl::Status RecordStream::Fill(size_t n) {
  while (buf_.size() - begin_ < n && !at_end_) {
    // Drop what was handed out before growing the buffer.
    if (begin_ > 0 && begin_ >= buf_.size() / 2) {
      buf_.erase(0, begin_);
      begin_ = 0;
    }
    PSTRAIN_RETURN_IF_ERROR(
        stream_->Read(std::max(kReadBytes, n - (buf_.size() - begin_)), &piece_));
    if (piece_.empty()) {
      at_end_ = true;
      break;
    }
    buf_.append(piece_);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string_view> RecordStream::Next() {
  return framing_ == RecordFraming::kTfRecord ? NextRecord() : NextLine();
}

absl::StatusOr<std::string_view> RecordStream::NextRecord() {
  PSTRAIN_RETURN_IF_ERROR(Fill(record::kHeaderSize));
  if (buf_.size() == begin_) return absl::OutOfRangeError(absl::StrCat(path(), ": end of file"));
  size_t length = 0;
  if (buf_.size() - begin_ >= record::kLengthSize) {
    length = static_cast<size_t>(
        std::min<uint64_t>(DecodeFixed64(buf_.data() + begin_), kMaxRecordBytes + 1));
  }
  const size_t whole = record::kHeaderSize + length + record::kFooterSize;
  if (length <= kMaxRecordBytes) PSTRAIN_RETURN_IF_ERROR(Fill(whole));
  const size_t have = std::min(buf_.size() - begin_, whole);
  RecordReader reader(std::string_view(buf_.data() + begin_, have), path(), offset_);
  // (A length past the limit is not read: the record is cut short here.)
  absl::StatusOr<std::string_view> read = reader.ReadRecord();
  damaged_ = 0;
  if (!read.ok()) {
    if (have == whole && length <= kMaxRecordBytes) {
      const char* p = buf_.data() + begin_;
      const uint32_t stored = DecodeFixed32(p + record::kLengthSize);
      if (crc32c::Unmask(stored) == crc32c::Value(p, record::kLengthSize)) damaged_ = whole;
    }
    return read.status();
  }
  const std::string_view data = *read;
  begin_ += whole;
  offset_ += whole;
  ++record_;
  return data;
}

bool RecordStream::SkipDamagedRecord() {
  if (damaged_ == 0) return false;
  begin_ += damaged_;
  offset_ += damaged_;
  ++record_;
  damaged_ = 0;
  return true;
}

absl::StatusOr<std::string_view> RecordStream::NextLine() {
  size_t searched = 0;
  while (true) {
    const char* start = buf_.data() + begin_;
    const size_t have = buf_.size() - begin_;
    const void* newline = std::memchr(start + searched, '\n', have - searched);
    if (newline != nullptr) {
      const size_t length = static_cast<const char*>(newline) - start;
      std::string_view line(start, length);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      begin_ += length + 1;
      offset_ += length + 1;
      ++record_;
      return line;
    }
    if (at_end_) {
      if (have == 0) return absl::OutOfRangeError(absl::StrCat(path(), ": end of file"));
      if (!unterminated_ok_) {
        return absl::DataLossError(
            absl::StrCat(path(), ":", record_ + 1, ": the last line has no line end (offset ",
                         offset_, "): the file is cut short; write or download it again"));
      }
      std::string_view line(start, have);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      begin_ += have;
      offset_ += have;
      ++record_;
      return line;
    }
    if (have > kMaxRecordBytes) {
      return absl::DataLossError(absl::StrCat(path(), ":", record_ + 1, ": a line of more than ",
                                              kMaxRecordBytes, " bytes (offset ", offset_, ")"));
    }
    searched = have;
    PSTRAIN_RETURN_IF_ERROR(Fill(have + 1));
  }
}

}  // namespace pstrain
