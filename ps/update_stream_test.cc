// A primary's updates streamed to its backups (issue 55): in order, and the
// primary's answers held until every live backup holds what they depend on;
// a backup whose link fails leaves the stream without holding the others up.
#include "ps/update_stream.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "ps/parameter_shard.h"

namespace pstrain {
namespace {

ShardOptions StreamedOptions() {
  ShardOptions o;
  o.begin = 0;
  o.end = 32;
  o.segments = {{"w", 0, 32}};
  o.optimizer.type = OptimizerType::kAdam;
  o.optimizer.learning_rate = *LearningRateSchedule::Constant(0.01f);
  o.rule.sync = false;
  o.rule.replicas_to_aggregate = 1;
  o.rule.total_replicas = 3;
  return o;
}

std::unique_ptr<ParameterShard> StreamedShard() {
  absl::StatusOr<std::unique_ptr<ParameterShard>> shard = ParameterShard::Create(StreamedOptions());
  EXPECT_TRUE(shard.ok()) << shard.status();
  EXPECT_TRUE((*shard)->Initialize(std::vector<float>(32, 0.5f), {}, 0, {}, 0, 11).ok());
  return std::move(*shard);
}

std::vector<float> ValuesOf(ParameterShard& shard) {
  absl::StatusOr<ShardSnapshot> s = shard.Snapshot(-1, absl::ZeroDuration());
  EXPECT_TRUE(s.ok());
  std::vector<float> all = s->params;
  for (const auto& slot : s->slots) all.insert(all.end(), slot.begin(), slot.end());
  return all;
}

// A push whose answer the stream holds until the backups have its update,
// as the ps's service will wrap it.
void PushThroughStream(ParameterShard& primary, UpdateStream<ChunkUpdate>& stream, int replica,
                       int64_t step, const std::vector<float>& grads,
                       std::function<void(absl::Status)> answered) {
  primary.Push(replica, step, grads, {},
               [&stream, answered = std::move(answered)](absl::Status s, PushResult) {
                 stream.WhenAcknowledged(
                     [s, answered](absl::Status fenced) { answered(fenced.ok() ? s : fenced); });
               });
}

TEST(UpdateStreamTest, BackupsGetEveryUpdateInOrderAndAnswersWaitForThem) {
  auto primary = StreamedShard();
  auto backup_a = StreamedShard(), backup_b = StreamedShard();
  // Backup b's link is held shut until released: no answer may come first.
  absl::Notification open;
  std::atomic<int> sent_to_b{0};
  UpdateStream<ChunkUpdate> stream(
      "chunk 0",
      {[&](const ChunkUpdate& u) { return backup_a->ApplyReplicated(u); },
       [&](const ChunkUpdate& u) {
         open.WaitForNotification();
         ++sent_to_b;
         return backup_b->ApplyReplicated(u);
       }},
      /*tasks=*/{1, 2});
  primary->SetUpdateObserver([&stream](ChunkUpdate u) { stream.Enqueue(std::move(u)); });

  std::atomic<int> answers{0};
  absl::Notification first;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> g(32);
  for (float& x : g) x = normal(rng);
  PushThroughStream(*primary, stream, 0, 0, g, [&](absl::Status s) {
    EXPECT_TRUE(s.ok());
    ++answers;
    first.Notify();
  });
  EXPECT_FALSE(first.WaitForNotificationWithTimeout(absl::Milliseconds(200)))
      << "answered before backup b held the update";
  EXPECT_EQ(answers, 0);
  EXPECT_EQ(stream.Stalled(absl::ZeroDuration()),
            "chunk 0: 1 answer(s) held for 0, waiting for ps 2 to acknowledge update 1 (it holds "
            "0); 1 updates enqueued");
  open.Notify();
  ASSERT_TRUE(first.WaitForNotificationWithTimeout(absl::Seconds(30)));

  // 3 replicas pushing at once: every answer comes, after its update is on
  // both backups, and the backups end as the primary.
  std::vector<std::thread> threads;
  constexpr int kPushes = 100;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937 local(r);
      std::normal_distribution<float> n;
      for (int64_t step = 1; step <= kPushes; ++step) {
        std::vector<float> grads(32);
        for (float& x : grads) x = n(local);
        absl::Notification done;
        PushThroughStream(*primary, stream, r, step, grads, [&](absl::Status s) {
          EXPECT_TRUE(s.ok()) << s;
          EXPECT_GE(stream.acknowledged(), 1);
          ++answers;
          done.Notify();
        });
        done.WaitForNotification();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(answers, 1 + 3 * kPushes);
  EXPECT_EQ(stream.acknowledged(), 1 + 3 * kPushes);
  EXPECT_EQ(sent_to_b, 1 + 3 * kPushes);
  EXPECT_EQ(ValuesOf(*backup_a), ValuesOf(*primary));
  EXPECT_EQ(ValuesOf(*backup_b), ValuesOf(*primary));
  EXPECT_EQ(stream.live_backups(), 2);
}

TEST(UpdateStreamTest, ABackupThatFailsLeavesTheStreamAndHoldsNothingUp) {
  auto primary = StreamedShard();
  auto backup_a = StreamedShard(), backup_b = StreamedShard();
  int to_b = 0;
  UpdateStream<ChunkUpdate> stream(
      "chunk 0", {[&](const ChunkUpdate& u) { return backup_a->ApplyReplicated(u); },
                  [&](const ChunkUpdate& u) {
                    if (++to_b == 5) return absl::UnavailableError("ps 2 is gone");
                    return backup_b->ApplyReplicated(u);
                  }});
  primary->SetUpdateObserver([&stream](ChunkUpdate u) { stream.Enqueue(std::move(u)); });
  std::vector<float> g(32, 0.25f);
  for (int64_t step = 0; step < 20; ++step) {
    absl::Notification done;
    PushThroughStream(*primary, stream, 1, step, g, [&](absl::Status s) {
      EXPECT_TRUE(s.ok());
      done.Notify();
    });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30))) << step;
  }
  EXPECT_EQ(stream.live_backups(), 1);
  EXPECT_EQ(stream.acknowledged(), 20);
  EXPECT_EQ(to_b, 5);
  EXPECT_EQ(ValuesOf(*backup_a), ValuesOf(*primary));
  EXPECT_EQ(backup_b->GetStats().applied_updates, 4);
}

