#ifndef PSTRAIN_COMMON_ENV_H_
#define PSTRAIN_COMMON_ENV_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
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

// A file that appears at its path whole or not at all: the one
// write-and-commit rule of every file the tree writes (checkpoints, exports,
// converted data, configs). Bytes go to a temp sibling (AtomicTempPath);
// Close() ends the writing, the bytes durable under the temp name (fsync)
// and `path` untouched; Commit() closes first if not yet closed, renames the
// temp file onto `path` and makes the rename durable (directory fsync). (An
// object store, whose upload replaces an object at once, uploads at Commit
// instead: cloud/gcs_env.h.) A crash at any moment leaves `path` as it was
// or the whole new file, never an empty or cut one. Destroyed without a successful Commit() (a
// write failed, or the writer gave up): the temp file is deleted and `path` is as it was. Several
// files that become visible together (the shards of one output) go through CommitFiles. Not
// thread-safe.
class AtomicWritableFile : public WritableFile {
 public:
  // Sync and Close, then rename onto the path and sync its directory. After
  // an error before the rename nothing is replaced; an error of the
  // directory sync is returned with the new file in place (but perhaps not
  // there after a crash). FailedPrecondition once committed, or after an
  // earlier failed write or close.
  virtual absl::Status Commit() = 0;
};

// Closes every file (each whole and durable under its temp name), then
// commits each in order: no file is renamed before every one is whole, so
// a crash or an error leaves each path as it was or whole. (Not one atomic
// step for the set: a crash between two renames leaves the first files new
// and the rest old, each whole; a reader that needs the set whole looks for
// a file written last, as a checkpoint's `checkpoint` file.) Returns the
// first error; the files not yet committed are left to their destructors.
absl::Status CommitFiles(const std::vector<AtomicWritableFile*>& files);

// The temp sibling an AtomicWritableFile of `path` writes first:
// "<dir>/.<name>.tmp.<pid>.<n>". Hidden ('.') so that no input pattern
// matches a file being written (data/stream/file_pattern.h), unique per writer in
// and across processes.
std::string AtomicTempPath(const std::string& path);

// For the name (not path) of such a temp file, the name of the file it
// becomes ("model.ckpt-5.index" for ".model.ckpt-5.index.tmp.12.0");
// nullopt for any other name. For cleaning up after a crash.
std::optional<std::string> CommittedNameOfTemp(std::string_view name);

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

  // Opens a file that appears at `path` whole or not at all
  // (AtomicWritableFile). This default writes AtomicTempPath(path) through
  // NewWritableFile and commits it with Sync, RenameFile and SyncDir; an
  // object store whose uploads replace an object at once overrides it.
  virtual absl::StatusOr<std::unique_ptr<AtomicWritableFile>> NewAtomicWritableFile(
      const std::string& path);

  // Writes `contents` to `path` through NewAtomicWritableFile: a crash
  // leaves the old file or the whole new one.
  absl::Status WriteFileAtomic(const std::string& path, std::string_view contents);

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

  // Renames `from` to `to` (replacing it). Durable once SyncDir of `to`'s
  // directory returns; to replace a file whole, use NewAtomicWritableFile.
  virtual absl::Status RenameFile(const std::string& from, const std::string& to) = 0;

  // Makes the entries of directory `dir` (files created, renamed into it or
  // deleted) durable: fsync of the directory. OK where directories are only
  // implied by the paths of files (MemEnv, object stores).
  virtual absl::Status SyncDir(const std::string& dir) = 0;

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
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  bool FileExists(const std::string& path) override;
  absl::StatusOr<uint64_t> FileSize(const std::string& path) override;
  absl::Status CreateDirs(const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override;
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status DeleteFile(const std::string& path) override;
  absl::Status SyncDir(const std::string&) override { return absl::OkStatus(); }

 private:
  class File;  // a WritableFile that stores its contents at every Append
  void Store(const std::string& path, std::string contents);

  absl::Mutex mu_;
  std::map<std::string, std::string> files_ ABSL_GUARDED_BY(mu_);
};

// Joins path components with exactly one '/' between them.
std::string JoinPath(const std::string& a, const std::string& b);

// The directory of `path`: "/a" for "/a/b", "/" for "/b", "." for "b".
std::string DirName(const std::string& path);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_ENV_H_
