#include "launch/supervisor.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

// How often Wait() looks for exited children. Polling waitpid(pid, WNOHANG)
// avoids a SIGCHLD handler, which would be process-wide state the launcher
// and other libraries could fight over.
constexpr absl::Duration kPollInterval = absl::Milliseconds(20);
constexpr char kLauncher[] = "[launcher] ";

std::string SignalName(int sig) {
  if (const char* abbrev = sigabbrev_np(sig)) return absl::StrCat("SIG", abbrev);
  if (const char* description = sigdescr_np(sig)) return description;  // real-time signals
  return "unknown signal";
}

absl::Status Validate(const std::vector<ProcessSpec>& specs) {
  if (specs.empty()) return absl::InvalidArgumentError("no processes to start");
  std::set<std::string> names;
  for (const ProcessSpec& spec : specs) {
    if (spec.name.empty()) return absl::InvalidArgumentError("a process has an empty name");
    if (!names.insert(spec.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("two processes are named ", spec.name));
    }
    if (spec.argv.empty() || spec.argv[0].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(spec.name, " has no executable (empty argv)"));
    }
    for (const auto& [name, value] : spec.env) {
      if (name.empty() || name.find('=') != std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat(spec.name, ": bad environment variable name \"", name, "\""));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string ExitInfo::Describe() const {
  if (exited) return absl::StrCat("exited with status ", exit_code);
  if (signaled) return absl::StrCat("was killed by signal ", signal, " (", SignalName(signal), ")");
  return "ended, but its status was lost (reaped by someone else)";
}

void WriteLineToStdout(std::string_view line) {
  // stdout's own lock, so the launcher's other stdio output cannot split a line either.
  flockfile(stdout);
  fwrite(line.data(), 1, line.size(), stdout);
  fputc('\n', stdout);
  fflush(stdout);
  funlockfile(stdout);
}

struct Supervisor::Child {
  ExitInfo info;
  bool reaped = false;
  ProcessSpec spec;
  size_t stream = 0;                     // its current run's output, in streams_
  std::optional<absl::Time> restart_at;  // reaped, and to be started again then
};

static_assert(std::atomic<Supervisor*>::is_always_lock_free,
              "RequestStopFromSignal() must be async-signal-safe");
std::atomic<Supervisor*> Supervisor::latest_{nullptr};

Supervisor::Supervisor(SupervisorOptions options, int stop_fd, int wake_fd)
    : options_(std::move(options)), stop_fd_(stop_fd), wake_fd_(wake_fd) {}

absl::StatusOr<std::unique_ptr<Supervisor>> Supervisor::Start(std::vector<ProcessSpec> specs,
                                                              SupervisorOptions options) {
  if (absl::Status status = Validate(specs); !status.ok()) return status;
  if (!options.sink) options.sink = WriteLineToStdout;
  const int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) return absl::ErrnoToStatus(errno, "cannot start the job: eventfd");
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    const int error = errno;
    close(stop_fd);
    return absl::ErrnoToStatus(error, "cannot start the job: eventfd");
  }
  std::unique_ptr<Supervisor> supervisor(new Supervisor(std::move(options), stop_fd, wake_fd));

  supervisor->base_env_ = CurrentEnvironment();
  for (const ProcessSpec& spec : specs) {
    if (absl::Status status = supervisor->StartOne(spec); !status.ok()) {
      supervisor->KillAllAndReap();
      return status;
    }
  }
  supervisor->reader_ = std::thread(&Supervisor::ReaderLoop, supervisor.get());
  latest_.store(supervisor.get());
  return supervisor;
}

absl::Status Supervisor::StartOne(const ProcessSpec& spec) {
  absl::StatusOr<SpawnedProcess> process = SpawnProcess(spec, base_env_);
  if (!process.ok()) return process.status();
  Child child;
  child.info.name = spec.name;
  child.info.pid = process->pid;
  child.spec = spec;
  Stream stream;
  stream.prefix = absl::StrCat("[", spec.name, "] ");
  stream.fd = process->output_fd;
  absl::MutexLock lock(&mu_);
  child.stream = streams_.size();
  children_.push_back(std::move(child));
  pids_.push_back(process->pid);
  streams_.push_back(std::move(stream));
  return absl::OkStatus();
}

bool Supervisor::MayRestart(const Child& child) const {
  const ExitInfo& info = child.info;
  const bool died = info.signaled || (info.exited && info.exit_code == options_.restart_exit_code);
  return died && !info.stopped_by_supervisor && info.restarts < options_.max_restarts;
}

void Supervisor::ScheduleRestart(Child& child) {
  child.restart_at = absl::Now() + options_.restart_delay;
  Emit(absl::StrCat(kLauncher, child.info.name, " ", child.info.Describe(), "; restarting it in ",
                    absl::FormatDuration(options_.restart_delay), " (restart ",
                    child.info.restarts + 1, " of ", options_.max_restarts, ")"));
}

