#ifndef PSTRAIN_COMMON_COMMITTED_FILE_H_
#define PSTRAIN_COMMON_COMMITTED_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"

namespace pstrain {

// A file that appears whole or not at all, the one write-and-commit rule of
// every file of a checkpoint (dense shards, rows files): pieces are appended
// to a temp file beside `path` and counted in the size and CRC32C of the
// whole file (what a checkpoint's index records); Commit() makes the temp
// file durable (fsync), closes it and renames it onto `path`. A file that is
// not committed (an append or the commit failed, or it was destroyed first)
// leaves no temp file and `path` as it was. Not thread-safe.
class CommittedFile {
 public:
  // `env` must outlive the file.
  static absl::StatusOr<std::unique_ptr<CommittedFile>> Create(Env* env, std::string path);
  ~CommittedFile();  // deletes the temp file unless committed
  CommittedFile(const CommittedFile&) = delete;
  CommittedFile& operator=(const CommittedFile&) = delete;

  absl::Status Append(std::string_view piece);
  // Sync, close, rename. After an error nothing is renamed.
  absl::Status Commit();

  uint64_t size() const { return size_; }
  uint32_t crc32c() const { return crc_; }  // of every byte appended
  const std::string& path() const { return path_; }

 private:
  CommittedFile(Env* env, std::string path, std::string tmp, std::unique_ptr<WritableFile> file);

  Env* const env_;
  const std::string path_;
  const std::string tmp_;
  std::unique_ptr<WritableFile> file_;  // null once closed
  bool committed_ = false;
  uint64_t size_ = 0;
  uint32_t crc_ = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_COMMITTED_FILE_H_
