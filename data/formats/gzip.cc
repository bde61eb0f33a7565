#include "data/formats/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

// zlib counts bytes in uInt (32 bits); larger buffers are fed in pieces.
constexpr size_t kMaxChunk = size_t{1} << 30;

// Ends the inflate stream on every return path.
class InflateGuard {
 public:
  explicit InflateGuard(z_stream* zs) : zs_(zs) {}
  ~InflateGuard() { inflateEnd(zs_); }
  InflateGuard(const InflateGuard&) = delete;
  InflateGuard& operator=(const InflateGuard&) = delete;

 private:
  z_stream* zs_;
};

}  // namespace

bool IsGzip(std::string_view contents) {
  return contents.size() >= 2 && static_cast<uint8_t>(contents[0]) == 0x1f &&
         static_cast<uint8_t>(contents[1]) == 0x8b;
}

absl::StatusOr<std::string> Gunzip(std::string_view in, const std::string& path) {
  z_stream zs{};
  // 16 + MAX_WBITS: expect a gzip header and trailer, so zlib verifies the
  // CRC-32 and length stored in the trailer.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    return absl::InternalError(absl::StrCat(path, ": cannot initialize zlib"));
  }
  InflateGuard guard(&zs);

  auto* const base = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  size_t fed = 0;  // bytes of `in` handed to zlib so far
  std::string out(std::max<size_t>(in.size() * 4, 1 << 16), '\0');
  size_t out_pos = 0;
  auto truncated = [&] {
    return absl::DataLossError(absl::StrCat(
        path, ": truncated gzip stream (", in.size(),
        " compressed bytes end before the gzip trailer); the file is incomplete, download it "
        "again"));
  };

  while (true) {
    if (zs.avail_in == 0 && fed < in.size()) {
      size_t chunk = std::min(in.size() - fed, kMaxChunk);
      zs.next_in = base + fed;
      zs.avail_in = static_cast<uInt>(chunk);
      fed += chunk;
    }
    if (out_pos == out.size()) out.resize(out.size() * 2);
    size_t room = std::min(out.size() - out_pos, kMaxChunk);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + out_pos);
    zs.avail_out = static_cast<uInt>(room);

    int ret = inflate(&zs, Z_NO_FLUSH);
    out_pos += room - zs.avail_out;
    bool input_exhausted = zs.avail_in == 0 && fed == in.size();

    if (ret == Z_STREAM_END) {
      size_t consumed = fed - zs.avail_in;
      if (consumed == in.size()) break;
      // Another gzip member may follow (concatenated .gz files are valid).
      if (!IsGzip(in.substr(consumed))) {
        return absl::DataLossError(absl::StrCat(
            path, ": ", in.size() - consumed, " unexpected bytes after the gzip stream at offset ",
            consumed, "; the file is corrupt"));
      }
      if (inflateReset(&zs) != Z_OK) {
        return absl::InternalError(absl::StrCat(path, ": cannot reset zlib"));
      }
      continue;
    }
    if (ret == Z_BUF_ERROR) {
      // No progress was possible: out of input (truncated) or out of output
      // space (grown on the next turn).
      if (input_exhausted && zs.avail_out != 0) return truncated();
      continue;
    }
    if (ret != Z_OK) {
      return absl::DataLossError(absl::StrCat(path, ": corrupt gzip data at compressed offset ",
                                              fed - zs.avail_in, " (",
                                              zs.msg != nullptr ? zs.msg : "zlib error", ")"));
    }
    if (input_exhausted && zs.avail_out != 0) return truncated();
  }
  out.resize(out_pos);
  return out;
}

struct GzipWriter::Stream {
  z_stream zs{};
  bool open = false;
};

GzipWriter::GzipWriter(WritableFile* file, std::string path)
    : file_(file), path_(std::move(path)), stream_(std::make_unique<Stream>()) {
  // 16 + MAX_WBITS: a gzip header and trailer; level 6, gzip(1)'s default.
  stream_->open =
      deflateInit2(&stream_->zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK;
  out_.resize(1 << 16);
}

GzipWriter::~GzipWriter() {
  if (stream_->open) deflateEnd(&stream_->zs);
}

absl::Status GzipWriter::Deflate(std::string_view data, int flush) {
  if (!stream_->open) return absl::InternalError(absl::StrCat(path_, ": cannot initialize zlib"));
  z_stream& zs = stream_->zs;
  size_t fed = 0;
  while (true) {
    if (zs.avail_in == 0 && fed < data.size()) {
      const size_t chunk = std::min(data.size() - fed, kMaxChunk);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + fed));
      zs.avail_in = static_cast<uInt>(chunk);
      fed += chunk;
    }
    const bool last_input = fed == data.size();
    zs.next_out = reinterpret_cast<Bytef*>(out_.data());
    zs.avail_out = static_cast<uInt>(out_.size());
    const int ret = deflate(&zs, last_input ? flush : Z_NO_FLUSH);
    if (ret == Z_STREAM_ERROR) return absl::InternalError(absl::StrCat(path_, ": zlib failed"));
    const size_t produced = out_.size() - zs.avail_out;
    if (produced > 0) {
      if (absl::Status s = file_->Append(std::string_view(out_.data(), produced)); !s.ok()) {
        return s;
      }
    }
    if (flush == Z_FINISH) {
      if (ret == Z_STREAM_END) return absl::OkStatus();
    } else if (last_input && zs.avail_in == 0 && zs.avail_out != 0) {
      return absl::OkStatus();
    }
  }
}

absl::Status GzipWriter::Append(std::string_view data) { return Deflate(data, Z_NO_FLUSH); }

absl::Status GzipWriter::Close() {
  if (absl::Status s = Deflate({}, Z_FINISH); !s.ok()) return s;
  deflateEnd(&stream_->zs);
  stream_->open = false;
  return file_->Close();
}

absl::StatusOr<std::string> MaybeGunzip(std::string contents, const std::string& path) {
  if (!IsGzip(contents)) return contents;
  return Gunzip(contents, path);
}

}  // namespace pstrain