void Supervisor::RestartDue(absl::Time now) {
  for (size_t i = 0; i < children_.size(); ++i) {
    Child& child = children_[i];
    if (!child.restart_at.has_value() || now < *child.restart_at) continue;
    child.restart_at.reset();
    absl::StatusOr<SpawnedProcess> process = SpawnProcess(child.spec, base_env_);
    if (!process.ok()) {
      failed_index_ = static_cast<int>(i);
      Emit(absl::StrCat(kLauncher, "cannot restart ", child.info.name, ": ",
                        process.status().message(), "; stopping the rest"));
      BeginStop(StopReason::kFailure);
      return;
    }
    const int restarts = child.info.restarts + 1;
    child.info = ExitInfo();
    child.info.name = child.spec.name;
    child.info.pid = process->pid;
    child.info.restarts = restarts;
    child.reaped = false;
    Stream stream;
    stream.prefix = absl::StrCat("[", child.spec.name, "] ");
    stream.fd = process->output_fd;
    {
      absl::MutexLock lock(&mu_);
      child.stream = streams_.size();
      streams_.push_back(std::move(stream));
      pids_[i] = process->pid;
    }
    // The reader polls the new output from its next round.
    const uint64_t one = 1;
    if (write(wake_fd_, &one, sizeof(one)) < 0) {
      LOG(ERROR) << "waking the output reader: " << strerror(errno);
    }
    Emit(absl::StrCat(kLauncher, "restarted ", child.info.name, " (pid ", process->pid, ")"));
  }
}

void Supervisor::KillAllAndReap() {
  // They have only just started; there is no state worth a grace period.
  SignalRunning(SIGKILL);
  for (Child& child : children_) {
    int status = 0;
    while (waitpid(child.info.pid, &status, 0) < 0 && errno == EINTR) {
    }
    child.reaped = true;
  }
  FinishOutput();
  waited_ = true;
  result_.summary = "the job did not start";
}

Supervisor::~Supervisor() {
  Supervisor* self = this;
  latest_.compare_exchange_strong(self, nullptr);
  if (!waited_) {
    RequestStop();
    Wait("", absl::ZeroDuration());
  }
  close(stop_fd_);
  close(wake_fd_);
}

void Supervisor::RequestStop() {
  const int saved_errno = errno;  // a signal handler must not change errno
  const uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof(one)) < 0) {
  }
  errno = saved_errno;
}

void Supervisor::RequestStopFromSignal() {
  if (Supervisor* supervisor = latest_.load()) supervisor->RequestStop();
}

std::vector<pid_t> Supervisor::pids() const {
  absl::MutexLock lock(&mu_);
  return pids_;
}

bool Supervisor::TryReap(Child& child) {
  const pid_t pid = child.info.pid;
  siginfo_t info = {};
  // WNOWAIT: look without reaping, so the pid, and the process group id equal
  // to it, cannot be reused while the group is killed below.
  if (waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    if (errno == EINTR) return false;
    LOG(ERROR) << "waitid(" << pid << ") for " << child.info.name << ": " << strerror(errno);
    child.reaped = true;  // ECHILD: someone else reaped it; its status is lost
    return true;
  }
  if (info.si_pid != pid) return false;  // still running
  // Whatever it left behind in its process group (a helper started with '&').
  kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  child.reaped = true;
  if (WIFEXITED(status)) {
    child.info.exited = true;
    child.info.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    child.info.signaled = true;
    child.info.signal = WTERMSIG(status);
  }
  return true;
}

int Supervisor::Running() const {
  int running = 0;
  for (const Child& child : children_) {
    running += !child.reaped || child.restart_at.has_value() ? 1 : 0;
  }
  return running;
}

std::string Supervisor::RunningNames() const {
  std::vector<std::string> names;
  for (const Child& child : children_) {
    if (!child.reaped) names.push_back(child.info.name);
  }
  return absl::StrJoin(names, ", ");
}

void Supervisor::SignalRunning(int sig) {
  for (Child& child : children_) {
    if (child.reaped) continue;
    const pid_t pid = child.info.pid;
    child.info.stopped_by_supervisor = true;
    // The group reaches the child's helpers too. A child that moved to
    // another group (setsid) is signalled directly as well.
    if (kill(-pid, sig) != 0 && errno != ESRCH) {
      LOG(ERROR) << "kill(-" << pid << ", " << sig << "): " << strerror(errno);
    }
    if (getpgid(pid) != pid) kill(pid, sig);
  }
}

void Supervisor::BeginStop(StopReason reason) {
  reason_ = reason;
  stopping_ = true;
  for (Child& child : children_) child.restart_at.reset();  // dead ones stay dead
  kill_deadline_ = absl::Now() + options_.stop_grace;
  SignalRunning(SIGTERM);
}

