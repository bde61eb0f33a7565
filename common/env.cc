#include "common/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

absl::Status IoError(const std::string& what, const std::string& path, int err) {
  std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override { Close().IgnoreError(); }

  absl::Status Append(std::string_view data) override {
    if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
    buffer_.append(data.data(), data.size());
    if (buffer_.size() >= kBufferSize) return Flush();
    return absl::OkStatus();
  }

  absl::Status Flush() override {
    if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
    size_t done = 0;
    while (done < buffer_.size()) {
      ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        buffer_.erase(0, done);
        return IoError("cannot write", path_, errno);
      }
      done += static_cast<size_t>(n);
    }
    buffer_.clear();
    return absl::OkStatus();
  }

  absl::Status Sync() override {
    if (absl::Status s = Flush(); !s.ok()) return s;
    if (::fsync(fd_) != 0) return IoError("cannot fsync", path_, errno);
    return absl::OkStatus();
  }

  absl::Status Close() override {
    if (fd_ < 0) return absl::OkStatus();
    absl::Status s = Flush();
    if (::close(fd_) != 0 && s.ok()) s = IoError("cannot close", path_, errno);
    fd_ = -1;
    return s;
  }

 private:
  static constexpr size_t kBufferSize = 64 << 10;
  const std::string path_;
  int fd_;
  std::string buffer_;
};

// A file read with pread from an offset on; the descriptor is closed with it.
class PosixSequentialFile : public SequentialFile {
 public:
  PosixSequentialFile(std::string path, int fd, uint64_t offset)
      : path_(std::move(path)), fd_(fd), offset_(offset) {}
  ~PosixSequentialFile() override { ::close(fd_); }

  absl::Status Read(size_t n, std::string* out) override {
    out->resize(n);
    size_t done = 0;
    while (done < n) {
      const ssize_t got = ::pread(fd_, out->data() + done, n - done, static_cast<off_t>(offset_));
      if (got < 0) {
        if (errno == EINTR) continue;
        const int err = errno;
        out->clear();
        return IoError("cannot read", path_, err);
      }
      if (got == 0) break;
      done += static_cast<size_t>(got);
      offset_ += static_cast<uint64_t>(got);
    }
    out->resize(done);
    return absl::OkStatus();
  }

 private:
  const std::string path_;
  const int fd_;
  uint64_t offset_;
};

// A file already in memory, served in pieces (Env's default).
class StringSequentialFile : public SequentialFile {
 public:
  StringSequentialFile(std::string contents, uint64_t offset)
      : contents_(std::move(contents)), position_(std::min<uint64_t>(offset, contents_.size())) {}

  absl::Status Read(size_t n, std::string* out) override {
    const size_t take = std::min(n, contents_.size() - position_);
    out->assign(contents_, position_, take);
    position_ += take;
    return absl::OkStatus();
  }

 private:
  const std::string contents_;
  size_t position_;
};

class PosixEnv : public Env {
 public:
  // O_NOFOLLOW: a symlink planted where a file (or a temp file, whose name
  // is predictable) is about to be written is refused, never written through.
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return IoError("cannot create", path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return IoError("cannot open", path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      return IoError("cannot stat", path, err);
    }
    if (S_ISDIR(st.st_mode)) {
      ::close(fd);
      return absl::InvalidArgumentError(absl::StrCat(path, " is a directory, not a file"));
    }
    std::string contents;
    contents.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (true) {
      if (done == contents.size()) contents.resize(contents.size() + 65536);
      ssize_t n = ::read(fd, contents.data() + done, contents.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        ::close(fd);
        return IoError("cannot read", path, err);
      }
      if (n == 0) break;
      done += static_cast<size_t>(n);
    }
    ::close(fd);
    contents.resize(done);
    return contents;
  }

  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path,
                                                                    uint64_t offset) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return IoError("cannot open", path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      return IoError("cannot stat", path, err);
    }
    if (S_ISDIR(st.st_mode)) {
      ::close(fd);
      return absl::InvalidArgumentError(absl::StrCat(path, " is a directory, not a file"));
    }
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return std::unique_ptr<SequentialFile>(new PosixSequentialFile(path, fd, offset));
  }

  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return IoError("cannot rename " + from + " into", to, errno);
    }
    return absl::OkStatus();
  }

  absl::Status SyncDir(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return IoError("cannot open directory", dir, errno);
    const int synced = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    // EINVAL: a file system that cannot sync a directory (some FUSE and
    // network mounts); there a rename is as durable as it gets.
    if (synced != 0 && err != EINVAL) return IoError("cannot fsync directory", dir, err);
    return absl::OkStatus();
  }

  absl::Status DeleteFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return IoError("cannot delete", path, errno);
    return absl::OkStatus();
  }

  absl::Status DeleteDir(const std::string& path) override {
    if (::rmdir(path.c_str()) != 0) return IoError("cannot delete directory", path, errno);
    return absl::OkStatus();
  }

  bool FileExists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }

  absl::StatusOr<uint64_t> FileSize(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return IoError("cannot stat", path, errno);
    return static_cast<uint64_t>(st.st_size);
  }

  absl::Status CreateDirs(const std::string& path) override {
    if (path.empty()) return absl::InvalidArgumentError("cannot create a directory with no name");
    for (size_t pos = 1; pos <= path.size(); ++pos) {
      if (pos != path.size() && path[pos] != '/') continue;
      std::string prefix = path.substr(0, pos);
      if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
        return IoError("cannot create directory", prefix, errno);
      }
    }
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a directory"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override {
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) return IoError("cannot list", path, errno);
    std::vector<std::string> names;
    while (struct dirent* entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(std::move(name));
    }
    ::closedir(dir);
    return names;
  }
};

