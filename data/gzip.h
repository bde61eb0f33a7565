#ifndef PSTRAIN_DATA_GZIP_H_
#define PSTRAIN_DATA_GZIP_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pstrain {

// True if `contents` starts with the gzip magic bytes 0x1f 0x8b.
bool IsGzip(std::string_view contents);

// Decompresses a gzip file held in memory. Concatenated gzip members (what
// `cat a.gz b.gz` produces) are decompressed one after another, as gunzip does.
// A truncated stream, a bad CRC, or trailing bytes that are not another member
// are DataLoss errors naming `path` (used only for messages).
absl::StatusOr<std::string> Gunzip(std::string_view contents, const std::string& path);

// Returns `contents` decompressed if it is gzip, otherwise unchanged.
absl::StatusOr<std::string> MaybeGunzip(std::string contents, const std::string& path);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_GZIP_H_
