#include "ps/parameter_shard.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "models/batch_norm.h"
#include "models/dense.h"
#include "models/flatten.h"

namespace pstrain {
namespace {

// SGD with learning rate 1 over 3 parameters: params -= applied gradient.
ShardOptions Options(bool sync, int r, int n) {
  ShardOptions o;
  o.begin = 10;
  o.end = 13;
  o.segments = {{"w", 0, 3}};
  o.num_state = 1;
  o.state_decay = 0.5f;
  o.optimizer.type = OptimizerType::kSgd;
  o.optimizer.learning_rate = *LearningRateSchedule::Constant(1.0f);
  o.rule.sync = sync;
  o.rule.replicas_to_aggregate = r;
  o.rule.total_replicas = n;
  o.rule.train_steps = 100;
  return o;
}

std::unique_ptr<ParameterShard> Make(const ShardOptions& o) {
  auto shard = ParameterShard::Create(o);
  EXPECT_TRUE(shard.ok()) << shard.status();
  EXPECT_TRUE((*shard)->Initialize(std::vector<float>{1, 2, 3}, std::vector<float>{0}, 0).ok());
  return std::move(*shard);
}

std::vector<float> Params(const ParameterShard& shard) {
  std::string p, s;
  EXPECT_TRUE(shard.Read(&p, &s).ok());
  std::vector<float> v(p.size() / sizeof(float));
  std::memcpy(v.data(), p.data(), p.size());
  return v;
}

struct Outcome {
  std::atomic<bool> called{false};
  absl::Status status;
  PushResult result;
  ParameterShard::PushCallback Callback() {
    return [this](absl::Status s, PushResult r) {
      status = s;
      result = r;
      called = true;
    };
  }
};

const std::vector<float> kStats = {4};

TEST(ParameterShardTest, AsyncAppliesEachPushAtOnce) {
  auto shard = Make(Options(false, 1, 2));
  Outcome a, b;
  shard->Push(0, 0, std::vector<float>{1, 1, 1}, kStats, a.Callback());
  ASSERT_TRUE(a.called);
  EXPECT_TRUE(a.status.ok());
  EXPECT_EQ(a.result.global_step, 1);
  shard->Push(1, 0, std::vector<float>{1, 0, 0}, kStats, b.Callback());
  EXPECT_EQ(b.result.global_step, 2);
  EXPECT_EQ(Params(*shard), (std::vector<float>{-1, 1, 2}));
  // The same (replica, step) again is a retry: applied once.
  Outcome retry;
  shard->Push(1, 0, std::vector<float>{1, 0, 0}, kStats, retry.Callback());
  EXPECT_TRUE(retry.status.ok());
  EXPECT_EQ(retry.result.global_step, 2);
  EXPECT_EQ(Params(*shard), (std::vector<float>{-1, 1, 2}));
}

std::vector<float> State(const ParameterShard& shard) {
  std::string p, s;
  EXPECT_TRUE(shard.Read(&p, &s).ok());
  std::vector<float> v(s.size() / sizeof(float));
  std::memcpy(v.data(), s.data(), s.size());
  return v;
}

TEST(ParameterShardTest, ReadLeavesOutParametersTheReaderHolds) {
  auto shard = Make(Options(false, 1, 1));
  std::string p, s;
  absl::StatusOr<PushResult> r = shard->Read(&p, &s);
  ASSERT_TRUE(r.ok());
  const int64_t generation = r->generation, v1 = r->params_version;
  EXPECT_GT(v1, 0);
  EXPECT_FALSE(r->params_unchanged);
  // Holding the current version of this generation: no parameters.
  r = shard->Read(&p, &s, false, generation, v1);
  EXPECT_TRUE(r->params_unchanged);
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(s.size(), sizeof(float));  // the state always comes
  // Another generation, or no version: the parameters.
  r = shard->Read(&p, &s, false, generation + 1, v1);
  EXPECT_FALSE(r->params_unchanged);
  EXPECT_EQ(p.size(), 3 * sizeof(float));
  EXPECT_FALSE(shard->Read(&p, &s, false, generation, 0)->params_unchanged);
  // A zero gradient (plain SGD) keeps the version; a nonzero one moves it.
  Outcome a, b;
  shard->Push(0, 0, std::vector<float>{0, 0, 0}, kStats, a.Callback());
  ASSERT_TRUE(a.called && a.status.ok());
  EXPECT_TRUE(shard->Read(&p, &s, false, generation, v1)->params_unchanged);
  shard->Push(0, 1, std::vector<float>{0, 1, 0}, kStats, b.Callback());
  ASSERT_TRUE(b.called && b.status.ok());
  r = shard->Read(&p, &s, false, generation, v1);
  EXPECT_FALSE(r->params_unchanged);
  EXPECT_GT(r->params_version, v1);
  // Initialize again (a restore) is a change too, in the new generation.
  const int64_t v2 = r->params_version;
  ASSERT_TRUE(
      shard->Initialize(std::vector<float>{1, 2, 3}, std::vector<float>{0}, 0, {}, 0, generation)
          .ok());
  r = shard->Read(&p, &s, false, generation, v2);
  EXPECT_FALSE(r->params_unchanged);
  EXPECT_GT(r->params_version, v2);
}

TEST(ParameterShardTest, StateValuesFollowTheirOwnDecayWhenGiven) {
  ShardOptions o = Options(false, 1, 1);
  o.num_state = 2;
  o.state_decays = {0.5f, 0.75f};
  auto shard = ParameterShard::Create(o);
  ASSERT_TRUE(shard.ok()) << shard.status();
  ASSERT_TRUE((*shard)->Initialize(std::vector<float>{1, 2, 3}, std::vector<float>{0, 0}, 0).ok());
  Outcome a;
  (*shard)->Push(0, 0, std::vector<float>{0, 0, 0}, std::vector<float>{4, 4}, a.Callback());
  ASSERT_TRUE(a.called && a.status.ok()) << a.status;
  EXPECT_EQ(State(**shard), (std::vector<float>{2, 1}));  // 0.5 x 0 + 0.5 x 4; 0.25 x 4
  o.state_decays = {0.5f};
  EXPECT_TRUE(absl::IsInvalidArgument(ParameterShard::Create(o).status()));
}

TEST(ParameterShardTest, SegmentsCarryFrozenLayersAndStateDecaysTheirMomentum) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<BatchNorm>("bn", 1e-3f));
  layers.back()->set_state_decay(0.9f);
  layers.push_back(std::make_unique<Flatten>("flatten"));
  DenseOptions d;
  d.units = 2;
  layers.push_back(std::make_unique<Dense>("frozen", d));
  layers.back()->set_frozen(true);
  layers.push_back(std::make_unique<Dense>("dense", d));
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create("m", {2, 2, 1}, 2, std::move(layers));
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<Segment> segments = SegmentsForRange(**model, 0, (*model)->num_params());
  ASSERT_EQ(segments.size(), 6u);  // bn gamma, beta; frozen kernel, bias; dense kernel, bias
  EXPECT_FALSE(segments[0].frozen);
  EXPECT_TRUE(segments[2].frozen);
  EXPECT_TRUE(segments[3].frozen);
  EXPECT_FALSE(segments[4].frozen);
  // The batch norm's two statistics of one channel each, at its decay.
  EXPECT_EQ(StateDecays(**model, 0.99f), (std::vector<float>{0.9f, 0.9f}));
}

