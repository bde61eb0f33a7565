// The ThreadSanitizer build checks what it claims: with
// absl_sync_annotations.cc, TSan sees the system abseil's locks (no report
// for state they guard) and still reports a real race.
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace {

struct Counters {
  absl::Mutex mu;
  absl::CondVar cv;
  int guarded ABSL_GUARDED_BY(mu) = 0;
  int turns ABSL_GUARDED_BY(mu) = 0;
  int unguarded = 0;
};

TEST(TsanSeesLocksTest, StateGuardedByAbslLocksIsNotReported) {
  Counters c;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&c, t] {
      for (int i = 0; i < 200; ++i) {
        absl::MutexLock lock(&c.mu);
        ++c.guarded;
      }
      // Await (a condition other threads' unlocks evaluate) and CondVar.
      std::pair<Counters*, int> my_turn(&c, t);
      absl::MutexLock lock(&c.mu);
      c.mu.Await(absl::Condition(
          +[](std::pair<Counters*, int>* p) { return p->first->turns == p->second; }, &my_turn));
      ++c.turns;
      c.cv.SignalAll();
    });
  }
  {
    absl::MutexLock lock(&c.mu);
    while (c.turns < 4) c.cv.Wait(&c.mu);
    EXPECT_EQ(c.guarded, 800);
  }
  for (std::thread& t : threads) t.join();
}

void Race() {
  Counters c;
  std::thread a([&c] { ++c.unguarded; });
  std::thread b([&c] { ++c.unguarded; });
  a.join();
  b.join();
}

TEST(TsanSeesLocksTest, ARealRaceIsStillReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // TSan exits 66 on its first report (halt_on_error, as tests/run.sh sets).
  EXPECT_EXIT(Race(), testing::ExitedWithCode(66), "ThreadSanitizer: data race");
}

}  // namespace