JobResult Supervisor::Wait(const std::string& primary, absl::Duration after_primary_grace) {
  if (waited_) return result_;
  int primary_index = -1;
  for (size_t i = 0; i < children_.size(); ++i) {
    if (children_[i].info.name == primary) primary_index = static_cast<int>(i);
  }
  if (!primary.empty() && primary_index < 0) {
    Emit(absl::StrCat(kLauncher, "no process is named \"", primary, "\"; stopping all processes"));
    BeginStop(StopReason::kUnknownPrimary);
  }
  std::optional<absl::Time> primary_deadline;
  while (Running() > 0) {
    // Sleeps up to kPollInterval; wakes at once on RequestStop().
    pollfd stop_poll = {stop_fd_, POLLIN, 0};
    bool stop_requested = false;
    if (poll(&stop_poll, 1, absl::ToInt64Milliseconds(kPollInterval)) > 0) {
      uint64_t count = 0;
      stop_requested = read(stop_fd_, &count, sizeof(count)) == sizeof(count);
    }
    for (size_t i = 0; i < children_.size(); ++i) {
      Child& child = children_[i];
      if (child.reaped || !TryReap(child)) continue;
      {
        absl::MutexLock lock(&mu_);
        DrainLocked(streams_[child.stream], /*until_empty=*/true);
      }
      if (!child.info.ok() && !stopping_ && MayRestart(child)) {
        ScheduleRestart(child);
      } else if (!child.info.ok() && !stopping_) {
        failed_index_ = static_cast<int>(i);
        Emit(absl::StrCat(kLauncher, child.info.name, " ", child.info.Describe(),
                          Running() > 0 ? "; stopping the rest" : ""));
        BeginStop(StopReason::kFailure);
      } else if (static_cast<int>(i) == primary_index && child.info.ok() && !stopping_) {
        primary_deadline = absl::Now() + after_primary_grace;
      }
    }
    if (Running() == 0) break;
    const absl::Time now = absl::Now();
    if (!stopping_) RestartDue(now);
    if (stop_requested && !stopping_) {
      Emit(absl::StrCat(kLauncher, "stop requested; stopping ", RunningNames(),
                        " (SIGTERM, then SIGKILL after ", absl::FormatDuration(options_.stop_grace),
                        ")"));
      BeginStop(StopReason::kRequested);
    } else if (stop_requested && !kill_sent_) {
      Emit(absl::StrCat(kLauncher, "stop requested again; sending SIGKILL to ", RunningNames()));
      SignalRunning(SIGKILL);
      kill_sent_ = true;
    }
    if (primary_deadline.has_value() && !stopping_ && now >= *primary_deadline) {
      Emit(absl::StrCat(kLauncher, primary, " exited 0; stopping ", RunningNames(),
                        ", still running ", absl::FormatDuration(after_primary_grace), " later"));
      BeginStop(StopReason::kPrimaryDone);
    }
    if (stopping_ && !kill_sent_ && now >= kill_deadline_) {
      Emit(absl::StrCat(kLauncher, RunningNames(), " still running ",
                        absl::FormatDuration(options_.stop_grace),
                        " after SIGTERM; sending SIGKILL"));
      SignalRunning(SIGKILL);
      kill_sent_ = true;
    }
  }
  FinishOutput();
  waited_ = true;
  result_ = BuildResult(primary, after_primary_grace);
  return result_;
}

JobResult Supervisor::BuildResult(const std::string& primary,
                                  absl::Duration after_primary_grace) const {
  JobResult result;
  std::vector<std::string> failed;   // "name how", for every process that did not exit 0
  std::vector<std::string> stopped;  // names of the processes the supervisor signalled
  for (const Child& child : children_) {
    result.exits.push_back(child.info);
    if (!child.info.ok())
      failed.push_back(absl::StrCat(child.info.name, " ", child.info.Describe()));
    if (child.info.stopped_by_supervisor) stopped.push_back(child.info.name);
  }
  const std::string all_ok = children_.size() == 1
                                 ? "the process exited 0"
                                 : absl::StrCat("all ", children_.size(), " processes exited 0");
  switch (reason_) {
    case StopReason::kNone:
      result.ok = failed.empty();
      result.summary = result.ok ? all_ok : absl::StrJoin(failed, "; ");
      break;
    case StopReason::kFailure: {
      const ExitInfo& info = children_[failed_index_].info;
      result.ok = false;
      result.summary = absl::StrCat(info.name, " ", info.Describe(),
                                    stopped.empty() ? "" : "; stopped the rest");
      break;
    }
    case StopReason::kPrimaryDone: {
      // Those stopped do not count; any other failure would have been a kFailure.
      result.ok = true;
      for (const Child& child : children_) {
        if (!child.info.stopped_by_supervisor && !child.info.ok()) result.ok = false;
      }
      result.summary =
          absl::StrCat(primary, " exited 0; stopped ", absl::StrJoin(stopped, ", "),
                       ", still running ", absl::FormatDuration(after_primary_grace), " later");
      break;
    }
    case StopReason::kRequested:
      result.ok = failed.empty();
      result.summary =
          absl::StrCat("stop requested; ", result.ok ? all_ok : absl::StrJoin(failed, "; "));
      break;
    case StopReason::kUnknownPrimary:
      result.ok = false;
      result.summary = absl::StrCat("no process is named \"", primary, "\"; stopped all processes");
      break;
  }
  return result;
}

}  // namespace pstrain
