#ifndef PSTRAIN_COMMON_TERMINATION_H_
#define PSTRAIN_COMMON_TERMINATION_H_

#include "absl/time/time.h"

namespace pstrain {

// SIGTERM (GCE's preemption notice, the launcher stopping a job) and SIGINT
// as a request to stop gracefully: the handler only records the signal; the
// role's loops look at it and save, leave or shut down in order. A second
// signal of the same kind ends the process at once (as without a handler).
class TerminationNotice {
 public:
  // Installs the handlers. Idempotent.
  static void Install();
  // The signal received (SIGTERM or SIGINT), or 0.
  static int Received();
  // Waits up to `timeout` for a signal; true if one was received.
  static bool WaitFor(absl::Duration timeout);
  // For tests: forget a received signal.
  static void ResetForTest();
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TERMINATION_H_
