#include "data/formats/input_stream.h"

#include <zlib.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

// Compressed bytes fetched from the file per read.
constexpr size_t kFileChunk = 1 << 20;

class PlainStream : public InputStream {
 public:
  PlainStream(std::string path, std::unique_ptr<SequentialFile> file, uint64_t offset)
      : InputStream(std::move(path)), file_(std::move(file)), position_(offset) {}

  absl::Status Read(size_t n, std::string* out) override {
    PSTRAIN_RETURN_IF_ERROR(file_->Read(n, out));
    position_ += out->size();
    return absl::OkStatus();
  }
  uint64_t position() const override { return position_; }
  uint64_t file_bytes() const override { return position_; }

 private:
  std::unique_ptr<SequentialFile> file_;
  uint64_t position_;
};

class GzipStream : public InputStream {
 public:
  GzipStream(std::string path, std::unique_ptr<SequentialFile> file)
      : InputStream(std::move(path)), file_(std::move(file)) {}
  ~GzipStream() override {
    if (initialized_) inflateEnd(&zs_);
  }

  absl::Status Init() {
    // 16 + MAX_WBITS: a gzip header and trailer, whose CRC-32 and length
    // zlib checks.
    if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) {
      return absl::InternalError(absl::StrCat(path(), ": cannot initialize zlib"));
    }
    initialized_ = true;
    return absl::OkStatus();
  }

  absl::Status Read(size_t n, std::string* out) override {
    out->resize(n);
    size_t done = 0;
    while (done < n && !ended_) {
      if (zs_.avail_in == 0) {
        PSTRAIN_RETURN_IF_ERROR(file_->Read(kFileChunk, &in_));
        file_bytes_ += in_.size();
        zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
        zs_.avail_in = static_cast<uInt>(in_.size());
        if (in_.empty()) {
          // The file ended: cleanly only between members.
          if (in_member_) return Truncated(out);
          ended_ = true;
          break;
        }
      }
      if (!in_member_) {
        // Another member, or bytes that are not gzip after the last one.
        if (static_cast<uint8_t>(*zs_.next_in) != 0x1f) {
          out->clear();
          return absl::DataLossError(
              absl::StrCat(path(), ": bytes that are not gzip after the gzip stream at offset ",
                           CompressedOffset(), "; the file is corrupt"));
        }
        if (inflateReset(&zs_) != Z_OK) {
          return absl::InternalError(absl::StrCat(path(), ": cannot reset zlib"));
        }
        in_member_ = true;
      }
      zs_.next_out = reinterpret_cast<Bytef*>(out->data() + done);
      zs_.avail_out = static_cast<uInt>(n - done);
      const int ret = inflate(&zs_, Z_NO_FLUSH);
      done = n - zs_.avail_out;
      if (ret == Z_STREAM_END) {
        in_member_ = false;
        continue;
      }
      if (ret == Z_BUF_ERROR) continue;  // needs more input: fetched next turn
      if (ret != Z_OK) {
        out->clear();
        return absl::DataLossError(absl::StrCat(path(), ": corrupt gzip data at compressed offset ",
                                                CompressedOffset(), " (",
                                                zs_.msg != nullptr ? zs_.msg : "zlib error", ")"));
      }
    }
    out->resize(done);
    position_ += done;
    return absl::OkStatus();
  }
  uint64_t position() const override { return position_; }
  uint64_t file_bytes() const override { return file_bytes_; }

 private:
  uint64_t CompressedOffset() const { return file_bytes_ - zs_.avail_in; }
  absl::Status Truncated(std::string* out) {
    out->clear();
    return absl::DataLossError(absl::StrCat(
        path(), ": truncated gzip stream (the file ends at compressed offset ", file_bytes_,
        ", inside a gzip member); the file is incomplete: write or download it again"));
  }

  std::unique_ptr<SequentialFile> file_;
  z_stream zs_{};
  bool initialized_ = false;
  std::string in_;
  bool in_member_ = false;
  bool ended_ = false;
  uint64_t position_ = 0;
  uint64_t file_bytes_ = 0;
};

}  // namespace

absl::StatusOr<Compression> ParseCompression(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(absl::string_view(name.data(), name.size()));
  if (lower == "auto") return Compression::kAuto;
  if (lower.empty() || lower == "none") return Compression::kNone;
  if (lower == "gzip") return Compression::kGzip;
  return absl::InvalidArgumentError(
      absl::StrCat("compression \"", absl::string_view(name.data(), name.size()),
                   "\": give auto (gzip for .gz files), none or gzip"));
}

Compression CompressionOf(const std::string& path, Compression compression) {
  if (compression != Compression::kAuto) return compression;
  return absl::EndsWith(path, ".gz") ? Compression::kGzip : Compression::kNone;
}

absl::StatusOr<std::unique_ptr<InputStream>> InputStream::Open(Env* env, const std::string& path,
                                                               Compression compression,
                                                               uint64_t offset) {
  if (CompressionOf(path, compression) == Compression::kNone) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file,
                             env->NewSequentialFile(path, offset));
    return std::unique_ptr<InputStream>(new PlainStream(path, std::move(file), offset));
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file, env->NewSequentialFile(path, 0));
  auto stream = std::make_unique<GzipStream>(path, std::move(file));
  PSTRAIN_RETURN_IF_ERROR(stream->Init());
  std::string skipped;
  while (stream->position() < offset) {
    const uint64_t left = offset - stream->position();
    PSTRAIN_RETURN_IF_ERROR(
        stream->Read(static_cast<size_t>(std::min<uint64_t>(left, 1 << 20)), &skipped));
    if (skipped.empty()) {
      return absl::OutOfRangeError(absl::StrCat(path, " ends at decompressed byte ",
                                                stream->position(), ", before offset ", offset));
    }
  }
  return std::unique_ptr<InputStream>(std::move(stream));
}

}  // namespace pstrain