// The default AtomicWritableFile: a temp sibling through the Env's own
// NewWritableFile, RenameFile and SyncDir (so a test Env sees every step).
class TempSiblingFile : public AtomicWritableFile {
 public:
  TempSiblingFile(Env* env, std::string path, std::string temp, std::unique_ptr<WritableFile> file)
      : env_(env), path_(std::move(path)), temp_(std::move(temp)), file_(std::move(file)) {}
  ~TempSiblingFile() override {
    if (state_ == State::kCommitted) return;
    if (file_ != nullptr) file_->Close().IgnoreError();
    file_.reset();
    env_->DeleteFile(temp_).IgnoreError();
  }

  absl::Status Append(std::string_view data) override {
    PSTRAIN_RETURN_IF_ERROR(Writing());
    return Failing(file_->Append(data));
  }
  absl::Status Flush() override {
    PSTRAIN_RETURN_IF_ERROR(Writing());
    return Failing(file_->Flush());
  }
  absl::Status Sync() override {
    PSTRAIN_RETURN_IF_ERROR(Writing());
    return Failing(file_->Sync());
  }

  absl::Status Close() override {
    if (state_ == State::kClosed) return absl::OkStatus();
    PSTRAIN_RETURN_IF_ERROR(Writing());
    absl::Status s = file_->Sync();
    if (absl::Status closed = file_->Close(); s.ok()) s = closed;
    file_.reset();
    state_ = s.ok() ? State::kClosed : State::kFailed;
    return s;
  }

  absl::Status Commit() override {
    if (state_ == State::kOpen) PSTRAIN_RETURN_IF_ERROR(Close());
    if (state_ != State::kClosed) return NotWritable();
    if (absl::Status s = env_->RenameFile(temp_, path_); !s.ok()) {
      state_ = State::kFailed;
      return s;
    }
    state_ = State::kCommitted;
    return env_->SyncDir(DirName(path_));
  }

 private:
  enum class State { kOpen, kClosed, kCommitted, kFailed };

  absl::Status NotWritable() const {
    return absl::FailedPreconditionError(absl::StrCat(
        path_, state_ == State::kCommitted ? " is already committed"
                                           : " cannot be committed: an earlier write failed"));
  }
  absl::Status Writing() const {
    if (state_ == State::kOpen) return absl::OkStatus();
    if (state_ == State::kClosed) {
      return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
    }
    return NotWritable();
  }
  // A failed write leaves the file unfit to commit.
  absl::Status Failing(absl::Status s) {
    if (!s.ok()) state_ = State::kFailed;
    return s;
  }

  Env* const env_;
  const std::string path_;
  const std::string temp_;
  std::unique_ptr<WritableFile> file_;  // null once closed
  State state_ = State::kOpen;
};

constexpr char kTempMark[] = ".tmp.";

}  // namespace

std::string AtomicTempPath(const std::string& path) {
  static std::atomic<uint64_t> next{0};
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return absl::StrCat(dir, ".", name, kTempMark, ::getpid(), ".", next.fetch_add(1));
}

std::optional<std::string> CommittedNameOfTemp(std::string_view name) {
  if (name.size() < 2 || name[0] != '.') return std::nullopt;
  const size_t mark = name.rfind(kTempMark);
  if (mark == std::string_view::npos || mark <= 1) return std::nullopt;
  return std::string(name.substr(1, mark - 1));
}

