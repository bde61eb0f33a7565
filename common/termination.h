#ifndef PSTRAIN_COMMON_TERMINATION_H_
#define PSTRAIN_COMMON_TERMINATION_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pstrain {

// A request to stop gracefully, as library code sees it: SIGTERM (GCE's
// preemption notice, the launcher stopping a job) or SIGINT in a process,
// or a request made by hand in a test. The role's loops look at it and save,
// leave or shut down in order. Library code is handed one (never reads a
// process global), so a test stops a chief or ps in-process without signals.
// Implementations are thread-safe.
class TerminationNotice {
 public:
  virtual ~TerminationNotice() = default;
  // The signal received (SIGTERM or SIGINT; any non-zero code for a manual
  // request), or 0.
  virtual int Received() const = 0;
  // Waits up to `timeout` for a request; true if one was received.
  virtual bool WaitFor(absl::Duration timeout) const = 0;
};

// The process's SIGTERM and SIGINT. The first call installs the handlers
// (they only record the signal; a second signal of the same kind ends the
// process at once, as without a handler) and every call returns the same
// notice, which lives as long as the process. For main() only.
TerminationNotice* ProcessTerminationNotice();

// A notice requested by hand: tests, and roles run inside another program.
class ManualTerminationNotice : public TerminationNotice {
 public:
  // Records `signal` (non-zero) unless a request is already recorded.
  void Request(int signal);
  int Received() const override;
  bool WaitFor(absl::Duration timeout) const override;

 private:
  mutable absl::Mutex mu_;
  int received_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TERMINATION_H_
