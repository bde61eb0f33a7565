#ifndef PSTRAIN_LAUNCH_SUPERVISOR_H_
#define PSTRAIN_LAUNCH_SUPERVISOR_H_

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "launch/spawn.h"

namespace pstrain {

// How a process ended.
struct ExitInfo {
  std::string name;
  pid_t pid = 0;
  bool exited = false;  // ended by exit(); exit_code is valid
  int exit_code = 0;
  bool signaled = false;  // ended by a signal; signal is valid
  int signal = 0;
  // The supervisor sent it SIGTERM (or SIGKILL) before it ended: its end was
  // asked for rather than chosen, which JobResult::ok and the summary weigh
  // differently.
  bool stopped_by_supervisor = false;
  // Times the supervisor started it again after it died (this is the last run).
  int restarts = 0;

  // Exited with status 0.
  bool ok() const { return exited && exit_code == 0; }
  // "exited with status 3", "was killed by signal 9 (SIGKILL)".
  std::string Describe() const;
};

// Writes `line` and a newline to stdout in one locked stdio call, so lines
// from several threads never interleave mid-line. The default sink.
void WriteLineToStdout(std::string_view line);

struct SupervisorOptions {
  // Receives every complete output line of every child (stdout and stderr
  // merged per child), already prefixed "[name] ", and the supervisor's own
  // lines, prefixed "[launcher] ". A Supervisor never calls it concurrently
  // with itself, but calls it from its reader thread and from the thread in
  // Wait() or the destructor; it must be thread-safe if it is shared with
  // other Supervisors or threads. An empty function means WriteLineToStdout.
  std::function<void(std::string_view line)> sink = WriteLineToStdout;
  // Between SIGTERM and SIGKILL when stopping processes.
  absl::Duration stop_grace = absl::Seconds(10);
  // Single-task recovery: a process that dies by a signal the supervisor did
  // not send (SIGKILL, a crash, the OOM killer), or exits with
  // `restart_exit_code` (the tasks' "restart me"), is started again after
  // `restart_delay`, at most `max_restarts` times per process; the others
  // keep running. Any other failure, or one past the budget, ends the job.
  int max_restarts = 0;
  int restart_exit_code = 138;  // kExitRestartable (role/role_process.h)
  absl::Duration restart_delay = absl::Seconds(1);
};

struct JobResult {
  // Every process exited 0. Exception: when the primary exited 0, processes
  // still running `after_primary_grace` later are stopped and do not fail the
  // job however they end (the job's work is done; a ps never exits by itself).
  bool ok = false;
  // One line, e.g. "worker:1 was killed by signal 9 (SIGKILL); stopped the
  // rest" or "all 4 processes exited 0".
  std::string summary;
  // Every child, in start order.
  std::vector<ExitInfo> exits;
};

// Runs the processes of one job as children of this process and supervises
// them: their output goes, line by line and prefixed, to the sink; the first
// failure stops the rest; the job can be stopped from a signal handler.
//
// Every child runs in its own process group (so a stop signal also reaches
// the helpers it forked, and a terminal's Ctrl-C reaches only the launcher,
// which then stops the job in order), with stdin on /dev/null, default signal
// dispositions, and PR_SET_PDEATHSIG=SIGKILL (which reaches the child only,
// not its helpers, if the launcher itself is SIGKILLed). When a child ends,
// whatever is left in its process group is SIGKILLed: nothing outlives the
// Supervisor.
//
// Threading: Start(), Wait() and the destructor must be called from one
// thread, and that thread must outlive the Supervisor (normally main()): the
// kernel delivers PR_SET_PDEATHSIG when the *thread* that forked a child
// exits. RequestStop() and pids() may be called from any thread;
// RequestStop() and RequestStopFromSignal() also from a signal handler.
// Children are reaped with waitpid() on their own pids only, so other
// children of the process are left alone.
class Supervisor {
 public:
  // Starts every process in order. Each start is confirmed synchronously
  // (exec failures come back over a close-on-exec pipe), so a missing
  // executable fails here with the errno's code (NotFound, PermissionDenied,
  // ...) and "cannot start worker:1: /path/x: No such file or directory"; the
  // processes started before it are killed and reaped. InvalidArgument for an
  // empty list, an empty or repeated name, an empty argv, or an environment
  // variable name that is empty or contains '='.
  static absl::StatusOr<std::unique_ptr<Supervisor>> Start(std::vector<ProcessSpec> specs,
                                                           SupervisorOptions options);

  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // If Wait() has not returned: stops everything (SIGTERM, stop_grace,
  // SIGKILL) as RequestStop() would. Then reaps every child and joins the
  // reader thread, so nothing is left behind. May block up to stop_grace.
  ~Supervisor();

