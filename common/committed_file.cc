#include "common/committed_file.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<CommittedFile>> CommittedFile::Create(Env* env, std::string path) {
  std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  absl::StatusOr<std::unique_ptr<WritableFile>> file = env->NewWritableFile(tmp);
  if (!file.ok()) return file.status();
  return std::unique_ptr<CommittedFile>(
      new CommittedFile(env, std::move(path), std::move(tmp), std::move(*file)));
}

CommittedFile::CommittedFile(Env* env, std::string path, std::string tmp,
                             std::unique_ptr<WritableFile> file)
    : env_(env), path_(std::move(path)), tmp_(std::move(tmp)), file_(std::move(file)) {}

CommittedFile::~CommittedFile() {
  if (committed_) return;
  if (file_ != nullptr) file_->Close().IgnoreError();
  env_->DeleteFile(tmp_).IgnoreError();
}

absl::Status CommittedFile::Append(std::string_view piece) {
  if (file_ == nullptr || committed_) {
    return absl::FailedPreconditionError(absl::StrCat(path_, " is already closed"));
  }
  crc_ = crc32c::Extend(crc_, piece.data(), piece.size());
  size_ += piece.size();
  return file_->Append(piece);
}

absl::Status CommittedFile::Commit() {
  if (file_ == nullptr || committed_) {
    return absl::FailedPreconditionError(absl::StrCat(path_, " is already closed"));
  }
  absl::Status status = file_->Sync();
  if (absl::Status s = file_->Close(); status.ok()) status = s;
  file_.reset();
  if (status.ok()) status = env_->RenameFile(tmp_, path_);
  committed_ = status.ok();
  return status;
}

}  // namespace pstrain
