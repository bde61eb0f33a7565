#include "data/stream/file_list.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "data/stream/file_pattern.h"
#include "glog/logging.h"

namespace pstrain {

std::string FileListPath(const std::string& job_dir) {
  return JoinPath(JoinPath(job_dir, "input"), "files.txt");
}

absl::StatusOr<std::vector<std::string>> ReadFileList(Env* env, const std::string& path) {
  if (!env->FileExists(path)) return std::vector<std::string>();
  PSTRAIN_ASSIGN_OR_RETURN(const std::string text, env->ReadFile(path));
  std::vector<std::string> files;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    files.emplace_back(line);
  }
  return files;
}

absl::StatusOr<int64_t> UpdateFileList(Env* env, const std::string& path,
                                       std::string_view patterns) {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> files, ReadFileList(env, path));
  absl::flat_hash_set<std::string> known(files.begin(), files.end());
  std::vector<std::string> found;
  for (absl::string_view entry : absl::StrSplit(absl::string_view(patterns.data(), patterns.size()),
                                                ',', absl::SkipWhitespace())) {
    absl::StatusOr<std::vector<std::string>> matched =
        ExpandFilePatterns(env, std::string_view(entry.data(), entry.size()), "train_files");
    if (absl::IsNotFound(matched.status())) continue;  // none yet
    PSTRAIN_RETURN_IF_ERROR(matched.status());
    for (std::string& f : *matched) {
      if (known.insert(f).second) found.push_back(std::move(f));
    }
  }
  if (found.empty()) return 0;
  std::sort(found.begin(), found.end());
  std::string text;
  for (const std::string& f : files) absl::StrAppend(&text, f, "\n");
  int64_t added = 0;
  for (const std::string& f : found) {
    if (f.find('\n') != std::string::npos) {
      // The list holds a name a line; the others go on being listed.
      LOG_EVERY_N(WARNING, 60) << "input: " << absl::CEscape(f)
                               << " matches train_files but its name has a line break, which "
                               << path << " cannot list: it is not trained on (rename it)";
      continue;
    }
    absl::StrAppend(&text, f, "\n");
    ++added;
  }
  if (added == 0) return 0;
  PSTRAIN_RETURN_IF_ERROR(env->WriteFileAtomic(path, text));
  return added;
}

FileListFollower::FileListFollower(Env* env, std::string path, std::string patterns,
                                   double poll_secs)
    : env_(env), path_(std::move(path)), patterns_(std::move(patterns)), poll_secs_(poll_secs) {
  thread_ = std::thread([this] { Run(); });
}

FileListFollower::~FileListFollower() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void FileListFollower::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::duration<double>(poll_secs_), [this] { return stop_; });
    if (stop_) return;
    lock.unlock();
    absl::StatusOr<int64_t> added = UpdateFileList(env_, path_, patterns_);
    if (!added.ok()) {
      LOG(WARNING) << "input: cannot list " << patterns_ << " for new files (tried again in "
                   << poll_secs_ << " s): " << added.status();
    } else if (*added > 0) {
      LOG(INFO) << "input: " << *added << " new file(s) match " << patterns_ << " (listed in "
                << path_ << ")";
    }
    lock.lock();
  }
}

}  // namespace pstrain
