// The step rule's cases, run against both engines that follow it: the dense
// chunks (ParameterShard: a push's answer waits) and the sparse rows
// (SparseShard: the push is answered at once, the next pull waits). A case
// passes on one engine and fails on the other only if the two rules differ.
#include "ps/step_barrier.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "models/embedding.h"
#include "models/model.h"
#include "ps/parameter_shard.h"
#include "ps/sparse_shard.h"

namespace pstrain {
namespace {

// One replica's step as seen by the replica: answered once it may go on.
struct Outcome {
  absl::Notification answered;
  absl::Status status;
  PushResult result;  // the push's
  bool called() const { return answered.HasBeenNotified(); }
  bool Wait() { return answered.WaitForNotificationWithTimeout(absl::Seconds(10)); }
};

class EngineUnderTest {
 public:
  virtual ~EngineUnderTest() = default;
  // Replica `replica` pushes a gradient computed at `step` (-1: the
  // engine's current step) and asks to go on.
  virtual std::shared_ptr<Outcome> Step(int replica, int64_t step = -1) = 0;
  virtual StepStats Stats() const = 0;
  virtual void ReplicaLeft(int replica) = 0;
  virtual void Shutdown() = 0;
};

class DenseEngine : public EngineUnderTest {
 public:
  explicit DenseEngine(const StepRule& rule) {
    ShardOptions o;
    o.end = 3;
    o.segments = {{"w", 0, 3}};
    o.num_state = 1;
    o.optimizer.type = OptimizerType::kSgd;
    o.optimizer.learning_rate = *LearningRateSchedule::Constant(1.0f);
    o.rule = rule;
    shard_ = std::move(*ParameterShard::Create(o));
    EXPECT_TRUE(shard_->Initialize(std::vector<float>{1, 2, 3}, std::vector<float>{0}, 0).ok());
  }
  std::shared_ptr<Outcome> Step(int replica, int64_t step) override {
    auto outcome = std::make_shared<Outcome>();
    if (step < 0) step = Stats().global_step;
    shard_->Push(replica, step, std::vector<float>{1, 1, 1}, std::vector<float>{1},
                 [outcome](absl::Status s, PushResult r) {
                   outcome->status = s;
                   outcome->result = r;
                   outcome->answered.Notify();
                 });
    return outcome;
  }
  StepStats Stats() const override { return shard_->GetStats(); }
  void ReplicaLeft(int replica) override { shard_->ReplicaLeft(replica); }
  void Shutdown() override { shard_->Shutdown(); }

 private:
  std::unique_ptr<ParameterShard> shard_;
};

class SparseEngine : public EngineUnderTest {
 public:
  explicit SparseEngine(const StepRule& rule) {
    std::vector<std::unique_ptr<Layer>> layers;
    layers.push_back(std::make_unique<Embedding>(
        "emb", EmbeddingOptions{"f", 1, 0, Combiner::kSum, {TableInitializer::kZeros, 0}}));
    model_ = std::move(*Model::Create("m", {1}, 2, std::move(layers), {{0}}, Head::kBinary));
    SparseTableRules rules;
    rules.optimizer.learning_rate = 0.1f;
    SparseShardOptions options;
    options.rule = rule;
    shard_ = std::move(*SparseShard::Create(*model_, rules, options));
    shard_->Reset(0, 1);
  }
  std::shared_ptr<Outcome> Step(int replica, int64_t step) override {
    auto outcome = std::make_shared<Outcome>();
    if (step < 0) step = Stats().global_step;
    absl::StatusOr<PushResult> pushed = shard_->Push(replica, step, 0, {{0, ids_, grads_}});
    if (!pushed.ok()) {
      outcome->status = pushed.status();
      outcome->answered.Notify();
      return outcome;
    }
    outcome->result = *pushed;
    // The replica's next step starts with its pull.
    auto value = std::make_shared<std::vector<float>>(1);
    shard_->Pull(replica, step + 1, {{0, ids_, absl::MakeSpan(*value)}},
                 [outcome, value](absl::Status s) {
                   outcome->status = s;
                   outcome->answered.Notify();
                 });
    return outcome;
  }
  StepStats Stats() const override { return shard_->GetStats(); }
  void ReplicaLeft(int replica) override { shard_->ReplicaLeft(replica); }
  void Shutdown() override { shard_->Shutdown(); }

