#ifndef PSTRAIN_COMMON_COMMITTED_FILE_H_
#define PSTRAIN_COMMON_COMMITTED_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"

namespace pstrain {

// An AtomicWritableFile (common/env.h) that also counts the size and CRC32C
// of the whole file, what a checkpoint's index records of each of its files
// (dense shards, rows files). Not committed (an append or the commit failed,
// or it was destroyed first): no temp file is left and `path` is as it was.
// Not thread-safe.
class CommittedFile {
 public:
  // `env` must outlive the file.
  static absl::StatusOr<std::unique_ptr<CommittedFile>> Create(Env* env, std::string path);
  ~CommittedFile() = default;  // uncommitted: the temp file is deleted
  CommittedFile(const CommittedFile&) = delete;
  CommittedFile& operator=(const CommittedFile&) = delete;

  absl::Status Append(std::string_view piece);
  // AtomicWritableFile::Commit: sync, close, rename, directory sync.
  absl::Status Commit();

  uint64_t size() const { return size_; }
  uint32_t crc32c() const { return crc_; }  // of every byte appended
  const std::string& path() const { return path_; }

 private:
  CommittedFile(std::string path, std::unique_ptr<AtomicWritableFile> file)
      : path_(std::move(path)), file_(std::move(file)) {}

  const std::string path_;
  std::unique_ptr<AtomicWritableFile> file_;
  uint64_t size_ = 0;
  uint32_t crc_ = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_COMMITTED_FILE_H_