TEST(ParameterShardTest, SyncAveragesDistinctReplicasOnce) {
  auto shard = Make(Options(true, 2, 3));
  Outcome a, dup, b;
  shard->Push(0, 0, std::vector<float>{2, 0, 0}, kStats, a.Callback());
  EXPECT_FALSE(a.called);
  shard->Push(0, 0, std::vector<float>{2, 0, 0}, kStats, dup.Callback());  // retry
  EXPECT_FALSE(dup.called);
  EXPECT_EQ(Params(*shard), (std::vector<float>{1, 2, 3}));
  shard->Push(2, 0, std::vector<float>{0, 4, 0}, std::vector<float>{2}, b.Callback());
  ASSERT_TRUE(a.called && dup.called && b.called);
  EXPECT_EQ(a.result.global_step, 1);
  EXPECT_EQ(b.result.global_step, 1);
  EXPECT_FALSE(a.result.stale);
  EXPECT_EQ(Params(*shard), (std::vector<float>{0, 0, 3}));  // average of 2 replicas
  std::string p, s;
  ASSERT_TRUE(shard->Read(&p, &s).ok());
  float state;
  std::memcpy(&state, s.data(), sizeof(float));
  EXPECT_FLOAT_EQ(state, 1.5f);  // 0.5 * 0 + 0.5 * mean(4, 2)
  // The backup replica's late push for step 0 is stale: dropped and counted.
  Outcome late;
  shard->Push(1, 0, std::vector<float>{9, 9, 9}, kStats, late.Callback());
  ASSERT_TRUE(late.called);
  EXPECT_TRUE(late.result.stale);
  EXPECT_EQ(late.result.global_step, 1);
  EXPECT_EQ(Params(*shard), (std::vector<float>{0, 0, 3}));
  EXPECT_EQ(shard->GetStats().stale_pushes, 1);
}