// A job's stream (held after a drop): once a backup leaves, no answer goes
// until the drop is confirmed (the chief marked that backup out of step),
// so no update the dropped backup lacks is acknowledged before then.
TEST(UpdateStreamTest, AfterADropAnswersWaitUntilItIsConfirmed) {
  auto primary = StreamedShard();
  auto backup_a = StreamedShard(), backup_b = StreamedShard();
  int to_b = 0;
  UpdateStream<ChunkUpdate> stream(
      "chunk 0",
      {[&](const ChunkUpdate& u) { return backup_a->ApplyReplicated(u); },
       [&](const ChunkUpdate& u) {
         if (++to_b == 3) return absl::UnavailableError("ps 2 is gone");
         return backup_b->ApplyReplicated(u);
       }},
      /*tasks=*/{1, 2}, /*held_after_drop=*/true);
  primary->SetUpdateObserver([&stream](ChunkUpdate u) { stream.Enqueue(std::move(u)); });
  std::vector<float> g(32, 0.25f);
  auto push = [&](int64_t step, absl::Notification* done) {
    PushThroughStream(*primary, stream, 1, step, g, [done](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      done->Notify();
    });
  };
  for (int64_t step = 0; step < 2; ++step) {
    absl::Notification done;
    push(step, &done);
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30))) << step;
  }
  EXPECT_EQ(stream.drops(), 0);
  // The third update drops backup b: its answer, and the next push's, wait.
  absl::Notification third, fourth;
  push(2, &third);
  for (int i = 0; i < 3000 && stream.drops() == 0; ++i) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_EQ(stream.drops(), 1);
  EXPECT_EQ(stream.dropped_tasks(), std::vector<int>{2});
  push(3, &fourth);
  EXPECT_FALSE(third.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  EXPECT_FALSE(fourth.HasBeenNotified());
  EXPECT_EQ(stream.live_backups(), 1);
  // What holds them is there for a log (a step that stalls says why).
  EXPECT_EQ(stream.Stalled(absl::Hours(1)), "");
  const std::string held = stream.Stalled(absl::ZeroDuration());
  EXPECT_NE(held.find("chunk 0: 2 answer(s) held"), std::string::npos) << held;
  EXPECT_NE(held.find("the chief to confirm a drop (0 of 1 confirmed)"), std::string::npos) << held;
  // A confirmation of fewer drops than there were releases nothing.
  stream.ConfirmDrops(0);
  EXPECT_FALSE(third.HasBeenNotified());
  stream.ConfirmDrops(1);
  ASSERT_TRUE(third.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_TRUE(fourth.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(stream.Stalled(absl::ZeroDuration()), "");
  // From then on answers go as backup a holds them.
  absl::Notification fifth;
  push(4, &fifth);
  ASSERT_TRUE(fifth.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(ValuesOf(*backup_a), ValuesOf(*primary));
}

// The job's end: a drop no chief will confirm holds nothing any more.
TEST(UpdateStreamTest, TheJobsEndReleasesWhatADropHeld) {
  auto primary = StreamedShard();
  UpdateStream<ChunkUpdate> stream(
      "chunk 0", {[](const ChunkUpdate&) { return absl::UnavailableError("ps 1 is gone"); }},
      /*tasks=*/{1}, /*held_after_drop=*/true);
  primary->SetUpdateObserver([&stream](ChunkUpdate u) { stream.Enqueue(std::move(u)); });
  absl::Notification held, later;
  PushThroughStream(*primary, stream, 0, 0, std::vector<float>(32, 0.5f), [&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    held.Notify();
  });
  EXPECT_FALSE(held.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  EXPECT_EQ(stream.drops(), 1);
  stream.EndOfJob();
  ASSERT_TRUE(held.WaitForNotificationWithTimeout(absl::Seconds(30)));
  PushThroughStream(*primary, stream, 1, 0, std::vector<float>(32, 0.5f), [&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    later.Notify();
  });
  ASSERT_TRUE(later.WaitForNotificationWithTimeout(absl::Seconds(30)));
}

// A rejoin: a backup that joins with a copy taken under the primary's lock
// gets every update after the copy, in order, but only once its copy is
// installed; answers do not wait for it while it catches up, and do once it
// has. A second join of the same task replaces the first; a join whose copy
// failed leaves no trace (no drop).
TEST(UpdateStreamTest, AJoiningBackupCatchesUpWithoutHoldingAnswers) {
  auto primary = StreamedShard();
  auto joiner = StreamedShard();
  absl::Notification never;  // outlives the stream's threads
  UpdateStream<ChunkUpdate> stream("chunk 0", {});
  primary->SetUpdateObserver([&stream](ChunkUpdate u) { stream.Enqueue(std::move(u)); });
  std::vector<float> g(32, 0.25f);
  auto push = [&](int64_t step) {
    absl::Notification done;
    PushThroughStream(*primary, stream, 0, step, g, [&](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      done.Notify();
    });
    return done.WaitForNotificationWithTimeout(absl::Seconds(30));
  };
  ASSERT_TRUE(push(0));
  // The copy's join fails: the stream is as before.
  ASSERT_TRUE(primary
                  ->CopyForBackup([&] {
                    stream.AddJoiningBackup([](const ChunkUpdate&) { return absl::OkStatus(); }, 4);
                  })
                  .ok());
  stream.Joined(4, absl::UnavailableError("gone"));
  EXPECT_TRUE(absl::IsUnavailable(stream.WaitCaughtUp(4, absl::Now() + absl::Seconds(5))));
  EXPECT_EQ(stream.drops(), 0);
  EXPECT_EQ(stream.live_backups(), 0);

  // Its link is held shut: pushes are answered all the same meanwhile.
  absl::Notification open;
  std::atomic<int> applied{0};
  absl::StatusOr<ParameterShard::BackupCopy> copy = primary->CopyForBackup([&] {
    stream.AddJoiningBackup(
        [&](const ChunkUpdate& u) {
          open.WaitForNotification();
          ++applied;
          return joiner->ApplyReplicated(u);
        },
        4);
  });
  ASSERT_TRUE(copy.ok());
  for (int64_t step = 1; step <= 5; ++step) ASSERT_TRUE(push(step));
  EXPECT_EQ(applied, 0);
  ASSERT_TRUE(joiner->InstallCopy(*copy).ok());
  stream.Joined(4, absl::OkStatus());
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(stream.live_backups(), 0);  // its link is shut: not caught up
  open.Notify();
  ASSERT_TRUE(stream.WaitCaughtUp(4, absl::Now() + absl::Seconds(30)).ok());
  EXPECT_EQ(applied, 5);
  EXPECT_EQ(stream.live_backups(), 1);
  EXPECT_EQ(ValuesOf(*joiner), ValuesOf(*primary));
  // Live now: an answer waits for it.
  for (int64_t step = 6; step <= 8; ++step) ASSERT_TRUE(push(step));
  EXPECT_EQ(applied, 8);
  EXPECT_EQ(stream.acknowledged(), 9);
  EXPECT_EQ(ValuesOf(*joiner), ValuesOf(*primary));
  EXPECT_EQ(stream.drops(), 0);
  // A join that does not catch up in time leaves the stream (no drop).
  ASSERT_TRUE(primary
                  ->CopyForBackup([&] {
                    stream.AddJoiningBackup(
                        [&](const ChunkUpdate&) {
                          never.WaitForNotification();
                          return absl::OkStatus();
                        },
                        5);
                  })
                  .ok());
  stream.Joined(5, absl::OkStatus());
  ASSERT_TRUE(push(9));
  EXPECT_TRUE(
      absl::IsDeadlineExceeded(stream.WaitCaughtUp(5, absl::Now() + absl::Milliseconds(100))));
  EXPECT_TRUE(absl::IsUnavailable(stream.WaitCaughtUp(5, absl::Now() + absl::Seconds(1))));
  EXPECT_EQ(stream.live_backups(), 1);
  EXPECT_EQ(stream.drops(), 0);
  never.Notify();
}

TEST(UpdateStreamTest, AStreamThatStopsReleasesWhatItHeld) {
  auto primary = StreamedShard();
  absl::Notification never;
  std::atomic<bool> answered{false};
  {
    UpdateStream<ChunkUpdate> stream(
        "chunk 0", {[&](const ChunkUpdate&) {
          never.WaitForNotificationWithTimeout(absl::Milliseconds(300));
          return absl::UnavailableError("stopping");
        }});
    primary->SetUpdateObserver([&stream](ChunkUpdate u) { stream.Enqueue(std::move(u)); });
    PushThroughStream(*primary, stream, 0, 0, std::vector<float>(32, 1.0f),
                      [&](absl::Status) { answered = true; });
    primary->SetUpdateObserver(nullptr);
  }
  EXPECT_TRUE(answered);
}

}  // namespace
}  // namespace pstrain
