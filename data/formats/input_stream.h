#ifndef PSTRAIN_DATA_FORMATS_INPUT_STREAM_H_
#define PSTRAIN_DATA_FORMATS_INPUT_STREAM_H_

// A data file's bytes read front to back, decompressed as they are read when
// the file is gzip'd (tf.data's compression_type="GZIP"), so no reader holds
// a whole file. Positions are offsets in the decompressed bytes, so a reader
// can be reopened where another stopped.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace pstrain {

enum class Compression {
  kAuto,  // gzip for a name ending .gz, else none
  kNone,
  kGzip,
};

// "auto", "none" (also "") or "gzip" (also "GZIP", tf.data's spelling);
// InvalidArgument otherwise.
absl::StatusOr<Compression> ParseCompression(std::string_view name);

// Compression kAuto resolved for `path`.
Compression CompressionOf(const std::string& path, Compression compression);

class InputStream {
 public:
  // Opens `path` through `env` to read from decompressed byte `offset` on: a
  // plain file is opened there; a gzip one is decompressed from its start
  // and the bytes before `offset` dropped. Concatenated gzip members are
  // read one after another, as gunzip reads them. The Env's error (NotFound
  // naming the file) when it cannot be opened; OutOfRange when the file
  // ends before `offset`.
  static absl::StatusOr<std::unique_ptr<InputStream>> Open(Env* env, const std::string& path,
                                                           Compression compression,
                                                           uint64_t offset = 0);
  virtual ~InputStream() = default;

  // Replaces `*out` with the next up to `n` (> 0) decompressed bytes: fewer
  // only at the end, none once it is reached. DataLoss naming the file and
  // the compressed offset for corrupt or truncated gzip data.
  virtual absl::Status Read(size_t n, std::string* out) = 0;

  // Decompressed bytes read so far, counted from the file's start.
  virtual uint64_t position() const = 0;
  // Bytes read from the file itself (compressed), for rates.
  virtual uint64_t file_bytes() const = 0;
  const std::string& path() const { return path_; }

 protected:
  explicit InputStream(std::string path) : path_(std::move(path)) {}

 private:
  const std::string path_;
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_INPUT_STREAM_H_
