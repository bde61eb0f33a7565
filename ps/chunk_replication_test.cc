// A chunk's updates applied again on a backup (issue 55's replicated ps, the
// engines' part): the primary hands out every update in the order it applied
// it; a backup that applies them in sequence holds the primary's values bit
// for bit (parameters, Adam's slots and step, batch-norm state, the step),
// counts the same pushes as applied (a retry to it after a failover is
// applied once), and refuses an update out of sequence or of another
// generation without changing anything.
#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "ps/parameter_shard.h"
#include "ps/update_stream.h"

namespace pstrain {
namespace {

// Adam over 64 parameters and 2 state values: slots and a step of its own,
// so any difference in what was applied, or in which order, shows.
ShardOptions ReplicaOptions(bool sync, int replicas) {
  ShardOptions o;
  o.begin = 0;
  o.end = 64;
  o.segments = {{"w", 0, 64}};
  o.num_state = 2;
  o.state_decay = 0.9f;
  o.optimizer.type = OptimizerType::kAdam;
  o.optimizer.learning_rate = *LearningRateSchedule::Constant(0.01f);
  o.rule.sync = sync;
  o.rule.replicas_to_aggregate = replicas;
  o.rule.total_replicas = replicas;
  o.rule.sync_timeout = absl::Seconds(60);
  return o;
}

std::unique_ptr<ParameterShard> MakeReplica(const ShardOptions& o, int64_t generation) {
  absl::StatusOr<std::unique_ptr<ParameterShard>> shard = ParameterShard::Create(o);
  EXPECT_TRUE(shard.ok()) << shard.status();
  std::vector<float> params(o.end - o.begin);
  for (size_t i = 0; i < params.size(); ++i) params[i] = 0.01f * static_cast<float>(i);
  EXPECT_TRUE((*shard)
                  ->Initialize(params, std::vector<float>(o.num_state, 0.0f), 0, {}, 0, generation)
                  .ok());
  return std::move(*shard);
}

// The updates a primary handed out, in order.
struct UpdateLog {
  absl::Mutex mu;
  std::vector<ChunkUpdate> updates ABSL_GUARDED_BY(mu);
  ParameterShard::UpdateObserver Observer() {
    return [this](ChunkUpdate u) {
      absl::MutexLock lock(&mu);
      updates.push_back(std::move(u));
    };
  }
  std::vector<ChunkUpdate> Take() {
    absl::MutexLock lock(&mu);
    return std::move(updates);
  }
};

std::vector<float> Grads(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> normal;
  std::vector<float> g(n);
  for (float& x : g) x = normal(rng);
  return g;
}

void ExpectSameBits(ParameterShard& a, ParameterShard& b) {
  absl::StatusOr<ShardSnapshot> x = a.Snapshot(-1, absl::ZeroDuration());
  absl::StatusOr<ShardSnapshot> y = b.Snapshot(-1, absl::ZeroDuration());
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(x->step, y->step);
  EXPECT_EQ(x->optimizer_step, y->optimizer_step);
  auto same = [](const std::vector<float>& p, const std::vector<float>& q) {
    return p.size() == q.size() && std::memcmp(p.data(), q.data(), p.size() * sizeof(float)) == 0;
  };
  EXPECT_TRUE(same(x->params, y->params));
  EXPECT_TRUE(same(x->state, y->state));
  ASSERT_EQ(x->slots.size(), y->slots.size());
  for (size_t k = 0; k < x->slots.size(); ++k) EXPECT_TRUE(same(x->slots[k], y->slots[k])) << k;
  EXPECT_EQ(a.GetStats().applied_updates, b.GetStats().applied_updates);
}

// Pushes that must be answered at once (async, or a retry).
PushResult PushNow(ParameterShard& shard, int replica, int64_t step, const std::vector<float>& g,
                   const std::vector<float>& stats, absl::Status* status) {
  PushResult out;
  bool called = false;
  shard.Push(replica, step, g, stats, [&](absl::Status s, PushResult r) {
    *status = s;
    out = r;
    called = true;
  });
  EXPECT_TRUE(called);
  return out;
}

TEST(ChunkReplicationTest, AsyncPushesFromFourThreadsReplayBitForBitInTheirOrder) {
  const ShardOptions options = ReplicaOptions(/*sync=*/false, 4);
  auto primary = MakeReplica(options, 7), backup = MakeReplica(options, 7);
  UpdateLog log;
  primary->SetUpdateObserver(log.Observer());
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937 rng(r);
      for (int64_t step = 0; step < 150; ++step) {
        absl::Status s;
        PushNow(*primary, r, step, Grads(rng, 64), {0.5f * r, 1.0f}, &s);
        EXPECT_TRUE(s.ok()) << s;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<ChunkUpdate> updates = log.Take();
  ASSERT_EQ(updates.size(), 600u);
  for (size_t i = 0; i < updates.size(); ++i) {
    EXPECT_EQ(updates[i].applied.sequence, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(updates[i].applied.generation, 7);
    ASSERT_EQ(updates[i].applied.pushes.size(), 1u);
    ASSERT_TRUE(backup->ApplyReplicated(updates[i]).ok()) << i;
  }
  ExpectSameBits(*primary, *backup);

  // After a failover the backup answers: a retry of a push it holds is not
  // applied again; the next push is.
  const auto [replica, step] = updates.back().applied.pushes[0];
  const int64_t applied = backup->GetStats().applied_updates;
  absl::Status s;
  std::mt19937 rng(99);
  PushNow(*backup, replica, step, Grads(rng, 64), {0, 0}, &s);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(backup->GetStats().applied_updates, applied);
  PushNow(*backup, replica, step + 1, Grads(rng, 64), {0, 0}, &s);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(backup->GetStats().applied_updates, applied + 1);
}

TEST(ChunkReplicationTest, SyncStepsReplayBitForBitAndARetryOfACountedPushIsNotStale) {
  const ShardOptions options = ReplicaOptions(/*sync=*/true, 3);
  auto primary = MakeReplica(options, 5), backup = MakeReplica(options, 5);
  UpdateLog log;
  primary->SetUpdateObserver(log.Observer());
  constexpr int64_t kSteps = 40;
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937 rng(10 + r);
      for (int64_t step = 0; step < kSteps; ++step) {
        absl::Notification answered;
        primary->Push(r, step, Grads(rng, 64), {1.0f * r, 2.0f}, [&](absl::Status s, PushResult) {
          EXPECT_TRUE(s.ok()) << s;
          answered.Notify();
        });
        answered.WaitForNotification();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<ChunkUpdate> updates = log.Take();
  ASSERT_EQ(updates.size(), static_cast<size_t>(kSteps));
  for (const ChunkUpdate& u : updates) {
    EXPECT_EQ(u.applied.step_after, u.applied.step_before + 1);
    EXPECT_EQ(u.applied.pushes.size(), 3u);
    ASSERT_TRUE(backup->ApplyReplicated(u).ok()) << u.applied.sequence;
  }
  ExpectSameBits(*primary, *backup);
  EXPECT_EQ(backup->GetStats().global_step, kSteps);

  // A replica whose push of the last step was counted retries it against
  // the backup: answered as counted, not stale, nothing applied.
  absl::Status s;
  std::mt19937 rng(1);
  const PushResult retry = PushNow(*backup, 1, kSteps - 1, Grads(rng, 64), {0, 0}, &s);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_FALSE(retry.stale);
  EXPECT_EQ(retry.global_step, kSteps);
  ExpectSameBits(*primary, *backup);
  // The values before the last step are the primary's too (a replica that
  // rejoins mid-step reads them).
  std::string p1, s1, p2, s2;
  absl::StatusOr<PushResult> r1 = primary->Read(&p1, &s1, false, 0, 0, kSteps - 1, 2);
  absl::StatusOr<PushResult> r2 = backup->Read(&p2, &s2, false, 0, 0, kSteps - 1, 2);
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(r1->global_step, kSteps - 1);
  EXPECT_EQ(p1, p2);
  EXPECT_EQ(s1, s2);
}

TEST(ChunkReplicationTest, AnUpdateOutOfSequenceOrOfAnotherGenerationChangesNothing) {
  const ShardOptions options = ReplicaOptions(/*sync=*/false, 2);
  auto primary = MakeReplica(options, 3), backup = MakeReplica(options, 3),
       other = MakeReplica(options, 4);
  UpdateLog log;
  primary->SetUpdateObserver(log.Observer());
  std::mt19937 rng(3);
  for (int64_t step = 0; step < 3; ++step) {
    absl::Status s;
    PushNow(*primary, 0, step, Grads(rng, 64), {0, 0}, &s);
    ASSERT_TRUE(s.ok());
  }
  const std::vector<ChunkUpdate> updates = log.Take();
  ASSERT_EQ(updates.size(), 3u);
  auto before = backup->Snapshot(-1, absl::ZeroDuration());
  ASSERT_TRUE(before.ok());
  absl::Status gap = backup->ApplyReplicated(updates[1]);
  EXPECT_TRUE(absl::IsOutOfRange(gap)) << gap;
  EXPECT_TRUE(absl::IsFailedPrecondition(other->ApplyReplicated(updates[0])));
  ChunkUpdate short_one = updates[0];
  short_one.grads.resize(10);
  EXPECT_TRUE(absl::IsInvalidArgument(backup->ApplyReplicated(short_one)));
  auto after = backup->Snapshot(-1, absl::ZeroDuration());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(before->params, after->params);
  EXPECT_EQ(before->step, after->step);
  EXPECT_EQ(backup->GetStats().applied_updates, 0);
  // In order, all three; then the first again is a repeat.
  for (const ChunkUpdate& u : updates) ASSERT_TRUE(backup->ApplyReplicated(u).ok());
  EXPECT_FALSE(backup->ApplyReplicated(updates[0]).ok());
  ExpectSameBits(*primary, *backup);
  // A backup with an observer of its own hands each update on: a chain.
  auto third = MakeReplica(options, 3);
  UpdateLog chained;
  auto fourth = MakeReplica(options, 3);
  fourth->SetUpdateObserver(chained.Observer());
  for (const ChunkUpdate& u : updates) ASSERT_TRUE(fourth->ApplyReplicated(u).ok());
  for (const ChunkUpdate& u : chained.Take()) ASSERT_TRUE(third->ApplyReplicated(u).ok());
  ExpectSameBits(*primary, *third);
}

// A rejoin: while 4 threads push, a new backup takes a copy of the chunk
// (values, slots, the barrier's progress) and joins the update stream at
// that very point; it ends as the primary, bit for bit, and a retry of a
// push counted before its copy is not applied again.
TEST(ChunkReplicationTest, ABackupThatRejoinsMidStreamFollowsOnBitForBit) {
  const ShardOptions options = ReplicaOptions(/*sync=*/false, 4);
  auto primary = MakeReplica(options, 7), backup = MakeReplica(options, 7);
  absl::StatusOr<std::unique_ptr<ParameterShard>> fresh = ParameterShard::Create(options);
  ASSERT_TRUE(fresh.ok());
  std::unique_ptr<ParameterShard> rejoined = std::move(*fresh);
  UpdateStream<ChunkUpdate> stream(
      "chunk 0", {[&](const ChunkUpdate& u) { return backup->ApplyReplicated(u); }});
  primary->SetUpdateObserver([&stream](ChunkUpdate u) { stream.Enqueue(std::move(u)); });
  std::atomic<int> pushed{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937 rng(70 + r);
      for (int64_t step = 0; step < 150; ++step) {
        absl::Notification done;
        primary->Push(r, step, Grads(rng, 64), {0.5f * r, 1.0f}, [&](absl::Status s, PushResult) {
          EXPECT_TRUE(s.ok()) << s;
          stream.WhenAcknowledged([&](absl::Status) { done.Notify(); });
        });
        done.WaitForNotification();
        ++pushed;
      }
    });
  }
  while (pushed < 200) std::this_thread::yield();
  // The copy goes to the new backup before any update after it does.
  absl::Notification installed;
  absl::StatusOr<ParameterShard::BackupCopy> copy = primary->CopyForBackup([&] {
    stream.AddBackup([&](const ChunkUpdate& u) {
      installed.WaitForNotification();
      return rejoined->ApplyReplicated(u);
    });
  });
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_GT(copy->progress.sequence, 150);
  ASSERT_TRUE(rejoined->InstallCopy(*copy).ok());
  installed.Notify();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(pushed, 600);
  ExpectSameBits(*primary, *backup);
  ExpectSameBits(*primary, *rejoined);
  // A push counted before the copy, retried at the rejoined backup (were
  // it promoted): applied once, already.
  int replica = -1;
  int64_t step = -1;
  for (int r = 0; r < 4 && replica < 0; ++r) {
    if (copy->progress.last_async_step[r] >= 0) {
      replica = r;
      step = copy->progress.last_async_step[r];
    }
  }
  ASSERT_GE(replica, 0);
  const int64_t applied = rejoined->GetStats().applied_updates;
  absl::Status s;
  std::mt19937 rng(5);
  PushNow(*rejoined, replica, step, Grads(rng, 64), {0, 0}, &s);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(rejoined->GetStats().applied_updates, applied);
  // A copy that does not fit is refused.
  ParameterShard::BackupCopy wrong = *copy;
  wrong.values.params.pop_back();
  EXPECT_TRUE(absl::IsInvalidArgument(rejoined->InstallCopy(wrong)));
}

}  // namespace
}  // namespace pstrain