TEST(ParameterShardTest, SyncTimeoutAppliesWhatArrivedAndStopsWaitingForTheMissing) {
  ShardOptions o = Options(true, 2, 2);
  o.rule.sync_timeout = absl::Milliseconds(100);
  auto shard = Make(o);
  absl::Notification done;
  PushResult result;
  shard->Push(0, 0, std::vector<float>{1, 1, 1}, kStats, [&](absl::Status s, PushResult r) {
    EXPECT_TRUE(s.ok());
    result = r;
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(result.global_step, 1);
  EXPECT_EQ(Params(*shard), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(shard->GetStats().timed_out_steps, 1);
  // Replica 1 is now considered gone: replica 0 alone completes the next step.
  Outcome next;
  shard->Push(0, 1, std::vector<float>{1, 1, 1}, kStats, next.Callback());
  ASSERT_TRUE(next.called);
  EXPECT_EQ(next.result.global_step, 2);
  // When replica 1 comes back it is waited for again.
  Outcome back, other;
  shard->Push(1, 2, std::vector<float>{1, 1, 1}, kStats, back.Callback());
  EXPECT_FALSE(back.called);
  shard->Push(0, 2, std::vector<float>{1, 1, 1}, kStats, other.Callback());
  EXPECT_TRUE(back.called && other.called);
}

TEST(ParameterShardTest, ATimedOutReplicaRejoinsWithAStalePush) {
  ShardOptions o = Options(true, 2, 2);
  o.rule.sync_timeout = absl::Milliseconds(100);
  auto shard = Make(o);
  absl::Notification done;
  shard->Push(0, 0, std::vector<float>{1, 1, 1}, kStats,
              [&](absl::Status, PushResult) { done.Notify(); });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  // Replica 1 was given up on; its late push for step 0 is stale, but shows
  // it is alive: step 1 waits for it again instead of running on replica 0.
  Outcome late;
  shard->Push(1, 0, std::vector<float>{1, 1, 1}, kStats, late.Callback());
  ASSERT_TRUE(late.called);
  EXPECT_TRUE(late.result.stale);
  Outcome a, b;
  shard->Push(0, 1, std::vector<float>{1, 1, 1}, kStats, a.Callback());
  EXPECT_FALSE(a.called);
  shard->Push(1, 1, std::vector<float>{1, 1, 1}, kStats, b.Callback());
  EXPECT_TRUE(a.called && b.called);
  EXPECT_EQ(b.result.global_step, 2);
}

TEST(ParameterShardTest, ARetriedSyncPushAfterItsStepIsNotStale) {
  auto shard = Make(Options(true, 2, 2));
  Outcome a, b, retry;
  shard->Push(0, 0, std::vector<float>{1, 1, 1}, kStats, a.Callback());
  shard->Push(1, 0, std::vector<float>{1, 1, 1}, kStats, b.Callback());
  ASSERT_TRUE(a.called && b.called);
  // Replica 1 did not get its answer and retries: already counted.
  shard->Push(1, 0, std::vector<float>{1, 1, 1}, kStats, retry.Callback());
  ASSERT_TRUE(retry.called);
  EXPECT_TRUE(retry.status.ok());
  EXPECT_FALSE(retry.result.stale);
  EXPECT_EQ(shard->GetStats().stale_pushes, 0);
  EXPECT_EQ(Params(*shard), (std::vector<float>{0, 1, 2}));
}

// A replica killed after pushing this chunk's part of step 0 and not the
// rest rejoins at step 0: the chunk, already at step 1, gives it the values
// of step 0 so it computes the step again as it did before; two steps past,
// or after a new start, there is nothing to give but the values as they are.
TEST(ParameterShardTest, ASyncReadAtTheStepBeforeGivesThatStepsValues) {
  auto shard = Make(Options(true, 2, 2));
  Outcome a, b;
  shard->Push(0, 0, std::vector<float>{2, 0, 0}, kStats, a.Callback());
  shard->Push(1, 0, std::vector<float>{0, 2, 0}, std::vector<float>{2}, b.Callback());
  ASSERT_TRUE(a.called && b.called);
  const auto read = [&](int64_t at_step, int64_t* step, float* state, int replica = 1) {
    std::string p, s;
    absl::StatusOr<PushResult> r = shard->Read(&p, &s, false, 0, 0, at_step, replica);
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<float> v(p.size() / sizeof(float));
    std::memcpy(v.data(), p.data(), p.size());
    if (r.ok()) *step = r->global_step;
    std::memcpy(state, s.data(), sizeof(float));
    return v;
  };
  int64_t step = -1;
  float state = -1;
  EXPECT_EQ(read(0, &step, &state), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(step, 0);
  EXPECT_EQ(state, 0.0f);
  EXPECT_EQ(read(1, &step, &state), (std::vector<float>{0, 1, 3}));
  EXPECT_EQ(step, 1);
  EXPECT_EQ(state, 1.5f);
  EXPECT_EQ(read(-1, &step, &state), (std::vector<float>{0, 1, 3}));
  // Only for a replica whose push counted in step 0.
  EXPECT_EQ(read(0, &step, &state, /*replica=*/-1), (std::vector<float>{0, 1, 3}));
  EXPECT_EQ(step, 1);
  // Replica 1 computes step 0 again and pushes it: a retry, counted once.
  Outcome retry;
  shard->Push(1, 0, std::vector<float>{0, 2, 0}, std::vector<float>{2}, retry.Callback());
  ASSERT_TRUE(retry.called);
  EXPECT_FALSE(retry.result.stale);
  EXPECT_EQ(retry.result.global_step, 1);
  EXPECT_EQ(Params(*shard), (std::vector<float>{0, 1, 3}));
  Outcome c, d;
  shard->Push(0, 1, std::vector<float>{2, 0, 0}, kStats, c.Callback());
  shard->Push(1, 1, std::vector<float>{2, 0, 0}, kStats, d.Callback());
  ASSERT_TRUE(c.called && d.called);
  EXPECT_EQ(read(0, &step, &state), (std::vector<float>{-2, 1, 3}));
  EXPECT_EQ(step, 2);
  EXPECT_EQ(read(1, &step, &state), (std::vector<float>{0, 1, 3}));
  EXPECT_EQ(step, 1);
  ASSERT_TRUE(shard->Initialize(std::vector<float>{5, 5, 5}, std::vector<float>{0}, 2).ok());
  EXPECT_EQ(read(1, &step, &state), (std::vector<float>{5, 5, 5}));
  EXPECT_EQ(step, 2);
}

// With a backup worker (2 of 3 replicas make a step), the replica left out
// of step 0 reads the values as they are: it has nothing of step 0 to
// compute again.
TEST(ParameterShardTest, ASyncReadAtTheStepBeforeIsOnlyForAReplicaThatCountedInIt) {
  auto shard = Make(Options(true, 2, 3));
  Outcome a, b;
  shard->Push(0, 0, std::vector<float>{2, 0, 0}, kStats, a.Callback());
  shard->Push(1, 0, std::vector<float>{0, 2, 0}, kStats, b.Callback());
  ASSERT_TRUE(a.called && b.called);
  for (int replica : {0, 2}) {
    std::string p, s;
    absl::StatusOr<PushResult> r = shard->Read(&p, &s, false, 0, 0, /*at_step=*/0, replica);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->global_step, replica == 0 ? 0 : 1) << replica;
  }
}

TEST(ParameterShardTest, InitializeAgainForgetsThePreviousRun) {
  auto shard = Make(Options(false, 1, 1));
  Outcome a;
  shard->Push(0, 0, std::vector<float>{1, 1, 1}, kStats, a.Callback());
  ASSERT_TRUE(shard->Initialize(std::vector<float>{1, 2, 3}, std::vector<float>{0}, 0).ok());
  Outcome b;
  shard->Push(0, 0, std::vector<float>{1, 1, 1}, kStats, b.Callback());  // step 0 again
  EXPECT_EQ(b.result.global_step, 1);
  EXPECT_EQ(Params(*shard), (std::vector<float>{0, 1, 2}));  // applied, not a "retry"
}

TEST(ParameterShardTest, BadRequestsAreRefusedAndChangeNothing) {
  auto shard = Make(Options(true, 1, 2));
  struct Case {
    int replica;
    int64_t step;
    std::vector<float> grads;
    std::vector<float> stats;
  };
  const Case cases[] = {{0, 0, {1, 1}, {1}},                                 // too short
                        {0, 0, {1, 1, 1, 1}, {1}},                           // too long
                        {0, 0, {1, 1, 1}, {}},                               // no statistics
                        {2, 0, {1, 1, 1}, {1}},                              // unknown replica
                        {-1, 0, {1, 1, 1}, {1}},   {0, 5, {1, 1, 1}, {1}}};  // ahead of the shard
  for (const Case& c : cases) {
    Outcome o;
    shard->Push(c.replica, c.step, c.grads, c.stats, o.Callback());
    ASSERT_TRUE(o.called);
    // A step ahead is what a replica sends after a rollback: Aborted, pull again.
    if (c.step > 0) {
      EXPECT_TRUE(absl::IsAborted(o.status)) << o.status;
      EXPECT_NE(o.status.message().find("rolled back"), std::string::npos) << o.status;
      continue;
    }
    EXPECT_TRUE(absl::IsInvalidArgument(o.status)) << o.status;
  }
  EXPECT_EQ(Params(*shard), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(shard->GetStats().global_step, 0);
  EXPECT_TRUE(absl::IsInvalidArgument(
      shard->Initialize(std::vector<float>{1, 2}, std::vector<float>{0}, 0)));
}

TEST(ParameterShardTest, BeforeInitializePushAndReadAreUnavailableToRetry) {
  auto shard = *ParameterShard::Create(Options(false, 1, 1));
  Outcome o;
  shard->Push(0, 0, std::vector<float>{1, 1, 1}, kStats, o.Callback());
  EXPECT_TRUE(absl::IsUnavailable(o.status)) << o.status;
  std::string p, s;
  EXPECT_TRUE(absl::IsUnavailable(shard->Read(&p, &s).status()));
  EXPECT_FALSE(shard->GetStats().initialized);
}

TEST(ParameterShardTest, JobDoneAtTrainStepsAndOnShutdown) {
  ShardOptions o = Options(false, 1, 1);
  o.rule.train_steps = 1;
  auto shard = Make(o);
  Outcome a, b;
  shard->Push(0, 0, std::vector<float>{1, 1, 1}, kStats, a.Callback());
  EXPECT_TRUE(a.result.job_done);
  shard->Push(0, 1, std::vector<float>{1, 1, 1}, kStats, b.Callback());
  EXPECT_TRUE(b.result.job_done);
  EXPECT_EQ(Params(*shard), (std::vector<float>{0, 1, 2}));  // not applied after the end

  auto sync = Make(Options(true, 2, 2));
  Outcome pending;
  sync->Push(0, 0, std::vector<float>{1, 1, 1}, kStats, pending.Callback());
  EXPECT_FALSE(pending.called);
  EXPECT_FALSE(sync->WaitForShutdown(absl::Milliseconds(1)));
  sync->Shutdown();
  ASSERT_TRUE(pending.called);
  EXPECT_TRUE(pending.result.job_done);
  EXPECT_TRUE(sync->WaitForShutdown(absl::Milliseconds(1)));
}

TEST(ParameterShardTest, ConcurrentSyncPushesCompleteEveryStep) {
  auto shard = Make(Options(true, 3, 3));
  std::vector<std::thread> threads;
  std::atomic<int> completed{0};
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      for (int64_t step = 0; step < 20; ++step) {
        absl::Notification n;
        shard->Push(r, step, std::vector<float>{0.1f, 0, 0}, kStats,
                    [&](absl::Status s, PushResult res) {
                      EXPECT_TRUE(s.ok());
                      EXPECT_EQ(res.global_step, step + 1);
                      n.Notify();
                    });
        ASSERT_TRUE(n.WaitForNotificationWithTimeout(absl::Seconds(20)));
        ++completed;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(completed, 60);
  EXPECT_EQ(shard->GetStats().global_step, 20);
  EXPECT_NEAR(Params(*shard)[0], 1 - 20 * 0.1, 1e-4);
}

ShardOptions AdamOptions(bool sync) {
  ShardOptions o = Options(sync, 1, 1);
  o.optimizer.type = OptimizerType::kAdam;
  o.optimizer.learning_rate = *LearningRateSchedule::Constant(0.1f);
  return o;
}

TEST(ParameterShardTest, SnapshotAndRestoreContinueExactlyWithOptimizerSlots) {
  // A shard trained 3 steps, snapshotted, trained 2 more; a second shard
  // restored from the snapshot and trained the same 2 steps must match it
  // bit for bit (parameters, Adam's m and v and step count, the step).
  auto a = Make(AdamOptions(false));
  const std::vector<std::vector<float>> grads = {
      {1, -2, 3}, {0.5, 0.5, -1}, {2, 0, 1}, {-1, 1, 0.25}, {3, -3, 0}};
  for (int i = 0; i < 3; ++i) a->Push(0, i, grads[i], kStats, [](absl::Status, PushResult) {});
  absl::StatusOr<ShardSnapshot> snap = a->Snapshot(0, absl::ZeroDuration());
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->step, 3);
  EXPECT_EQ(snap->optimizer_step, 3);
  ASSERT_EQ(snap->slots.size(), 2u);
  EXPECT_NE(snap->slots[0], std::vector<float>(3, 0.0f));
  for (int i = 3; i < 5; ++i) a->Push(0, i, grads[i], kStats, [](absl::Status, PushResult) {});

  auto b = *ParameterShard::Create(AdamOptions(false));
  std::vector<absl::Span<const float>> slots(snap->slots.begin(), snap->slots.end());
  ASSERT_TRUE(
      b->Initialize(snap->params, snap->state, snap->step, slots, snap->optimizer_step).ok());
  for (int i = 3; i < 5; ++i) b->Push(0, i, grads[i], kStats, [](absl::Status, PushResult) {});
  EXPECT_EQ(Params(*a), Params(*b));
  EXPECT_EQ(a->GetStats().global_step, b->GetStats().global_step);
  absl::StatusOr<ShardSnapshot> sa = a->Snapshot(0, absl::ZeroDuration());
  absl::StatusOr<ShardSnapshot> sb = b->Snapshot(0, absl::ZeroDuration());
  EXPECT_EQ(sa->slots, sb->slots);
  EXPECT_EQ(sa->optimizer_step, sb->optimizer_step);

  // Initialize without slots starts the optimizer afresh.
  ASSERT_TRUE(b->Initialize(snap->params, snap->state, 0).ok());
  absl::StatusOr<ShardSnapshot> fresh = b->Snapshot(0, absl::ZeroDuration());
  EXPECT_EQ(fresh->slots[0], std::vector<float>(3, 0.0f));
  EXPECT_EQ(fresh->optimizer_step, 0);
  // Slots of the wrong count or size are refused.
  std::vector<float> short_slot(2);
  EXPECT_TRUE(absl::IsInvalidArgument(
      b->Initialize(snap->params, snap->state, 0, {short_slot, short_slot})));
  EXPECT_TRUE(absl::IsInvalidArgument(b->Initialize(snap->params, snap->state, 0, {slots[0]})));
}

TEST(ParameterShardTest, SyncSnapshotWaitsForTheStepToComplete) {
  auto shard = Make(Options(true, 2, 2));
  Outcome first;
  shard->Push(0, 0, std::vector<float>{1, 1, 1}, kStats, first.Callback());
  absl::StatusOr<ShardSnapshot> snap;
  std::thread saver([&] { snap = shard->Snapshot(1, absl::Seconds(30)); });
  absl::SleepFor(absl::Milliseconds(50));
  Outcome second;
  shard->Push(1, 0, std::vector<float>{3, 3, 3}, kStats, second.Callback());
  saver.join();
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->step, 1);
  EXPECT_EQ(snap->params, (std::vector<float>{-1, 0, 1}));  // {1,2,3} - mean {2,2,2}
  // Copied at step 1 even though the shard goes on to step 2 at once.
  Outcome a, b;
  shard->Push(0, 1, std::vector<float>{1, 1, 1}, kStats, a.Callback());
  shard->Push(1, 1, std::vector<float>{1, 1, 1}, kStats, b.Callback());
  EXPECT_EQ(shard->GetStats().global_step, 2);
  EXPECT_EQ(snap->params, (std::vector<float>{-1, 0, 1}));
}

TEST(ParameterShardTest, SyncSnapshotGivesUpWaitingAndCopiesAsItIs) {
  auto shard = Make(Options(true, 2, 2));
  absl::StatusOr<ShardSnapshot> snap = shard->Snapshot(1, absl::Milliseconds(20));
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->step, 0);
  EXPECT_EQ(snap->params, (std::vector<float>{1, 2, 3}));
  auto uninitialized = *ParameterShard::Create(Options(true, 2, 2));
  EXPECT_TRUE(
      absl::IsFailedPrecondition(uninitialized->Snapshot(0, absl::ZeroDuration()).status()));
}

TEST(ParameterShardTest, AReplicaThatLeavesIsNotWaitedFor) {
  auto shard = Make(Options(true, 2, 2));
  Outcome first;
  shard->Push(0, 0, std::vector<float>{2, 2, 2}, kStats, first.Callback());
  EXPECT_FALSE(first.called);
  shard->ReplicaLeft(1);
  ASSERT_TRUE(first.called);
  EXPECT_EQ(first.result.global_step, 1);
  EXPECT_EQ(Params(*shard), (std::vector<float>{-1, 0, 1}));
  // The next step needs only replica 0.
  Outcome next;
  shard->Push(0, 1, std::vector<float>{1, 1, 1}, kStats, next.Callback());
  EXPECT_TRUE(next.called);
  EXPECT_EQ(shard->GetStats().global_step, 2);
}

TEST(ParameterShardTest, SspHoldsAPushWhileItsReplicaIsTooFarAhead) {
  ShardOptions o = Options(/*sync=*/false, 1, 2);
  o.rule.staleness = 1;
  auto shard = Make(o);
  const std::vector<float> g = {1, 1, 1};
  Outcome a1, a2, b1, a3, a4, b2;
  shard->Push(0, 0, g, kStats, a1.Callback());  // clock 1
  shard->Push(0, 1, g, kStats, a2.Callback());  // clock 2; replica 1 has not pushed yet
  EXPECT_TRUE(a1.called && a2.called);
  shard->Push(1, 2, g, kStats, b1.Callback());  // joins as the slowest: clock 2
  ASSERT_TRUE(b1.called);
  shard->Push(0, 3, g, kStats, a3.Callback());  // 3 vs 2: 1 ahead, goes on
  ASSERT_TRUE(a3.called);
  shard->Push(0, 4, g, kStats, a4.Callback());  // 4 vs 2: waits
  EXPECT_FALSE(a4.called);
  EXPECT_EQ(Params(*shard), (std::vector<float>{-4, -3, -2}));  // applied nonetheless
  shard->Push(1, 5, g, kStats, b2.Callback());                  // replica 1 at 3: a4 may go on
  EXPECT_TRUE(b2.called);
  ASSERT_TRUE(a4.called);
  EXPECT_TRUE(a4.status.ok()) << a4.status;
  EXPECT_EQ(a4.result.global_step, 6);
  EXPECT_EQ(shard->GetStats().ssp_waits, 1);
}

TEST(ParameterShardTest, SspStopsWaitingForASilentOrLeavingReplica) {
  ShardOptions o = Options(/*sync=*/false, 1, 3);
  o.rule.staleness = 0;
  o.rule.sync_timeout = absl::Milliseconds(200);
  auto shard = Make(o);
  const std::vector<float> g = {1, 1, 1};
  Outcome a, b, c, a2;
  shard->Push(0, 0, g, kStats, a.Callback());
  shard->Push(1, 1, g, kStats, b.Callback());
  shard->Push(2, 2, g, kStats, c.Callback());
  shard->Push(0, 3, g, kStats, a2.Callback());  // lockstep: waits for 1 and 2
  EXPECT_FALSE(a2.called);
  shard->ReplicaLeft(1);
  EXPECT_FALSE(a2.called);  // replica 2 is still live
  const absl::Time start = absl::Now();
  while (!a2.called && absl::Now() - start < absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(a2.called);  // replica 2 was silent for 200 ms
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(150));
  Outcome late;
  shard->Push(2, 4, g, kStats, late.Callback());  // it comes back at the slowest clock
  EXPECT_TRUE(late.called);
}

TEST(ParameterShardTest, SspReleasesEveryWaitingPushWhenTheJobEnds) {
  ShardOptions o = Options(/*sync=*/false, 1, 2);
  o.rule.staleness = 0;
  o.rule.train_steps = 3;
  auto shard = Make(o);
  const std::vector<float> g = {1, 1, 1};
  Outcome a, b, a2, b2;
  shard->Push(0, 0, g, kStats, a.Callback());
  shard->Push(1, 1, g, kStats, b.Callback());
  shard->Push(0, 2, g, kStats, a2.Callback());  // step 3: done, nothing waits
  ASSERT_TRUE(a2.called);
  EXPECT_TRUE(a2.result.job_done);
  ShardOptions o2 = Options(false, 1, 2);
  o2.rule.staleness = 0;
  auto other = Make(o2);
  Outcome first0, first1, waiting;
  other->Push(0, 0, g, kStats, first0.Callback());
  other->Push(1, 1, g, kStats, first1.Callback());
  other->Push(0, 2, g, kStats, waiting.Callback());  // 2 vs 1
  EXPECT_FALSE(waiting.called);
  other->Shutdown();
  ASSERT_TRUE(waiting.called);
  EXPECT_TRUE(waiting.result.job_done);
}

}  // namespace
}  // namespace pstrain