absl::Status CommitFiles(const std::vector<AtomicWritableFile*>& files) {
  for (AtomicWritableFile* f : files) PSTRAIN_RETURN_IF_ERROR(f->Close());
  for (AtomicWritableFile* f : files) PSTRAIN_RETURN_IF_ERROR(f->Commit());
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<AtomicWritableFile>> Env::NewAtomicWritableFile(
    const std::string& path) {
  std::string temp = AtomicTempPath(path);
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, NewWritableFile(temp));
  return std::unique_ptr<AtomicWritableFile>(
      new TempSiblingFile(this, path, std::move(temp), std::move(file)));
}

absl::Status Env::WriteFileAtomic(const std::string& path, std::string_view contents) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<AtomicWritableFile> file, NewAtomicWritableFile(path));
  PSTRAIN_RETURN_IF_ERROR(file->Append(contents));
  return file->Commit();
}

absl::StatusOr<std::unique_ptr<SequentialFile>> Env::NewSequentialFile(const std::string& path,
                                                                       uint64_t offset) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string contents, ReadFile(path));
  return std::unique_ptr<SequentialFile>(new StringSequentialFile(std::move(contents), offset));
}

Env* Env::Default() {
  static Env* const env = new PosixEnv;
  return env;
}

absl::StatusOr<std::string> MemEnv::ReadFile(const std::string& path) {
  absl::MutexLock lock(&mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  return it->second;
}

void MemEnv::Store(const std::string& path, std::string contents) {
  absl::MutexLock lock(&mu_);
  files_[path] = std::move(contents);
}

absl::StatusOr<uint64_t> MemEnv::FileSize(const std::string& path) {
  absl::MutexLock lock(&mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return absl::NotFoundError(absl::StrCat("cannot stat ", path));
  return it->second.size();
}

bool MemEnv::FileExists(const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (files_.count(path)) return true;
  auto it = files_.lower_bound(path + "/");
  return it != files_.end() && it->first.rfind(path + "/", 0) == 0;
}

// Stores the whole file in the MemEnv at every Append.
class MemEnv::File : public WritableFile {
 public:
  File(MemEnv* env, std::string path) : env_(env), path_(std::move(path)) {}
  absl::Status Append(std::string_view data) override {
    if (closed_) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
    contents_.append(data.data(), data.size());
    env_->Store(path_, contents_);
    return absl::OkStatus();
  }
  absl::Status Flush() override { return absl::OkStatus(); }
  absl::Status Sync() override { return absl::OkStatus(); }
  absl::Status Close() override {
    closed_ = true;
    return absl::OkStatus();
  }

 private:
  MemEnv* const env_;
  const std::string path_;
  std::string contents_;
  bool closed_ = false;
};

absl::StatusOr<std::unique_ptr<WritableFile>> MemEnv::NewWritableFile(const std::string& path) {
  Store(path, "");
  return std::unique_ptr<WritableFile>(new File(this, path));
}

absl::Status MemEnv::CreateDirs(const std::string&) { return absl::OkStatus(); }

absl::StatusOr<std::vector<std::string>> MemEnv::ListDir(const std::string& path) {
  absl::MutexLock lock(&mu_);
  std::string prefix = path + "/";
  std::vector<std::string> names;
  for (auto it = files_.lower_bound(prefix); it != files_.end(); ++it) {
    if (it->first.rfind(prefix, 0) != 0) break;
    std::string rest = it->first.substr(prefix.size());
    std::string name = rest.substr(0, rest.find('/'));
    if (names.empty() || names.back() != name) names.push_back(name);
  }
  if (names.empty()) return absl::NotFoundError(absl::StrCat("cannot list ", path));
  return names;
}

absl::Status MemEnv::RenameFile(const std::string& from, const std::string& to) {
  absl::MutexLock lock(&mu_);
  auto it = files_.find(from);
  if (it == files_.end()) return absl::NotFoundError(absl::StrCat("cannot rename ", from));
  std::string contents = std::move(it->second);
  files_.erase(it);
  files_[to] = std::move(contents);
  return absl::OkStatus();
}

absl::Status MemEnv::DeleteFile(const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (files_.erase(path) == 0) return absl::NotFoundError(absl::StrCat("cannot delete ", path));
  return absl::OkStatus();
}

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string JoinPath(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  bool a_slash = a.back() == '/';
  bool b_slash = b.front() == '/';
  if (a_slash && b_slash) return a + b.substr(1);
  if (a_slash || b_slash) return a + b;
  return a + "/" + b;
}

}  // namespace pstrain
