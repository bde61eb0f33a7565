#ifndef PSTRAIN_DATA_STREAM_FOLLOWED_FILES_H_
#define PSTRAIN_DATA_STREAM_FOLLOWED_FILES_H_

// Online training (training.follow): the file list (data/stream/file_list.h) an
// ExampleStream follows, read again as new files land. A file keeps its place
// in the list, so file i always goes to the same replica; every new file has
// the stream's format by its name.
//
// Not thread-safe: the stream's reading thread owns it.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "data/formats/example_format.h"

namespace pstrain {

class FollowedFiles {
 public:
  // The list file `list`, read again at most every poll_secs (and at least
  // every second); `files`, the list as read before, and `format`, the
  // stream's. `env` must outlive this.
  FollowedFiles(Env* env, std::string list, double poll_secs, ExampleFormat format,
                std::vector<std::string> files);

  // Reads the list again, its first `limit` files if `limit` > 0, unless it
  // was read less than min(1, poll_secs) seconds (at least 10 ms) ago: true
  // when it was read (files() is then the new list). DataLoss for a list
  // with fewer files than before, or than `limit`; InvalidArgument for a new
  // file of another format than the stream's; the errors of ReadFileList.
  absl::StatusOr<bool> Refresh(int64_t limit = 0);

  // The list as last read.
  const std::vector<std::string>& files() const { return files_; }

 private:
  Env* const env_;
  const std::string list_;
  const double poll_secs_;
  const ExampleFormat format_;
  std::vector<std::string> files_;
  bool listed_ = false;
  std::chrono::steady_clock::time_point last_listed_;
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_STREAM_FOLLOWED_FILES_H_