  // Blocks until the job ends and every child is reaped and all of its output
  // has gone to the sink. The job ends when:
  //  - every process has exited 0 (ok);
  //  - a process that may be restarted (SupervisorOptions::max_restarts)
  //    dies: the sink gets "[launcher] ps:0 was killed by signal 9 (SIGKILL);
  //    restarting it in 1s (restart 1 of 3)", and it is started again with
  //    the same spec while the others go on;
  //  - another process exits non-zero or by a signal before the supervisor
  //    asked it to stop: the sink gets "[launcher] worker:1 was killed by signal 9
  //    (SIGKILL); stopping the rest", the rest are stopped (SIGTERM,
  //    stop_grace, SIGKILL), and the job is not ok;
  //  - the process named `primary` (e.g. "chief:0") exits 0: the others get
  //    `after_primary_grace` to exit by themselves, then are stopped; see
  //    JobResult::ok. An empty `primary` means there is none. A name that no
  //    process has stops every process and fails the job;
  //  - RequestStop() is called: every process is stopped; ok iff every one
  //    exits 0 (they are expected to save their state and exit 0 on SIGTERM).
  //    A second request while stopping sends SIGKILL at once (a second Ctrl-C).
  // A later call returns the same result at once.
  JobResult Wait(const std::string& primary, absl::Duration after_primary_grace);

  // Makes Wait() stop the job. Async-signal-safe: one write() to an eventfd.
  void RequestStop();

  // RequestStop() on the most recently started Supervisor that is still alive,
  // for signal handlers, which cannot be given an object. Do not destroy that
  // Supervisor while such a handler may run (restore the default handler
  // first): a handler that already loaded the pointer would use a dead object.
  static void RequestStopFromSignal();

  // The children's current pids, in start order (a restart changes one).
  std::vector<pid_t> pids() const;

 private:
  struct Child;
  struct Stream {
    std::string prefix;  // "[name] "
    int fd = -1;         // non-blocking read end of the child's stdout+stderr pipe
    bool eof = false;
    std::string partial;  // bytes after the last newline
  };
  enum class StopReason { kNone, kFailure, kPrimaryDone, kRequested, kUnknownPrimary };

  Supervisor(SupervisorOptions options, int stop_fd, int wake_fd);

  absl::Status StartOne(const ProcessSpec& spec);
  void KillAllAndReap();
  // Single-task recovery (SupervisorOptions::max_restarts).
  bool MayRestart(const Child& child) const;
  void ScheduleRestart(Child& child);
  void RestartDue(absl::Time now);

  // Wait() steps.
  bool TryReap(Child& child);
  void BeginStop(StopReason reason);
  void SignalRunning(int sig);
  int Running() const;
  std::string RunningNames() const;
  JobResult BuildResult(const std::string& primary, absl::Duration after_primary_grace) const;

  // Output (supervisor_output.cc). The reader thread polls every open stream; the Wait() thread
  // also drains a child's stream when it reaps the child, so the child's last words reach the sink
  // before the launcher says how it ended.
  void ReaderLoop();
  void DrainLocked(Stream& stream, bool until_empty) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EmitLocked(std::string_view line) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Emit(std::string_view line) ABSL_LOCKS_EXCLUDED(mu_);
  void FinishOutput();

  const SupervisorOptions options_;
  const int stop_fd_;  // eventfd written by RequestStop(), read by Wait()
  const int wake_fd_;  // eventfd that wakes the reader thread: new stream, or finish

  // Used only by the thread calling Start()/Wait()/~Supervisor().
  std::vector<Child> children_;
  std::vector<std::string> base_env_;
  StopReason reason_ = StopReason::kNone;
  int failed_index_ = -1;
  bool stopping_ = false;   // SIGTERM has been sent
  bool kill_sent_ = false;  // SIGKILL has been sent
  absl::Time kill_deadline_ = absl::InfiniteFuture();
  bool waited_ = false;
  JobResult result_;

  mutable absl::Mutex mu_;
  // One per child, same order. Guarded because the Wait() thread drains a
  // stream when it reaps its child; mu_ also serializes sink calls.
  // One per run of a child (a restart adds one); Child::stream says which.
  std::vector<Stream> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<pid_t> pids_ ABSL_GUARDED_BY(mu_);   // the children's current pids
  bool reader_done_ ABSL_GUARDED_BY(mu_) = false;  // wake_fd_ then ends the reader
  std::thread reader_;

  // The one static in the library: a signal handler has no other way to reach
  // the Supervisor it should stop. Set by Start(), cleared by the destructor.
  static std::atomic<Supervisor*> latest_;
};

}  // namespace pstrain

#endif  // PSTRAIN_LAUNCH_SUPERVISOR_H_
