#include "ps/sparse_shard.h"

#include <cmath>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "models/embedding.h"
#include "models/merge.h"
#include "models/model.h"

namespace pstrain {
namespace {

// A model with a dynamic table "emb/embeddings" of dim 1 and a table of 10
// buckets "lin/f", both over feature f.
std::unique_ptr<Model> BinaryTwoTables() {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Embedding>(
      "emb", EmbeddingOptions{"f", 1, 0, Combiner::kSum, {TableInitializer::kZeros, 0}}));
  layers.push_back(std::make_unique<Linear>("lin", LinearOptions{{"f"}, 10, false}));
  layers.push_back(std::make_unique<Add>("add"));
  auto model = Model::Create("m", {1}, 2, std::move(layers), {{0}, {0}, {1, 2}}, Head::kBinary);
  EXPECT_TRUE(model.ok()) << model.status();
  return std::move(*model);
}

// Ids of table `table` that ps `ps` of `num_ps` owns, the first `n`.
std::vector<int64_t> OwnedIds(const SparseShard& shard, int table, int ps, int num_ps, int n) {
  std::vector<int64_t> ids;
  for (int64_t id = 0; static_cast<int>(ids.size()) < n; ++id) {
    if (RowOwner(shard.layout()[table].key, id, num_ps) == ps) ids.push_back(id);
  }
  return ids;
}

// A shard initialized at step 0, generation 1.
absl::StatusOr<std::unique_ptr<SparseShard>> Started(const Model& model,
                                                     const SparseTableRules& rules,
                                                     const SparseShardOptions& options) {
  absl::StatusOr<std::unique_ptr<SparseShard>> shard = SparseShard::Create(model, rules, options);
  if (shard.ok()) (*shard)->Reset(0, 1);
  return shard;
}

SparseTableRules Sgd() {
  SparseTableRules rules;
  rules.optimizer.type = EmbeddingOptimizerType::kAdagrad;
  rules.optimizer.learning_rate = 1.0f;
  rules.optimizer.initial_accumulator_value = 1e30f;  // ~no update: tests count, not values
  return rules;
}

float Row(SparseShard& shard, int table, int64_t id) {
  std::vector<int64_t> ids = {id};
  std::vector<float> value(shard.layout()[table].dim);
  EXPECT_TRUE(shard.PullAndWait(/*replica=*/-1, 0, {{table, ids, absl::MakeSpan(value)}}).ok());
  return value[0];
}

TEST(SparseShardTest, SyncAveragesAStepsPushesAndAppliesThemOnce) {
  auto model = BinaryTwoTables();
  SparseTableRules rules;
  rules.optimizer.type = EmbeddingOptimizerType::kAdam;  // w moves by ~lr * sign(g) at t = 1
  rules.optimizer.learning_rate = 0.5f;
  SparseShardOptions options;
  options.rule.sync = true;
  options.rule.replicas_to_aggregate = 2;
  options.rule.total_replicas = 2;
  auto shard = Started(*model, rules, options);
  ASSERT_TRUE(shard.ok()) << shard.status();
  SparseShard& s = **shard;
  const std::vector<int64_t> ids = {7};
  const std::vector<float> plus = {1.0f}, minus = {-3.0f};
  auto r = s.Push(0, 0, 0, {{0, ids, plus}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->global_step, 0);
  EXPECT_EQ(Row(s, 0, 7), 0.0f);  // not applied until both replicas pushed
  // A retry of replica 0 counts once.
  ASSERT_TRUE(s.Push(0, 0, 0, {{0, ids, plus}}).ok());
  EXPECT_EQ(s.step(), 0);
  r = s.Push(1, 0, 0, {{0, ids, minus}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->global_step, 1);
  // Mean gradient -1: Adam's first step moves w by +learning_rate.
  EXPECT_NEAR(Row(s, 0, 7), 0.5f, 1e-4);
  // Replica 1 again for step 0: a retry of a push the step counted (the
  // step rule's, as for the dense chunks), not stale, and it changes nothing.
  r = s.Push(1, 0, 0, {{0, ids, minus}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->stale);
  EXPECT_NEAR(Row(s, 0, 7), 0.5f, 1e-4);
  EXPECT_EQ(s.GetStats().stale_pushes, 0);
}

TEST(SparseShardTest, ASyncPullWaitsForThePreviousStepsPushes) {
  auto model = BinaryTwoTables();
  SparseShardOptions options;
  options.rule.sync = true;
  options.rule.replicas_to_aggregate = 2;
  options.rule.total_replicas = 2;
  auto shard = Started(*model, Sgd(), options);
  ASSERT_TRUE(shard.ok());
  SparseShard& s = **shard;
  const std::vector<int64_t> ids = {3};
  const std::vector<float> g = {1.0f};
  ASSERT_TRUE(s.Push(0, 0, 0, {{0, ids, g}}).ok());
  std::vector<float> value(1);
  absl::Notification answered;
  s.Pull(/*replica=*/0, 1, {{0, ids, absl::MakeSpan(value)}}, [&](absl::Status st) {
    EXPECT_TRUE(st.ok()) << st;
    answered.Notify();
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(answered.HasBeenNotified());  // replica 1 has not pushed step 0
  ASSERT_TRUE(s.Push(1, 0, 0, {{0, ids, g}}).ok());
  EXPECT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

// A replica killed after pushing its rows of step 0 and not its dense
// chunks rejoins at step 0: its pull for step 0 gets the rows as they were
// at step 0 (the rows the step changed, as before it; the others as they
// are), so it computes the step as it did before. A read that never waits,
// and a pull two steps behind, get the rows as they are.
TEST(SparseShardTest, ASyncPullForTheStepBeforeGetsThatStepsRows) {
  auto model = BinaryTwoTables();
  SparseTableRules rules;
  rules.optimizer.type = EmbeddingOptimizerType::kAdagrad;
  rules.optimizer.learning_rate = 1.0f;
  rules.optimizer.initial_accumulator_value = 1.0f;
  SparseShardOptions options;
  options.rule.sync = true;
  options.rule.replicas_to_aggregate = 2;
  options.rule.total_replicas = 2;
  auto shard = Started(*model, rules, options);
  ASSERT_TRUE(shard.ok()) << shard.status();
  SparseShard& s = **shard;
  const std::vector<int64_t> first = {3}, second = {4};
  ASSERT_TRUE(s.Push(0, 0, 0, {{0, first, std::vector<float>{2.0f}}}).ok());
  ASSERT_TRUE(s.Push(1, 0, 0, {{0, first, std::vector<float>{4.0f}}}).ok());
  ASSERT_EQ(s.step(), 1);
  const auto pull = [&](int replica, int64_t step) {
    const std::vector<int64_t> ids = {3, 4};
    std::vector<float> values(2);
    EXPECT_TRUE(s.PullAndWait(replica, step, {{0, ids, absl::MakeSpan(values)}}).ok());
    return values;
  };
  const std::vector<float> after_0 = pull(1, 1);
  EXPECT_LT(after_0[0], 0.0f);  // the mean gradient, applied
  EXPECT_EQ(after_0[1], 0.0f);
  EXPECT_EQ(pull(1, 0), (std::vector<float>{0.0f, 0.0f}));  // as at step 0
  EXPECT_EQ(pull(-1, 0), after_0);
  // The retry of replica 1's push changes nothing; step 1 moves row 4.
  ASSERT_TRUE(s.Push(1, 0, 0, {{0, first, std::vector<float>{4.0f}}}).ok());
  EXPECT_EQ(pull(1, 1), after_0);
  ASSERT_TRUE(s.Push(0, 1, 0, {{0, second, std::vector<float>{1.0f}}}).ok());
  ASSERT_TRUE(s.Push(1, 1, 0, {{0, second, std::vector<float>{1.0f}}}).ok());
  ASSERT_EQ(s.step(), 2);
  const std::vector<float> after_1 = pull(0, 2);
  EXPECT_EQ(after_1[0], after_0[0]);
  EXPECT_LT(after_1[1], 0.0f);
  EXPECT_EQ(pull(0, 1), after_0);
  EXPECT_EQ(pull(0, 0), after_1);  // two steps behind: as they are
}

TEST(SparseShardTest, AWaitingPullTimesOutAndAppliesWhatArrived) {
  auto model = BinaryTwoTables();
  SparseShardOptions options;
  options.rule.sync = true;
  options.rule.replicas_to_aggregate = 2;
  options.rule.total_replicas = 2;
  options.rule.sync_timeout = absl::Milliseconds(100);
  auto shard = Started(*model, Sgd(), options);
  ASSERT_TRUE(shard.ok());
  SparseShard& s = **shard;
  const std::vector<int64_t> ids = {3};
  const std::vector<float> g = {1.0f};
  ASSERT_TRUE(s.Push(0, 0, 0, {{0, ids, g}}).ok());
  std::vector<float> value(1);
  const absl::Time start = absl::Now();
  EXPECT_TRUE(s.PullAndWait(/*replica=*/0, 1, {{0, ids, absl::MakeSpan(value)}}).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(90));
  EXPECT_EQ(s.step(), 1);
  EXPECT_EQ(s.tables()[0]->size(), 1);  // replica 0's push was applied
}

TEST(SparseShardTest, ShutdownAnswersWaitingPulls) {
  auto model = BinaryTwoTables();
  SparseShardOptions options;
  options.rule.sync = true;
  options.rule.replicas_to_aggregate = 2;
  options.rule.total_replicas = 2;
  options.rule.sync_timeout = absl::Hours(1);
  auto shard = Started(*model, Sgd(), options);
  ASSERT_TRUE(shard.ok());
  std::vector<int64_t> ids = {1};
  std::vector<float> value(1);
  absl::Notification answered;
  (*shard)->Pull(/*replica=*/0, 5, {{0, ids, absl::MakeSpan(value)}},
                 [&](absl::Status) { answered.Notify(); });
  (*shard)->Shutdown();
  EXPECT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

TEST(SparseShardTest, RowsOfAnotherPsAndBadPushesAreRefusedApplyingNothing) {
  auto model = BinaryTwoTables();
  SparseShardOptions options;
  options.num_ps = 3;
  options.ps_index = 1;
  options.rule.total_replicas = 1;
  auto shard = Started(*model, Sgd(), options);
  ASSERT_TRUE(shard.ok());
  SparseShard& s = **shard;
  const std::vector<int64_t> mine = OwnedIds(s, 0, 1, 3, 2);
  const std::vector<int64_t> theirs = OwnedIds(s, 0, 2, 3, 1);
  const std::vector<float> g = {1.0f, 1.0f};
  const std::vector<float> one = {1.0f};
  absl::StatusOr<PushResult> r = s.Push(0, 0, 0, {{0, mine, g}, {0, theirs, one}});
  EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
  EXPECT_NE(r.status().message().find("lives on ps 2, not on ps 1"), std::string::npos)
      << r.status();
  // Wrong sizes, duplicates, out of a bucketed table's range, negative ids.
  const std::vector<int64_t> twice = {mine[0], mine[0]};
  EXPECT_TRUE(absl::IsInvalidArgument(s.Push(0, 0, 0, {{0, mine, one}}).status()));
  r = s.Push(0, 0, 0, {{0, twice, g}});
  EXPECT_NE(r.status().message().find("pushed twice"), std::string::npos) << r.status();
  std::vector<int64_t> big = OwnedIds(s, 1, 1, 3, 20);
  big.erase(big.begin(), big.end() - 1);  // an owned id >= 10 buckets
  ASSERT_GE(big[0], 10);
  r = s.Push(0, 0, 0, {{1, big, one}});
  EXPECT_NE(r.status().message().find("out of range"), std::string::npos) << r.status();
  const std::vector<int64_t> negative = {-1};
  EXPECT_TRUE(absl::IsInvalidArgument(s.Push(0, 0, 0, {{0, negative, one}}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(s.Push(0, 0, 0, {{5, mine, g}}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(s.Push(3, 0, 0, {{0, mine, g}}).status()));
  EXPECT_EQ(s.tables()[0]->size(), 0);
  EXPECT_EQ(s.tables()[1]->size(), 0);
}

TEST(SparseShardTest, AsyncAppliesOnArrivalAndTtlKeepsADynamicTableUnderBudget) {
  auto model = BinaryTwoTables();
  SparseTableRules rules = Sgd();
  rules.ttl_steps = 10;
  SparseShardOptions options;
  options.rule.total_replicas = 1;
  auto shard = Started(*model, rules, options);
  ASSERT_TRUE(shard.ok());
  SparseShard& s = **shard;
  // Each step touches 5 new ids: without eviction the table would grow to
  // 1000 rows; with a TTL of 10 steps (evictions every step) it holds at
  // most the last 10 steps' 50 ids.
  int64_t most = 0;
  for (int64_t step = 0; step < 200; ++step) {
    std::vector<int64_t> ids;
    for (int k = 0; k < 5; ++k) ids.push_back(step * 5 + k);
    const std::vector<float> g(5, 1.0f);
    ASSERT_TRUE(s.Push(0, step, 0, {{0, ids, g}}).ok());
    most = std::max(most, s.tables()[0]->size());
  }
  EXPECT_LE(most, 55);
  EXPECT_GT(s.GetStats().evicted, 900);
}

TEST(SparseShardTest, RowsSavedByTwoPsRestoreExactlyOnThree) {
  auto model = BinaryTwoTables();
  SparseTableRules rules;  // Adagrad: rows and accumulators both change
  rules.optimizer.learning_rate = 0.3f;
  MemEnv env;
  std::vector<SparseShard::RowsFile> files;
  std::vector<uint64_t> saved_sum(2, 0);
  int64_t saved_rows = 0;
  for (int ps = 0; ps < 2; ++ps) {
    SparseShardOptions options;
    options.num_ps = 2;
    options.ps_index = ps;
    auto shard = Started(*model, rules, options);
    ASSERT_TRUE(shard.ok());
    // Ids below the bucketed table's 10: about 5 of them live on each ps.
    const std::vector<int64_t> ids0 = OwnedIds(**shard, 0, ps, 2, 3);
    const std::vector<int64_t> ids1 = OwnedIds(**shard, 1, ps, 2, 3);
    ASSERT_LT(ids1.back(), 10);
    const std::vector<float> g = {0.5f, -1.0f, 2.0f};
    ASSERT_TRUE((*shard)->Push(0, 3, 0, {{0, ids0, g}, {1, ids1, g}}).ok());
    const std::string path = absl::StrCat("/ckpt/rows-", ps);
    auto saved = (*shard)->Save(&env, path, 4, 4, absl::ZeroDuration(), "adagrad");
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_EQ(saved->file.rows, (std::vector<int64_t>{3, 3}));
    for (int t = 0; t < 2; ++t) saved_sum[t] += saved->checksum[t];
    saved_rows += 6;
    files.push_back({path, saved->file.size_bytes, saved->file.crc32c});
  }
  std::vector<SparseTableInfo> tables = model->sparse_tables();
  std::vector<uint64_t> restored_sum(2, 0);
  int64_t restored_rows = 0;
  for (int ps = 0; ps < 3; ++ps) {
    SparseShardOptions options;
    options.num_ps = 3;
    options.ps_index = ps;
    auto shard = Started(*model, rules, options);
    ASSERT_TRUE(shard.ok());
    auto restored = (*shard)->Restore(&env, files, tables, "adagrad", 4, 2);
    ASSERT_TRUE(restored.ok()) << restored.status();
    for (int t = 0; t < 2; ++t) restored_sum[t] += restored->checksum[t];
    restored_rows += restored->rows;
    EXPECT_EQ((*shard)->step(), 4);
    // Slots of another optimizer are refused.
    EXPECT_TRUE(
        absl::IsInvalidArgument((*shard)->Restore(&env, files, tables, "ftrl", 4, 2).status()));
  }
  EXPECT_EQ(restored_rows, saved_rows);
  EXPECT_EQ(restored_sum, saved_sum);
  // A damaged file is refused.
  std::string bytes = *env.ReadFile(files[1].path);
  bytes[bytes.size() / 2] ^= 1;
  ASSERT_TRUE(env.WriteFileAtomic(files[1].path, bytes).ok());
  SparseShardOptions options;
  auto shard = Started(*model, rules, options);
  EXPECT_TRUE(absl::IsDataLoss((*shard)->Restore(&env, files, tables, "adagrad", 4, 2).status()));
}

TEST(SparseShardTest, RequestsWaitForInitializationAndOldGenerationsAreAborted) {
  auto model = BinaryTwoTables();
  SparseShardOptions options;
  auto shard = SparseShard::Create(*model, Sgd(), options);
  ASSERT_TRUE(shard.ok());
  SparseShard& s = **shard;
  const std::vector<int64_t> ids = {1};
  const std::vector<float> g = {1.0f};
  EXPECT_TRUE(absl::IsUnavailable(s.Push(0, 0, 0, {{0, ids, g}}).status()));
  std::vector<float> value(1);
  EXPECT_TRUE(absl::IsUnavailable(s.PullAndWait(-1, 0, {{0, ids, absl::MakeSpan(value)}})));
  s.Reset(5, 7);
  EXPECT_TRUE(s.Push(0, 5, 7, {{0, ids, g}}).ok());
  absl::StatusOr<PushResult> r = s.Push(0, 6, 3, {{0, ids, g}});
  EXPECT_TRUE(absl::IsAborted(r.status())) << r.status();
  // Non-finite gradients and absurd steps are refused.
  const std::vector<float> nan = {std::nanf("")};
  EXPECT_TRUE(absl::IsInvalidArgument(s.Push(0, 6, 7, {{0, ids, nan}}).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(s.Push(0, std::numeric_limits<int64_t>::max(), 7, {}).status()));
}

TEST(SparseShardTest, AsyncRetriesAreAppliedOnce) {
  auto model = BinaryTwoTables();
  SparseTableRules rules;
  rules.optimizer.type = EmbeddingOptimizerType::kAdam;
  rules.optimizer.learning_rate = 0.5f;
  SparseShardOptions options;
  auto shard = Started(*model, rules, options);
  ASSERT_TRUE(shard.ok());
  const std::vector<int64_t> ids = {2};
  const std::vector<float> g = {1.0f};
  ASSERT_TRUE((*shard)->Push(0, 3, 0, {{0, ids, g}}).ok());
  ASSERT_TRUE((*shard)->Push(0, 3, 0, {{0, ids, g}}).ok());  // the same push again
  EXPECT_NEAR(Row(**shard, 0, 2), -0.5f, 1e-4);              // one Adam step, not two
}

TEST(SparseShardTest, AReplicaThatLeftIsNotWaitedFor) {
  auto model = BinaryTwoTables();
  SparseShardOptions options;
  options.rule.sync = true;
  options.rule.replicas_to_aggregate = 2;
  options.rule.total_replicas = 2;
  options.rule.sync_timeout = absl::Hours(1);
  auto shard = Started(*model, Sgd(), options);
  ASSERT_TRUE(shard.ok());
  const std::vector<int64_t> ids = {3};
  const std::vector<float> g = {1.0f};
  ASSERT_TRUE((*shard)->Push(0, 0, 0, {{0, ids, g}}).ok());
  EXPECT_EQ((*shard)->step(), 0);
  (*shard)->ReplicaLeft(1);  // completes step 0 with replica 0's push
  EXPECT_EQ((*shard)->step(), 1);
  ASSERT_TRUE((*shard)->Push(0, 1, 0, {{0, ids, g}}).ok());
  EXPECT_EQ((*shard)->step(), 2);
}

TEST(SparseShardTest, ASyncSaveCopiesTheRowsAtItsStep) {
  auto model = BinaryTwoTables();
  SparseShardOptions options;
  options.rule.sync = true;
  options.rule.total_replicas = 1;
  auto shard = Started(*model, Sgd(), options);
  ASSERT_TRUE(shard.ok());
  SparseShard* s = shard->get();
  MemEnv env;
  // The save for step 2 waits; steps 0 and 1 come, then 2 and 3: the copy
  // holds the rows of steps 0 and 1 only.
  absl::StatusOr<SparseShard::SavedRows> saved;
  std::thread save([&] { saved = s->Save(&env, "/rows", 2, 2, absl::Seconds(30), "adagrad"); });
  absl::SleepFor(absl::Milliseconds(20));
  for (int64_t step = 0; step < 4; ++step) {
    const std::vector<int64_t> ids = {step};
    const std::vector<float> g = {1.0f};
    ASSERT_TRUE(s->Push(0, step, 0, {{0, ids, g}}).ok());
  }
  save.join();
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->step, 2);
  EXPECT_EQ(saved->file.rows[0], 2);
  EXPECT_EQ(s->tables()[0]->size(), 4);
}

TEST(SparseShardTest, APullFromBeforeARollbackIsAnsweredAtOnce) {
  auto model = BinaryTwoTables();
  SparseShardOptions options;
  options.rule.sync = true;
  options.rule.replicas_to_aggregate = 2;
  options.rule.total_replicas = 2;
  options.rule.sync_timeout = absl::Hours(1);
  auto shard = Started(*model, Sgd(), options);  // generation 1
  ASSERT_TRUE(shard.ok());
  std::vector<int64_t> ids = {1};
  std::vector<float> value(1);
  // A replica of this generation waits for step 4's pushes.
  absl::Notification current;
  (*shard)->Pull(/*replica=*/0, 5, {{0, ids, absl::MakeSpan(value)}},
                 [&](absl::Status) { current.Notify(); }, /*generation=*/1);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(current.HasBeenNotified());
  // One that still holds the parameters of before a rollback (generation 7)
  // is answered at once: waiting, it would not learn of the rollback until
  // the step timed out.
  std::vector<float> other(1);
  absl::Notification stale;
  (*shard)->Pull(/*replica=*/1, 5, {{0, ids, absl::MakeSpan(other)}},
                 [&](absl::Status s) {
                   EXPECT_TRUE(s.ok()) << s;
                   stale.Notify();
                 },
                 /*generation=*/7);
  EXPECT_TRUE(stale.WaitForNotificationWithTimeout(absl::Seconds(10)));
  (*shard)->Shutdown();
  EXPECT_TRUE(current.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

}  // namespace
}  // namespace pstrain
