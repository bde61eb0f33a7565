// A ps task's rows updated again on a backup (issue 55's replicated ps, the
// rows' part): the primary hands out every update in the order it applied
// it; a backup (a SparseShard of the same partition) that applies them in
// sequence holds the primary's rows exactly: weights, slots, last steps,
// counts, admissions and evictions, and the rows before the last sync step.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "models/embedding.h"
#include "models/merge.h"
#include "ps/sparse_shard.h"
#include "ps/update_stream.h"

namespace pstrain {
namespace {

// A dynamic table "emb/embeddings" and a table of 1000 buckets
// "lin/f", both of dim 1 over feature f.
std::unique_ptr<Model> ReplicatedRowsModel() {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Embedding>(
      "emb", EmbeddingOptions{"f", 1, 0, Combiner::kSum, {TableInitializer::kUniform, 0.05f}}));
  layers.push_back(std::make_unique<Linear>("lin", LinearOptions{{"f"}, 1000, false}));
  layers.push_back(std::make_unique<Add>("add"));
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create("m", {1}, 2, std::move(layers), {{0}, {0}, {1, 2}}, Head::kBinary);
  EXPECT_TRUE(model.ok()) << model.status();
  return std::move(*model);
}

// Every row of every table: id -> weights, slots (as bits), last step, count.
using RowKey = std::pair<int, int64_t>;
using RowValue = std::tuple<std::vector<uint32_t>, int64_t, int64_t>;
std::map<RowKey, RowValue> AllRows(const SparseShard& shard) {
  std::map<RowKey, RowValue> rows;
  for (size_t t = 0; t < shard.tables().size(); ++t) {
    EXPECT_TRUE(shard.tables()[t]
                    ->ForEachRow([&](int64_t id, absl::Span<const float> w,
                                     absl::Span<const float> s, int64_t last, int64_t count) {
                      std::vector<uint32_t> bits(w.size() + s.size());
                      std::memcpy(bits.data(), w.data(), w.size() * 4);
                      if (!s.empty()) std::memcpy(bits.data() + w.size(), s.data(), s.size() * 4);
                      rows[{static_cast<int>(t), id}] = {bits, last, count};
                      return absl::OkStatus();
                    })
                    .ok());
  }
  return rows;
}

struct RowsLog {
  absl::Mutex mu;
  std::vector<RowsUpdate> updates ABSL_GUARDED_BY(mu);
  SparseShard::UpdateObserver Observer() {
    return [this](RowsUpdate u) {
      absl::MutexLock lock(&mu);
      updates.push_back(std::move(u));
    };
  }
  std::vector<RowsUpdate> Take() {
    absl::MutexLock lock(&mu);
    return std::move(updates);
  }
};

// `n` distinct ids of table `table` for replica `r`'s push, and their
// gradients.
struct PushRows {
  std::vector<int64_t> ids;
  std::vector<float> grads;
};
PushRows MakePushRows(std::mt19937& rng, int64_t buckets, int dim, int n) {
  PushRows p;
  std::uniform_int_distribution<int64_t> id(0, buckets - 1);
  std::normal_distribution<float> g;
  while (static_cast<int>(p.ids.size()) < n) {
    const int64_t x = id(rng);
    if (std::find(p.ids.begin(), p.ids.end(), x) == p.ids.end()) p.ids.push_back(x);
  }
  for (int k = 0; k < n * dim; ++k) p.grads.push_back(g(rng));
  return p;
}

std::unique_ptr<SparseShard> StartedReplica(const Model& model, const SparseTableRules& rules,
                                            bool sync, int replicas) {
  SparseShardOptions options;
  options.rule.sync = sync;
  options.rule.replicas_to_aggregate = replicas;
  options.rule.total_replicas = replicas;
  options.rule.sync_timeout = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<SparseShard>> shard = SparseShard::Create(model, rules, options);
  EXPECT_TRUE(shard.ok()) << shard.status();
  (*shard)->Reset(0, 9);
  return std::move(*shard);
}

class RowsReplicationTest : public testing::TestWithParam<bool> {};

// Async pushes from 3 threads, or sync steps of 3 replicas; with admission
// after 2 pushes and eviction after 30 steps, so rows come and go.
TEST_P(RowsReplicationTest, ABackupReplayingTheUpdatesHoldsThePrimarysRows) {
  const bool sync = GetParam();
  auto model = ReplicatedRowsModel();
  SparseTableRules rules;
  rules.optimizer.type = EmbeddingOptimizerType::kAdam;
  rules.optimizer.learning_rate = 0.01f;
  rules.min_count = 2;
  rules.ttl_steps = 30;
  auto primary = StartedReplica(*model, rules, sync, 3);
  auto backup = StartedReplica(*model, rules, sync, 3);
  RowsLog log;
  primary->SetUpdateObserver(log.Observer());
  constexpr int64_t kSteps = 120;
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937 rng(40 + r);
      for (int64_t step = 0; step < kSteps; ++step) {
        // Sync: the pull for a step waits for the last one's pushes.
        std::vector<int64_t> probe = {1};
        std::vector<float> value(1);
        ASSERT_TRUE(primary->PullAndWait(r, step, {{0, probe, absl::MakeSpan(value)}}).ok());
        const PushRows emb = MakePushRows(rng, 300, 1, 20), lin = MakePushRows(rng, 1000, 1, 20);
        absl::StatusOr<PushResult> pushed =
            primary->Push(r, step, 0, {{0, emb.ids, emb.grads}, {1, lin.ids, lin.grads}});
        ASSERT_TRUE(pushed.ok()) << pushed.status();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<RowsUpdate> updates = log.Take();
  ASSERT_EQ(updates.size(), sync ? static_cast<size_t>(kSteps) : size_t{3 * kSteps});
  for (size_t i = 0; i < updates.size(); ++i) {
    ASSERT_EQ(updates[i].applied.sequence, static_cast<int64_t>(i) + 1);
    absl::Status s = backup->ApplyReplicated(updates[i]);
    ASSERT_TRUE(s.ok()) << i << ": " << s;
  }
  const auto want = AllRows(*primary);
  EXPECT_GT(want.size(), 500u);
  EXPECT_EQ(AllRows(*backup), want);
  EXPECT_EQ(backup->step(), primary->step());
  EXPECT_EQ(backup->GetStats().evicted, primary->GetStats().evicted);
  EXPECT_GT(primary->GetStats().evicted, 0);
  for (size_t t = 0; t < 2; ++t) {
    EXPECT_EQ(backup->tables()[t]->pending_admissions(),
              primary->tables()[t]->pending_admissions());
  }
  if (sync) {
    // The rows before the last applied step, as a replica whose push
    // counted in it reads them after a failover.
    std::vector<int64_t> ids;
    for (const RowsUpdate::Table& t : updates.back().tables) {
      if (t.table == 0) ids = t.ids;
    }
    ASSERT_FALSE(ids.empty());
    std::vector<float> a(ids.size()), b(ids.size());
    const int64_t last = updates.back().applied.step_before;
    ASSERT_TRUE(primary->PullAndWait(0, last, {{0, ids, absl::MakeSpan(a)}}).ok());
    ASSERT_TRUE(backup->PullAndWait(0, last, {{0, ids, absl::MakeSpan(b)}}).ok());
    EXPECT_EQ(a, b);
  }
  // Out of sequence, or rows the table refuses: nothing changes.
  RowsUpdate repeat = updates.back();
  EXPECT_TRUE(absl::IsOutOfRange(backup->ApplyReplicated(repeat)));
  RowsUpdate bad = updates.back();
  bad.applied.sequence += 1;
  bad.applied.step_before = backup->step();
  bad.tables.push_back({1, {5000}, {1.0f}});  // beyond the table's 1000 buckets
  EXPECT_TRUE(absl::IsInvalidArgument(backup->ApplyReplicated(bad)));
  EXPECT_EQ(AllRows(*backup), want);
}

// A rejoin: while 3 replicas push, a new backup takes a copy of the rows
// (with their pending admissions, the rows before the last sync step and
// the barrier's progress) and joins the update stream at that point; it
// ends with the primary's rows.
TEST_P(RowsReplicationTest, ABackupThatRejoinsMidStreamEndsWithThePrimarysRows) {
  const bool sync = GetParam();
  auto model = ReplicatedRowsModel();
  SparseTableRules rules;
  rules.optimizer.type = EmbeddingOptimizerType::kAdagrad;
  rules.optimizer.learning_rate = 0.05f;
  rules.min_count = 2;
  rules.ttl_steps = 40;
  auto primary = StartedReplica(*model, rules, sync, 3);
  absl::StatusOr<std::unique_ptr<SparseShard>> fresh = SparseShard::Create(*model, rules, [&] {
    SparseShardOptions o;
    o.rule.sync = sync;
    o.rule.replicas_to_aggregate = 3;
    o.rule.total_replicas = 3;
    o.rule.sync_timeout = absl::Seconds(60);
    return o;
  }());
  ASSERT_TRUE(fresh.ok());
  std::unique_ptr<SparseShard> rejoined = std::move(*fresh);
  UpdateStream<RowsUpdate> stream("rows", {});
  primary->SetUpdateObserver([&stream](RowsUpdate u) { stream.Enqueue(std::move(u)); });
  std::atomic<int> pushed{0};
  constexpr int64_t kSteps = 120;
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937 rng(80 + r);
      for (int64_t step = 0; step < kSteps; ++step) {
        std::vector<int64_t> probe = {1};
        std::vector<float> value(1);
        ASSERT_TRUE(primary->PullAndWait(r, step, {{0, probe, absl::MakeSpan(value)}}).ok());
        const PushRows emb = MakePushRows(rng, 300, 1, 20), lin = MakePushRows(rng, 1000, 1, 20);
        ASSERT_TRUE(
            primary->Push(r, step, 0, {{0, emb.ids, emb.grads}, {1, lin.ids, lin.grads}}).ok());
        absl::Notification held;
        stream.WhenAcknowledged([&](absl::Status) { held.Notify(); });
        held.WaitForNotification();
        ++pushed;
      }
    });
  }
  while (pushed < 150) std::this_thread::yield();
  absl::Notification installed;
  absl::StatusOr<SparseShard::BackupCopy> copy = primary->CopyForBackup([&] {
    stream.AddBackup([&](const RowsUpdate& u) {
      installed.WaitForNotification();
      return rejoined->ApplyReplicated(u);
    });
  });
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_FALSE(copy->pending.empty());
  ASSERT_TRUE(rejoined->InstallCopy(*copy).ok());
  installed.Notify();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(stream.live_backups(), 1);
  EXPECT_EQ(AllRows(*rejoined), AllRows(*primary));
  EXPECT_EQ(rejoined->step(), primary->step());
  for (size_t t = 0; t < 2; ++t) {
    EXPECT_EQ(rejoined->tables()[t]->pending_admissions(),
              primary->tables()[t]->pending_admissions());
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, RowsReplicationTest, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? "Sync" : "Async";
                         });

}  // namespace
}  // namespace pstrain
