#ifndef PSTRAIN_COMMON_ENV_H_
#define PSTRAIN_COMMON_ENV_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace pstrain {

// A file written front to back (event files, logs). Append buffers in the
// process, Flush hands what is buffered to the OS (a crash of this process
// then loses nothing), Sync also makes it durable on disk. Closed by Close()
// or the destructor. Not thread-safe.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual absl::Status Append(std::string_view data) = 0;
  virtual absl::Status Flush() = 0;
  virtual absl::Status Sync() = 0;
  virtual absl::Status Close() = 0;
};

// A file read front to back in pieces, from its start or an offset, so that
// no reader holds a whole file (input data far larger than memory). Not
// thread-safe; one per reader.
class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  // Replaces `*out` with the next up to `n` (> 0) bytes: fewer only at the
  // end of the file, none once it is reached. Errors name the file.
  virtual absl::Status Read(size_t n, std::string* out) = 0;
};

// All file I/O goes through an Env so tests can swap in an in-memory or
// fault-injecting one (the leveldb pattern). Implementations are thread-safe.
class Env {
 public:
  virtual ~Env() = default;

  // Reads the whole file. NotFound if it does not exist.
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) = 0;

  // Opens `path` to read from byte `offset` on (past the end: nothing to
  // read). NotFound if it does not exist. This default reads the whole file
  // at once (for Envs of small files: MemEnv, test fakes); the POSIX Env and
  // Cloud Storage's read in pieces.
  virtual absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path,
                                                                            uint64_t offset = 0);

  // Writes `contents` to `path` atomically: temp file, fsync, rename. A crash
  // leaves either the old file or the new one, never a mix.
  virtual absl::Status WriteFileAtomic(const std::string& path, const std::string& contents) = 0;

  // Creates `path` (truncating an existing file) for writing.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) = 0;

  virtual bool FileExists(const std::string& path) = 0;

  // The size of a file in bytes. NotFound if it does not exist.
  virtual absl::StatusOr<uint64_t> FileSize(const std::string& path) = 0;

  // Creates `path` and its missing parents; OK if it already exists.
  virtual absl::Status CreateDirs(const std::string& path) = 0;

  // Names (not paths) of the entries of a directory.
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) = 0;

  // Renames `from` to `to` (replacing it) and makes the rename durable.
  virtual absl::Status RenameFile(const std::string& from, const std::string& to) = 0;

  // Deletes a file. NotFound if it does not exist.
  virtual absl::Status DeleteFile(const std::string& path) = 0;

  // Deletes an empty directory. Where directories are only implied by the
  // paths of files (MemEnv, object stores) there is nothing to delete: OK.
  virtual absl::Status DeleteDir(const std::string& /*path*/) { return absl::OkStatus(); }

  // The process-wide POSIX Env. Owned by the library; never deleted.
  static Env* Default();
};

// An Env that keeps files in memory; directories are implied by file paths.
class MemEnv : public Env {
 public:
  absl::StatusOr<std::string> ReadFile(const std::string& path) override;
  absl::Status WriteFileAtomic(const std::string& path, const std::string& contents) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  bool FileExists(const std::string& path) override;
  absl::StatusOr<uint64_t> FileSize(const std::string& path) override;
  absl::Status CreateDirs(const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override;
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status DeleteFile(const std::string& path) override;

 private:
  absl::Mutex mu_;
  std::map<std::string, std::string> files_ ABSL_GUARDED_BY(mu_);
};

// Joins path components with exactly one '/' between them.
std::string JoinPath(const std::string& a, const std::string& b);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_ENV_H_
