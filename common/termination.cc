#include "common/termination.h"

#include <signal.h>

#include <algorithm>
#include <atomic>

#include "absl/time/clock.h"

namespace pstrain {
namespace {

// The one piece of process-wide state here: a signal handler can reach no
// object.
std::atomic<int> received{0};

void OnSignal(int sig) {
  int expected = 0;
  if (!received.compare_exchange_strong(expected, sig) && expected == sig) {
    // The same signal again: the user insists. Default action.
    signal(sig, SIG_DFL);
    raise(sig);
  }
}

}  // namespace

void TerminationNotice::Install() {
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

int TerminationNotice::Received() { return received.load(); }

bool TerminationNotice::WaitFor(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (received.load() == 0) {
    const absl::Time now = absl::Now();
    if (now >= deadline) return false;
    absl::SleepFor(std::min(deadline - now, absl::Milliseconds(20)));
  }
  return true;
}

void TerminationNotice::ResetForTest() { received.store(0); }

}  // namespace pstrain
