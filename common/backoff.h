#ifndef PSTRAIN_COMMON_BACKOFF_H_
#define PSTRAIN_COMMON_BACKOFF_H_

// The waits between retries of a call that may succeed later (an Unavailable
// ps, a 503 from Cloud Storage): exponential backoff, the one policy every
// retry loop uses. The first wait is `initial`, each next one twice the last,
// never more than `maximum`; a success resets it. The caller keeps its own
// deadline and asks FitsBefore() whether one more wait still ends before it.
//
// A value; not thread-safe (each loop or call keeps its own, under its lock).

#include <algorithm>

#include "absl/time/time.h"

namespace pstrain {

class Backoff {
 public:
  Backoff(absl::Duration initial, absl::Duration maximum)
      : initial_(initial), maximum_(maximum), current_(initial) {}

  // The wait before the next retry; the one after it doubles (up to the maximum).
  absl::Duration Next() {
    const absl::Duration wait = current_;
    current_ = std::min(current_ * 2, maximum_);
    return wait;
  }

  // The wait the next Next() returns.
  absl::Duration current() const { return current_; }

  // Whether waiting current() from `now` ends strictly before `give_up`: a
  // retry still fits in the caller's deadline.
  bool FitsBefore(absl::Time now, absl::Time give_up) const { return now + current_ < give_up; }

  // Back to the initial wait, after a call that got through.
  void Reset() { current_ = initial_; }

 private:
  absl::Duration initial_;
  absl::Duration maximum_;
  absl::Duration current_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_BACKOFF_H_
