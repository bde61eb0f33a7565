#ifndef PSTRAIN_DATA_FORMATS_GZIP_H_
#define PSTRAIN_DATA_FORMATS_GZIP_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace pstrain {

// True if `contents` starts with the gzip magic bytes 0x1f 0x8b.
bool IsGzip(std::string_view contents);

// Decompresses a gzip file held in memory. Concatenated gzip members (what
// `cat a.gz b.gz` produces) are decompressed one after another, as gunzip does.
// A truncated stream, a bad CRC, or trailing bytes that are not another member
// are DataLoss errors naming `path` (used only for messages).
absl::StatusOr<std::string> Gunzip(std::string_view contents, const std::string& path);

// Writes a gzip file (one member) to `file` as it is appended to: what
// gzip(1) or TensorFlow's GZIP TFRecordWriter write. Not thread-safe.
class GzipWriter {
 public:
  // `file` must outlive the writer; `path` names it in errors.
  GzipWriter(WritableFile* file, std::string path);
  ~GzipWriter();
  GzipWriter(const GzipWriter&) = delete;
  GzipWriter& operator=(const GzipWriter&) = delete;

  absl::Status Append(std::string_view data);
  // Ends the gzip member (its trailer) and closes `file`.
  absl::Status Close();

 private:
  absl::Status Deflate(std::string_view data, int flush);

  WritableFile* const file_;
  const std::string path_;
  struct Stream;
  std::unique_ptr<Stream> stream_;
  std::string out_;
};

// Returns `contents` decompressed if it is gzip, otherwise unchanged.
absl::StatusOr<std::string> MaybeGunzip(std::string contents, const std::string& path);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_GZIP_H_