 private:
  std::unique_ptr<Model> model_;
  std::unique_ptr<SparseShard> shard_;
  const std::vector<int64_t> ids_ = {3};
  const std::vector<float> grads_ = {1.0f};
};

StepRule Sync(int r, int n, absl::Duration timeout = absl::Hours(1)) {
  StepRule rule;
  rule.sync = true;
  rule.replicas_to_aggregate = r;
  rule.total_replicas = n;
  rule.sync_timeout = timeout;
  return rule;
}

StepRule Ssp(int staleness, int n, absl::Duration timeout = absl::Hours(1)) {
  StepRule rule;
  rule.staleness = staleness;
  rule.total_replicas = n;
  rule.sync_timeout = timeout;
  return rule;
}

class StepRuleTest : public testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<EngineUnderTest> Make(const StepRule& rule) {
    if (GetParam() == "dense") return std::make_unique<DenseEngine>(rule);
    return std::make_unique<SparseEngine>(rule);
  }
};

TEST_P(StepRuleTest, ABackupWorkersLatePushIsStaleAndNeverWaitedFor) {
  auto e = Make(Sync(2, 3));
  auto a = e->Step(0, 0);
  EXPECT_FALSE(a->called());  // one of the two the step needs
  auto b = e->Step(2, 0);
  ASSERT_TRUE(a->Wait() && b->Wait());
  EXPECT_TRUE(a->status.ok() && b->status.ok()) << a->status << b->status;
  EXPECT_EQ(e->Stats().global_step, 1);
  EXPECT_EQ(e->Stats().applied_updates, 1);
  // Replica 1 is the backup: its push for step 0 comes late, is dropped and
  // counted, and it goes on at once.
  auto late = e->Step(1, 0);
  ASSERT_TRUE(late->called());
  EXPECT_TRUE(late->status.ok()) << late->status;
  EXPECT_TRUE(late->result.stale);
  EXPECT_EQ(e->Stats().stale_pushes, 1);
  EXPECT_EQ(e->Stats().applied_updates, 1);
}

TEST_P(StepRuleTest, ARetriedPushCountsOnceAndIsNotStaleAfterItsStep) {
  auto e = Make(Sync(2, 2));
  auto a = e->Step(0, 0);
  auto retry = e->Step(0, 0);
  EXPECT_EQ(e->Stats().global_step, 0);
  auto b = e->Step(1, 0);
  ASSERT_TRUE(a->Wait() && retry->Wait() && b->Wait());
  EXPECT_EQ(e->Stats().global_step, 1);
  auto again = e->Step(1, 0);  // replica 1 did not get its answer
  ASSERT_TRUE(again->Wait());
  EXPECT_TRUE(again->status.ok());
  EXPECT_FALSE(again->result.stale);
  EXPECT_EQ(e->Stats().stale_pushes, 0);
  EXPECT_EQ(e->Stats().applied_updates, 1);
}

TEST_P(StepRuleTest, ATimedOutStepAppliesWhatArrivedAndStopsWaitingForTheMissing) {
  auto e = Make(Sync(2, 2, absl::Milliseconds(100)));
  const absl::Time start = absl::Now();
  auto a = e->Step(0, 0);
  ASSERT_TRUE(a->Wait());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(90));
  EXPECT_EQ(e->Stats().global_step, 1);
  EXPECT_EQ(e->Stats().timed_out_steps, 1);
  // Replica 1 is treated as gone: replica 0 alone completes the next step.
  auto next = e->Step(0, 1);
  ASSERT_TRUE(next->called());
  EXPECT_EQ(e->Stats().global_step, 2);
  // Once it pushes again it is waited for again.
  auto back = e->Step(1, 2);
  EXPECT_FALSE(back->called());
  auto other = e->Step(0, 2);
  ASSERT_TRUE(back->Wait() && other->Wait());
  EXPECT_EQ(e->Stats().global_step, 3);
}

TEST_P(StepRuleTest, AReplicaThatLeavesIsNotWaitedFor) {
  auto e = Make(Sync(2, 2));
  auto a = e->Step(0, 0);
  EXPECT_FALSE(a->called());
  e->ReplicaLeft(1);
  ASSERT_TRUE(a->Wait());
  EXPECT_EQ(e->Stats().global_step, 1);
}

TEST_P(StepRuleTest, SspHoldsAReplicaTooFarAheadOfTheSlowest) {
  auto e = Make(Ssp(0, 2));
  ASSERT_TRUE(e->Step(0)->Wait());
  ASSERT_TRUE(e->Step(1)->Wait());
  auto ahead = e->Step(0);  // two steps against replica 1's one: waits
  EXPECT_FALSE(ahead->called());
  EXPECT_EQ(e->Stats().ssp_waits, 1);
  auto slow = e->Step(1);
  ASSERT_TRUE(ahead->Wait() && slow->Wait());
  EXPECT_TRUE(ahead->status.ok()) << ahead->status;
  EXPECT_EQ(e->Stats().applied_updates, 4);
}

TEST_P(StepRuleTest, SspStopsWaitingForASilentReplica) {
  auto e = Make(Ssp(0, 2, absl::Milliseconds(200)));
  ASSERT_TRUE(e->Step(1)->Wait());
  ASSERT_TRUE(e->Step(0)->Wait());
  auto ahead = e->Step(0);
  EXPECT_FALSE(ahead->called());
  ASSERT_TRUE(ahead->Wait());  // replica 1 said nothing for 200 ms
  EXPECT_TRUE(ahead->status.ok());
}

TEST_P(StepRuleTest, NothingIsAppliedOnceTheJobIsDone) {
  StepRule rule = Sync(1, 1);
  rule.train_steps = 2;
  auto e = Make(rule);
  ASSERT_TRUE(e->Step(0, 0)->Wait());
  auto last = e->Step(0, 1);
  ASSERT_TRUE(last->Wait());
  EXPECT_TRUE(last->result.job_done);
  auto after = e->Step(0, 2);
  ASSERT_TRUE(after->called());
  EXPECT_TRUE(after->result.job_done);
  EXPECT_EQ(e->Stats().applied_updates, 2);
}

TEST_P(StepRuleTest, ShutdownReleasesEveryWaitingReplica) {
  auto e = Make(Sync(2, 2));
  auto a = e->Step(0, 0);
  EXPECT_FALSE(a->called());
  e->Shutdown();
  ASSERT_TRUE(a->Wait());
  EXPECT_TRUE(e->Stats().job_done);
  auto later = e->Step(1, 0);
  ASSERT_TRUE(later->called());
  EXPECT_TRUE(later->result.job_done);
}

INSTANTIATE_TEST_SUITE_P(BothEngines, StepRuleTest, testing::Values("dense", "sparse"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace pstrain
