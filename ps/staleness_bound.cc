#include "ps/staleness_bound.h"

#include <algorithm>

namespace pstrain {

StalenessBound::StalenessBound(int total_replicas, int staleness, absl::Duration timeout)
    : staleness_(staleness),
      timeout_(timeout),
      clock_(total_replicas, 0),
      live_(total_replicas, false),
      last_seen_(total_replicas, absl::InfinitePast()) {}

int64_t StalenessBound::Tick(int replica, absl::Time now) {
  const size_t r = static_cast<size_t>(replica);
  if (!live_[r]) {
    // As many steps done as the slowest live replica (if any).
    clock_[r] = std::max(clock_[r], min_clock() - 1);
    live_[r] = true;
  }
  last_seen_[r] = now;
  return ++clock_[r];
}

int64_t StalenessBound::min_clock() const {
  int64_t lowest = -1;
  for (size_t r = 0; r < clock_.size(); ++r) {
    if (live_[r] && (lowest < 0 || clock_[r] < lowest)) lowest = clock_[r];
  }
  return std::max<int64_t>(lowest, 0);
}

bool StalenessBound::MayProceed(int64_t clock) const {
  // With no live replica there is nobody to wait for.
  return std::find(live_.begin(), live_.end(), true) == live_.end() ||
         clock - min_clock() <= staleness_;
}

void StalenessBound::Seen(int replica, absl::Time now) {
  last_seen_[static_cast<size_t>(replica)] = now;
}

std::vector<int> StalenessBound::DropSilent(absl::Time now) {
  std::vector<int> dropped;
  for (size_t r = 0; r < live_.size(); ++r) {
    if (live_[r] && now - last_seen_[r] > timeout_) {
      live_[r] = false;
      dropped.push_back(static_cast<int>(r));
    }
  }
  return dropped;
}

void StalenessBound::Leave(int replica) { live_[static_cast<size_t>(replica)] = false; }

void StalenessBound::Reset() {
  std::fill(clock_.begin(), clock_.end(), 0);
  std::fill(live_.begin(), live_.end(), false);
  std::fill(last_seen_.begin(), last_seen_.end(), absl::InfinitePast());
}

}  // namespace pstrain
