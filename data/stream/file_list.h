#ifndef PSTRAIN_DATA_STREAM_FILE_LIST_H_
#define PSTRAIN_DATA_STREAM_FILE_LIST_H_

// The training files of a job that follows its train_files (online
// training, training.follow), in the order they were found. The chief lists
// the patterns every poll_secs and appends the files it has not seen, in
// name order (hourly partitions "logs/2026-11-27/hour=13/part-*" land in
// time order); the replicas read the list and deal file i to replica
// i % n. The list is a text file in the job dir (input/files.txt), a path
// per line, rewritten atomically: every replica, and every restart, agrees
// on each file's place, which never changes.

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace pstrain {

// The list's path in a job dir.
std::string FileListPath(const std::string& job_dir);

// The list; empty when there is none yet.
absl::StatusOr<std::vector<std::string>> ReadFileList(Env* env, const std::string& path);

// Lists `patterns` (as ExpandFilePatterns; an entry that matches nothing
// yet is no error) and appends the files the list does not hold, in name
// order. The number appended. A name with a line break cannot be listed: it
// is left out, with a warning naming it (every 60th time it is found).
absl::StatusOr<int64_t> UpdateFileList(Env* env, const std::string& path,
                                       std::string_view patterns);

// UpdateFileList every `poll_secs` on a thread of its own, until destroyed;
// each update that finds files is logged, a failed one too (and retried at
// the next poll).
class FileListFollower {
 public:
  FileListFollower(Env* env, std::string path, std::string patterns, double poll_secs);
  ~FileListFollower();
  FileListFollower(const FileListFollower&) = delete;
  FileListFollower& operator=(const FileListFollower&) = delete;

 private:
  void Run();

  Env* const env_;
  const std::string path_;
  const std::string patterns_;
  const double poll_secs_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_STREAM_FILE_LIST_H_
