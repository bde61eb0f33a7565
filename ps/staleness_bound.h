#ifndef PSTRAIN_PS_STALENESS_BOUND_H_
#define PSTRAIN_PS_STALENESS_BOUND_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"

namespace pstrain {

// The bookkeeping of bounded staleness (stale synchronous parallel, Ho et
// al. 2013) for one chunk: each replica's clock is the number of its pushes
// the chunk applied; a replica whose clock is more than `staleness` ahead of
// the slowest live replica's must wait before its next step.
//
// Live: a replica is live from its first push until it leaves (Leave) or is
// silent for `timeout` (a dead or preempted worker must not stop the
// others). A replica that becomes live (again) counts as having done as many
// steps as the slowest live one, so a late or restarted worker does not
// hold back those ahead of it.
//
// Not thread-safe (the shard's lock guards it).
class StalenessBound {
 public:
  StalenessBound(int total_replicas, int staleness, absl::Duration timeout);

  // Replica `replica` pushed one more step at `now`: its clock after it.
  int64_t Tick(int replica, absl::Time now);
  // May a replica whose clock is `clock` start its next step?
  bool MayProceed(int64_t clock) const;
  // The replica is waiting (its push is held): it is not silent.
  void Seen(int replica, absl::Time now);
  // Replicas silent since `now - timeout` stop being waited for; returns them.
  std::vector<int> DropSilent(absl::Time now);
  // The replica is stopping: it is no longer waited for.
  void Leave(int replica);
  // Forgets every clock (the chunk was initialized or restored).
  void Reset();

  // Replica `replica`'s clock: its pushes so far.
  int64_t clock(int replica) const { return clock_[static_cast<size_t>(replica)]; }
  // The slowest live clock (0 with no live replica).
  int64_t min_clock() const;
  int staleness() const { return staleness_; }

 private:
  const int staleness_;
  const absl::Duration timeout_;
  std::vector<int64_t> clock_;
  std::vector<bool> live_;
  std::vector<absl::Time> last_seen_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_STALENESS_BOUND_H_
