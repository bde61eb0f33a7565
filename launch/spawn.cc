#include "launch/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace pstrain {
namespace {

// Runs in the child between fork() and execve(): async-signal-safe calls only
// (the launcher has other threads, so e.g. malloc's lock may be held forever).
[[noreturn]] void ReportErrnoAndExit(int status_fd) {
  const int error = errno;
  if (write(status_fd, &error, sizeof(error)) < 0) {
  }
  _exit(127);
}

[[noreturn]] void RunChild(pid_t parent, int out_fd, int status_fd, char* const argv[],
                           char* const envp[]) {
  // Its own process group, so that a stop signal also reaches the helpers it
  // forks, and a terminal's Ctrl-C reaches only the launcher, which then stops
  // the job in order.
  setpgid(0, 0);
  // If the launcher died before prctl(), the death signal will never come and
  // the child has already been re-parented.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) ReportErrnoAndExit(status_fd);
  if (getppid() != parent) _exit(127);
  // In this order so that any out_fd, even 0, ends up on 1 and 2.
  if (dup2(out_fd, STDOUT_FILENO) < 0 || dup2(out_fd, STDERR_FILENO) < 0) {
    ReportErrnoAndExit(status_fd);
  }
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0) ReportErrnoAndExit(status_fd);
  // dup2(fd, fd) keeps FD_CLOEXEC, so clear it explicitly; then let exec close
  // every other descriptor the launcher had open (the child must not hold a
  // pipe end that someone waits on).
  for (int fd = 0; fd <= 2; ++fd) fcntl(fd, F_SETFD, 0);
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);  // best effort; needs Linux 5.11
  // execve() resets handlers but keeps ignored signals and the signal mask;
  // a role must see SIGTERM even if the launcher blocks or ignores it.
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(argv[0], argv, envp);
  ReportErrnoAndExit(status_fd);
}

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> result;
  result.reserve(strings.size() + 1);
  for (const std::string& s : strings) result.push_back(const_cast<char*>(s.c_str()));
  result.push_back(nullptr);
  return result;
}

std::vector<std::string> MergeEnv(
    const std::vector<std::string>& base,
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> env = base;
  for (const auto& [name, value] : overrides) {
    const std::string entry = absl::StrCat(name, "=", value);
    bool replaced = false;
    for (std::string& existing : env) {
      if (existing.size() > name.size() && existing.compare(0, name.size(), name) == 0 &&
          existing[name.size()] == '=') {
        existing = entry;
        replaced = true;
      }
    }
    if (!replaced) env.push_back(entry);
  }
  return env;
}

}  // namespace

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    env.emplace_back(*entry);
  }
  return env;
}

absl::StatusOr<SpawnedProcess> SpawnProcess(const ProcessSpec& spec,
                                            const std::vector<std::string>& base_env) {
  // Everything the child needs is built before fork() (see RunChild).
  const std::vector<std::string> env = MergeEnv(base_env, spec.env);
  const std::vector<char*> argv = CStrings(spec.argv);
  const std::vector<char*> envp = CStrings(env);
  const std::string what = absl::StrCat("cannot start ", spec.name);

  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, absl::StrCat(what, ": pipe"));
  // Closed by a successful execve(); carries errno back if it fails.
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) {
    const int error = errno;
    close(out[0]);
    close(out[1]);
    return absl::ErrnoToStatus(error, absl::StrCat(what, ": pipe"));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) RunChild(parent, out[1], status_pipe[1], argv.data(), envp.data());
  const int fork_errno = errno;
  close(out[1]);
  close(status_pipe[1]);
  if (pid < 0) {
    close(out[0]);
    close(status_pipe[0]);
    return absl::ErrnoToStatus(fork_errno, absl::StrCat(what, ": fork"));
  }

  int child_errno = 0;
  ssize_t n;
  do {
    n = read(status_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(status_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    close(out[0]);
    return absl::ErrnoToStatus(child_errno, absl::StrCat(what, ": ", spec.argv[0]));
  }
  // Only the read end: the child's stdout must stay blocking.
  fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);

  return SpawnedProcess{pid, out[0]};
}

}  // namespace pstrain
