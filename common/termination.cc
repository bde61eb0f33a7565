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

class SignalTerminationNotice : public TerminationNotice {
 public:
  SignalTerminationNotice() {
    struct sigaction action = {};
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
  }

  int Received() const override { return received.load(); }

  bool WaitFor(absl::Duration timeout) const override {
    const absl::Time deadline = absl::Now() + timeout;
    while (received.load() == 0) {
      const absl::Time now = absl::Now();
      if (now >= deadline) return false;
      absl::SleepFor(std::min(deadline - now, absl::Milliseconds(20)));
    }
    return true;
  }
};

}  // namespace

TerminationNotice* ProcessTerminationNotice() {
  static SignalTerminationNotice* const notice = new SignalTerminationNotice();
  return notice;
}

void ManualTerminationNotice::Request(int signal) {
  absl::MutexLock lock(&mu_);
  if (received_ == 0) received_ = signal;
}

int ManualTerminationNotice::Received() const {
  absl::MutexLock lock(&mu_);
  return received_;
}

bool ManualTerminationNotice::WaitFor(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(
                                  +[](const int* received) { return *received != 0; }, &received_),
                              timeout);
}

}  // namespace pstrain
