#include "common/committed_file.h"

#include <utility>

#include "common/crc32c.h"
#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<CommittedFile>> CommittedFile::Create(Env* env, std::string path) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<AtomicWritableFile> file,
                           env->NewAtomicWritableFile(path));
  return std::unique_ptr<CommittedFile>(new CommittedFile(std::move(path), std::move(file)));
}

absl::Status CommittedFile::Append(std::string_view piece) {
  PSTRAIN_RETURN_IF_ERROR(file_->Append(piece));
  crc_ = crc32c::Extend(crc_, piece.data(), piece.size());
  size_ += piece.size();
  return absl::OkStatus();
}

absl::Status CommittedFile::Commit() { return file_->Commit(); }

}  // namespace pstrain
