#ifndef PSTRAIN_TESTING_SUPERVISOR_TEST_UTIL_H_
#define PSTRAIN_TESTING_SUPERVISOR_TEST_UTIL_H_

// Helpers of the Supervisor's tests.
#include <errno.h>
#include <signal.h>

#include <algorithm>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "launch/supervisor.h"

namespace pstrain {
namespace testing_util {

// A sink that keeps every line, and lets a test wait for one.
class Lines {
 public:
  std::function<void(std::string_view)> Sink() {
    return [this](std::string_view line) {
      absl::MutexLock lock(&mu_);
      lines_.emplace_back(line);
    };
  }

  std::vector<std::string> Get() const {
    absl::MutexLock lock(&mu_);
    return lines_;
  }

  // Whether `line` arrives within `timeout`.
  bool WaitFor(const std::string& line, absl::Duration timeout = absl::Seconds(10)) const {
    absl::MutexLock lock(&mu_);
    auto has_line = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return std::find(lines_.begin(), lines_.end(), line) != lines_.end();
    };
    return mu_.AwaitWithTimeout(absl::Condition(&has_line), timeout);
  }

  // Position of the first line equal to `line`, or -1.
  int IndexOf(const std::string& line) const {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < lines_.size(); ++i) {
      if (lines_[i] == line) return static_cast<int>(i);
    }
    return -1;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

inline ProcessSpec Sh(const std::string& name, const std::string& script,
                      std::vector<std::pair<std::string, std::string>> env = {}) {
  return ProcessSpec{name, {"/bin/sh", "-c", script}, std::move(env)};
}

inline SupervisorOptions Options(Lines& lines, absl::Duration stop_grace = absl::Seconds(5)) {
  SupervisorOptions options;
  options.sink = lines.Sink();
  options.stop_grace = stop_grace;
  return options;
}

// Direct children are reaped by the supervisor, so they must be gone entirely.
inline void ExpectAllGone(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    errno = 0;
    EXPECT_EQ(kill(pid, 0), -1) << "pid " << pid << " is still there";
    EXPECT_EQ(errno, ESRCH) << "pid " << pid;
  }
}

}  // namespace testing_util
}  // namespace pstrain

#endif  // PSTRAIN_TESTING_SUPERVISOR_TEST_UTIL_H_
