#include "data/stream/followed_files.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/stream/file_list.h"

namespace pstrain {

FollowedFiles::FollowedFiles(Env* env, std::string list, double poll_secs, ExampleFormat format,
                             std::vector<std::string> files)
    : env_(env),
      list_(std::move(list)),
      poll_secs_(poll_secs),
      format_(format),
      files_(std::move(files)) {}

absl::StatusOr<bool> FollowedFiles::Refresh(int64_t limit) {
  const auto now = std::chrono::steady_clock::now();
  if (listed_ && now - last_listed_ <
                     std::chrono::duration<double>(std::min(1.0, std::max(0.01, poll_secs_)))) {
    return false;
  }
  listed_ = true;
  last_listed_ = now;
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> files, ReadFileList(env_, list_));
  if (limit > 0 && static_cast<int64_t>(files.size()) >= limit) files.resize(limit);
  if (limit > 0 ? static_cast<int64_t>(files.size()) < limit : files.size() < files_.size()) {
    return absl::DataLossError(
        absl::StrCat(list_, " lists ", files.size(), " files, fewer than the ",
                     std::max<int64_t>(limit, static_cast<int64_t>(files_.size())),
                     " it listed before: its files keep their places"));
  }
  // Files of another format than the stream's are refused, not misread.
  for (size_t i = files_.size(); i < files.size(); ++i) {
    if (const ExampleFormat format = ExampleFormatOfFile(files[i]); format != format_) {
      return absl::InvalidArgumentError(absl::StrCat(
          files[i], ", listed in ", list_, ", is ", ExampleFormatName(format),
          " by its name, but this stream reads ", ExampleFormatName(format_),
          " (the format of the files listed first, or of the pattern's names): the files an "
          "online job follows are all of one format"));
    }
  }
  files_ = std::move(files);
  return true;
}

}  // namespace pstrain
