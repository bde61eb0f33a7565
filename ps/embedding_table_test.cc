#include "ps/embedding_table.h"

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

EmbeddingTableOptions Options(std::string name, int64_t dim) {
  EmbeddingTableOptions options;
  options.name = std::move(name);
  options.dim = dim;
  options.initializer.type = EmbeddingInitializerType::kUniform;
  options.initializer.scale = 0.1f;
  options.initializer.seed = 7;
  options.optimizer.type = EmbeddingOptimizerType::kAdagrad;
  options.optimizer.learning_rate = 0.1f;
  return options;
}

std::unique_ptr<EmbeddingTable> Make(const EmbeddingTableOptions& options) {
  auto table = EmbeddingTable::Create(options);
  EXPECT_TRUE(table.ok()) << table.status();
  return std::move(table).value();
}

std::vector<float> Rows(const EmbeddingTable& table, std::vector<int64_t> ids) {
  std::vector<float> out(ids.size() * table.dim());
  absl::Status status = table.Lookup(ids, absl::MakeSpan(out));
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

std::vector<float> Grads(size_t n, int64_t dim, float value) {
  return std::vector<float>(n * dim, value);
}

TEST(EmbeddingTableTest, InitialValuesDependOnSeedNameAndIdOnly) {
  auto a = Make(Options("user", 8));
  EmbeddingTableOptions other = Options("user", 8);
  other.optimizer.type = EmbeddingOptimizerType::kAdam;  // another ps, another optimizer
  other.buckets = 1000;
  auto b = Make(other);
  // b has touched rows before, in another order: no effect on untouched rows.
  ASSERT_TRUE(b->ApplyGradients({500, 3}, Grads(2, 8, 1.0f), 1).ok());
  const std::vector<float> ra = Rows(*a, {1, 2, 999});
  std::vector<float> rb = Rows(*b, {999, 1, 2});
  std::rotate(rb.begin(), rb.begin() + 8, rb.end());
  EXPECT_EQ(ra, rb);
  for (float x : ra) EXPECT_TRUE(x >= -0.1f && x < 0.1f) << x;
  EXPECT_NE(Rows(*a, {1}), Rows(*a, {2}));
  EXPECT_NE(Rows(*a, {1}), Rows(*Make(Options("item", 8)), {1}));
  EmbeddingTableOptions reseeded = Options("user", 8);
  reseeded.initializer.seed = 8;
  EXPECT_NE(Rows(*a, {1}), Rows(*Make(reseeded), {1}));
  // Lookups never store rows.
  EXPECT_EQ(a->size(), 0);
}

TEST(EmbeddingTableTest, TruncatedNormalStaysWithinTwoStddevs) {
  EmbeddingTableOptions options = Options("t", 16);
  options.initializer.type = EmbeddingInitializerType::kTruncatedNormal;
  options.initializer.scale = 0.5f;
  auto table = Make(options);
  std::vector<int64_t> ids(4096);
  std::iota(ids.begin(), ids.end(), 0);
  const std::vector<float> rows = Rows(*table, ids);
  double sum = 0, sum2 = 0;
  for (float x : rows) {
    ASSERT_LE(std::fabs(x), 1.0f);
    sum += x;
    sum2 += double{x} * x;
  }
  const double mean = sum / rows.size();
  const double stddev = std::sqrt(sum2 / rows.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(stddev, 0.8796 * 0.5, 0.01);  // a normal truncated at 2 sigma has 0.8796 sigma
  EXPECT_EQ(Rows(*table, {4095}), std::vector<float>(rows.end() - 16, rows.end()));
}

TEST(EmbeddingTableTest, OutOfRangeAndNegativeIdsAreRefusedAndNothingApplied) {
  EmbeddingTableOptions options = Options("hashed", 4);
  options.buckets = 100;
  auto table = Make(options);
  const std::vector<float> before = Rows(*table, {0, 99});
  std::vector<float> out(8);
  absl::Status status = table->Lookup({0, 100}, absl::MakeSpan(out));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("'hashed'"), HasSubstr("id 100"), HasSubstr("100 buckets")));
  status = table->ApplyGradients({0, 99, 100}, Grads(3, 4, 1.0f), 1);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("'hashed'"), HasSubstr("id 100"), HasSubstr("nothing applied")));
  status = table->ApplyGradients({0, -5}, Grads(2, 4, 1.0f), 1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("'hashed'"), HasSubstr("id -5"), HasSubstr("negative")));
  EXPECT_FALSE(table->Lookup({-1}, absl::MakeSpan(out).subspan(0, 4)).ok());
  EXPECT_EQ(table->size(), 0);
  EXPECT_EQ(Rows(*table, {0, 99}), before);
  EXPECT_TRUE(table->ApplyGradients({0, 99}, Grads(2, 4, 1.0f), 1).ok());
  EXPECT_EQ(table->size(), 2);
  // A dynamic table takes any id >= 0.
  auto dynamic = Make(Options("dynamic", 4));
  EXPECT_TRUE(dynamic->ApplyGradients({int64_t{1} << 62}, Grads(1, 4, 1.0f), 1).ok());
  EXPECT_EQ(dynamic->size(), 1);
}

TEST(EmbeddingTableTest, DuplicateIdsAndWrongSizesAreRefusedAndNothingApplied) {
  auto table = Make(Options("dup", 4));
  ASSERT_TRUE(table->ApplyGradients({1}, Grads(1, 4, 0.5f), 1).ok());
  const std::vector<float> before = Rows(*table, {1, 2, 3});
  absl::Status status = table->ApplyGradients({1, 2, 3, 2}, Grads(4, 4, 1.0f), 2);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("'dup'"), HasSubstr("id 2 appears twice"),
                                      HasSubstr("positions 1 and 3"), HasSubstr("nothing")));
  status = table->ApplyGradients({1, 2}, std::vector<float>(7, 1.0f), 2);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("'dup'"), HasSubstr("got 7")));
  std::vector<float> out(7);
  EXPECT_FALSE(table->Lookup({1, 2}, absl::MakeSpan(out)).ok());
  EXPECT_EQ(table->size(), 1);
  EXPECT_EQ(Rows(*table, {1, 2, 3}), before);
}

TEST(EmbeddingTableTest, AnIdIsAdmittedAtItsMinCountthPush) {
  EmbeddingTableOptions options = Options("admit", 2);
  options.min_count = 3;
  auto table = Make(options);
  const std::vector<float> init = Rows(*table, {5});
  ASSERT_TRUE(table->ApplyGradients({5, 6}, Grads(2, 2, 1.0f), 1).ok());
  ASSERT_TRUE(table->ApplyGradients({5}, Grads(1, 2, 1.0f), 2).ok());
  EXPECT_EQ(table->size(), 0);
  EXPECT_EQ(table->pending_admissions(), 2);
  EXPECT_EQ(Rows(*table, {5}), init);  // counted only
  ASSERT_TRUE(table->ApplyGradients({5}, Grads(1, 2, 0.5f), 3).ok());
  EXPECT_EQ(table->size(), 1);
  EXPECT_EQ(table->pending_admissions(), 1);
  // Only the admitting push's gradient is applied (Adagrad, accum 0.1 + 0.25).
  const std::vector<float> row = Rows(*table, {5});
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR(row[i], init[i] - 0.1 * 0.5 / std::sqrt(0.35), 1e-6);
  }
}

TEST(EmbeddingTableTest, EvictDropsStaleRowsAndTheirStorageIsReused) {
  EmbeddingTableOptions options = Options("ttl", 16);
  options.ttl_steps = 10;
  options.min_count = 2;
  auto table = Make(options);
  std::vector<int64_t> all(1000), half(500);
  std::iota(all.begin(), all.end(), 0);
  std::iota(half.begin(), half.end(), 0);
  const std::vector<float> init = Rows(*table, all);
  ASSERT_TRUE(table->ApplyGradients(all, Grads(1000, 16, 1.0f), 1).ok());
  ASSERT_TRUE(table->ApplyGradients(all, Grads(1000, 16, 1.0f), 1).ok());
  ASSERT_TRUE(table->ApplyGradients(half, Grads(500, 16, 1.0f), 5).ok());
  ASSERT_TRUE(table->ApplyGradients({5000}, Grads(1, 16, 1.0f), 1).ok());  // pending
  EXPECT_EQ(table->size(), 1000);
  EXPECT_EQ(table->pending_admissions(), 1);
  const int64_t full_bytes = table->MemoryBytes();
  EXPECT_EQ(table->Evict(10), 0);  // step 1 + 10 > 10
  EXPECT_EQ(table->Evict(11), 500);
  EXPECT_EQ(table->size(), 500);
  EXPECT_EQ(table->pending_admissions(), 0);
  std::vector<int64_t> evicted(all.begin() + 500, all.end());
  EXPECT_EQ(Rows(*table, evicted), std::vector<float>(init.begin() + 500 * 16, init.end()));
  EXPECT_NE(Rows(*table, half), std::vector<float>(init.begin(), init.begin() + 500 * 16));
  // Re-admitting the same ids reuses the freed records: no new memory, and
  // the rows start over from their initial values.
  ASSERT_TRUE(table->ApplyGradients(evicted, Grads(500, 16, 0.0f), 12).ok());
  ASSERT_TRUE(table->ApplyGradients(evicted, Grads(500, 16, 0.0f), 12).ok());
  EXPECT_EQ(table->size(), 1000);
  EXPECT_EQ(table->MemoryBytes(), full_bytes - 0) << "records were not reused";
  EXPECT_EQ(Rows(*table, evicted), std::vector<float>(init.begin() + 500 * 16, init.end()));
  EXPECT_EQ(table->Evict(15), 500);  // the rows last updated at step 5
  EXPECT_EQ(table->Evict(1000), 500);
  EXPECT_EQ(table->size(), 0);
  options.ttl_steps = 0;
  auto forever = Make(options);
  ASSERT_TRUE(forever->ApplyGradients({1}, Grads(1, 16, 1.0f), 1).ok());
  ASSERT_TRUE(forever->ApplyGradients({1}, Grads(1, 16, 1.0f), 1).ok());
  EXPECT_EQ(forever->Evict(1 << 30), 0);
  EXPECT_EQ(forever->size(), 1);
}

// A checksum of every row, independent of visiting order.
uint64_t Checksum(const std::vector<const EmbeddingTable*>& tables, int64_t* rows) {
  std::map<int64_t, uint64_t> per_row;
  for (const EmbeddingTable* table : tables) {
    EXPECT_TRUE(
        table
            ->ForEachRow([&](int64_t id, absl::Span<const float> weights,
                             absl::Span<const float> slots, int64_t last_step, int64_t count) {
              uint64_t h = 1469598103934665603ULL ^ static_cast<uint64_t>(id);
              auto add = [&h](const void* p, size_t n) {
                for (size_t i = 0; i < n; ++i) {
                  h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ULL;
                }
              };
              add(weights.data(), weights.size() * sizeof(float));
              add(slots.data(), slots.size() * sizeof(float));
              add(&last_step, sizeof(last_step));
              add(&count, sizeof(count));
              EXPECT_TRUE(per_row.emplace(id, h).second) << "row " << id << " twice";
              return absl::OkStatus();
            })
            .ok());
  }
  uint64_t sum = 0;
  for (const auto& [id, h] : per_row) sum = sum * 31 + h;
  *rows = static_cast<int64_t>(per_row.size());
  return sum;
}

class RoundTripTest : public ::testing::TestWithParam<EmbeddingOptimizerType> {};

TEST_P(RoundTripTest, ForEachRowThenInsertRowOntoTwoTablesRestoresEveryRowExactly) {
  EmbeddingTableOptions options = Options("ckpt", 5);
  options.optimizer.type = GetParam();
  options.optimizer.l1 = 0.001f;
  auto source = Make(options);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  auto push = [&](EmbeddingTable& table, int64_t step) {
    std::vector<int64_t> ids;
    for (int64_t id = step; id < 3000; id += 1 + step % 3) ids.push_back(id);
    std::vector<float> grads(ids.size() * 5);
    for (float& g : grads) g = normal(rng);
    ASSERT_TRUE(table.ApplyGradients(ids, grads, step).ok());
  };
  for (int64_t step = 1; step <= 4; ++step) push(*source, step);
  // "Restore onto 2 ps": rows split by id parity.
  auto even = Make(options), odd = Make(options);
  absl::Status status =
      source->ForEachRow([&](int64_t id, absl::Span<const float> weights,
                             absl::Span<const float> slots, int64_t last, int64_t count) {
        EXPECT_EQ(slots.size(), static_cast<size_t>(source->slot_floats()));
        return (id % 2 ? odd : even)->InsertRow(id, weights, slots, last, count);
      });
  ASSERT_TRUE(status.ok()) << status;
  int64_t rows = 0, restored_rows = 0;
  const uint64_t sum = Checksum({source.get()}, &rows);
  EXPECT_EQ(Checksum({even.get(), odd.get()}, &restored_rows), sum);
  EXPECT_EQ(restored_rows, rows);
  EXPECT_EQ(rows, source->size());
  // They go on training alike, bit for bit.
  std::vector<int64_t> ids;
  for (int64_t id = 5; id < 3000; id += 1 + 5 % 3) ids.push_back(id);
  std::vector<float> grads(ids.size() * 5);
  for (float& g : grads) g = normal(rng);
  ASSERT_TRUE(source->ApplyGradients(ids, grads, 5).ok());
  std::vector<int64_t> even_ids, odd_ids;
  std::vector<float> even_grads, odd_grads;
  for (size_t i = 0; i < ids.size(); ++i) {
    (ids[i] % 2 ? odd_ids : even_ids).push_back(ids[i]);
    auto& g = ids[i] % 2 ? odd_grads : even_grads;
    g.insert(g.end(), grads.begin() + i * 5, grads.begin() + (i + 1) * 5);
  }
  ASSERT_TRUE(even->ApplyGradients(even_ids, even_grads, 5).ok());
  ASSERT_TRUE(odd->ApplyGradients(odd_ids, odd_grads, 5).ok());
  EXPECT_EQ(Checksum({even.get(), odd.get()}, &restored_rows), Checksum({source.get()}, &rows));
}

INSTANTIATE_TEST_SUITE_P(AllOptimizers, RoundTripTest,
                         ::testing::Values(EmbeddingOptimizerType::kAdagrad,
                                           EmbeddingOptimizerType::kFtrl,
                                           EmbeddingOptimizerType::kAdam));

TEST(EmbeddingTableTest, InsertRowRefusesBadRows) {
  EmbeddingTableOptions options = Options("restore", 2);
  options.optimizer.type = EmbeddingOptimizerType::kAdam;
  auto table = Make(options);
  const std::vector<float> w = {0.1f, 0.2f};
  std::vector<float> slots = {0, 0, 0, 0, 3};
  EXPECT_TRUE(table->InsertRow(1, w, slots, 7).ok());
  EXPECT_EQ(table->InsertRow(1, w, slots, 7).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(table->InsertRow(2, w, {0, 0, 0, 0}, 7).message(), HasSubstr("4 slot floats"));
  EXPECT_THAT(table->InsertRow(2, {0.1f}, slots, 7).message(), HasSubstr("1 weights"));
  EXPECT_THAT(table->InsertRow(-2, w, slots, 7).message(), HasSubstr("negative"));
  slots[4] = 1.5f;
  EXPECT_THAT(table->InsertRow(2, w, slots, 7).message(), HasSubstr("step count"));
  slots[4] = 1.0f;
  slots[2] = -1.0f;
  EXPECT_THAT(table->InsertRow(2, w, slots, 7).message(), HasSubstr("Adam v"));
  slots[2] = std::nanf("");
  EXPECT_THAT(table->InsertRow(2, w, slots, 7).message(), HasSubstr("nan"));
  EXPECT_EQ(table->size(), 1);
  EXPECT_EQ(Rows(*table, {1}), w);
}

TEST(EmbeddingTableTest, ConcurrentPushesMatchSequentialOnesAndOverlapSafely) {
  constexpr int kThreads = 4, kSteps = 50, kRowsPerThread = 2000, kDim = 8;
  auto concurrent = Make(Options("concurrent", kDim));
  auto sequential = Make(Options("concurrent", kDim));
  // Thread t's push at step s: its own ids, gradients a function of (id, s).
  auto batch = [](int t, int s, std::vector<int64_t>* ids, std::vector<float>* grads) {
    ids->clear();
    grads->clear();
    for (int k = s % 7; k < kRowsPerThread; k += 3) {
      const int64_t id = int64_t{t} * kRowsPerThread + k;
      ids->push_back(id);
      for (int i = 0; i < kDim; ++i) grads->push_back(std::sin(id * 0.37f + s + i));
    }
  };
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::vector<int64_t> ids;
        std::vector<float> grads;
        std::vector<float> out;
        for (int s = 0; s < kSteps; ++s) {
          batch(t, s, &ids, &grads);
          ASSERT_TRUE(concurrent->ApplyGradients(ids, grads, s).ok());
          out.resize(grads.size());
          ASSERT_TRUE(concurrent->Lookup(ids, absl::MakeSpan(out)).ok());
        }
      });
    }
    for (auto& thread : threads) thread.join();
  }
  std::vector<int64_t> ids;
  std::vector<float> grads;
  for (int s = 0; s < kSteps; ++s) {
    for (int t = 0; t < kThreads; ++t) {
      batch(t, s, &ids, &grads);
      ASSERT_TRUE(sequential->ApplyGradients(ids, grads, s).ok());
    }
  }
  int64_t rows_a = 0, rows_b = 0;
  EXPECT_EQ(Checksum({concurrent.get()}, &rows_a), Checksum({sequential.get()}, &rows_b));
  EXPECT_EQ(rows_a, rows_b);

  // Overlapping ids, with lookups, evictions and memory reads at the same
  // time: no crash or race, and Adagrad's accumulator (a sum of equal
  // terms, so independent of order) is exact.
  EmbeddingTableOptions options = Options("overlap", kDim);
  options.ttl_steps = 1000000;
  auto shared = Make(options);
  std::vector<int64_t> common(300);
  std::iota(common.begin(), common.end(), 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> out(common.size() * kDim);
      for (int s = 0; s < kSteps; ++s) {
        ASSERT_TRUE(shared->ApplyGradients(common, Grads(common.size(), kDim, 0.5f), s).ok());
        ASSERT_TRUE(shared->Lookup(common, absl::MakeSpan(out)).ok());
        if (t == 0) {
          EXPECT_EQ(shared->Evict(s), 0);
          EXPECT_GT(shared->MemoryBytes(), 0);
          EXPECT_LE(shared->size(), 300);
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(shared->size(), 300);
  float accum = 0.1f;
  for (int i = 0; i < kThreads * kSteps; ++i) accum += 0.25f;
  EXPECT_TRUE(
      shared
          ->ForEachRow([&](int64_t, absl::Span<const float> weights, absl::Span<const float> slots,
                           int64_t last_step, int64_t count) {
            for (float x : weights) EXPECT_TRUE(std::isfinite(x));
            for (float x : slots) EXPECT_EQ(x, accum);
            EXPECT_EQ(last_step, kSteps - 1);
            EXPECT_EQ(count, kThreads * kSteps);
            return absl::OkStatus();
          })
          .ok());
}

// The goal: ps memory per row at most 1.3x the row + slot bytes. A
// printed figure, with a generous bound.
TEST(EmbeddingTableTest, MemoryPerRowAtOneMillionRows) {
  constexpr int64_t kRows = 1000000, kBatch = 10000, kDim = 16;
  const size_t heap_before = mallinfo2().uordblks;
  auto table = Make(Options("memory", kDim));
  std::vector<int64_t> ids(kBatch);
  const std::vector<float> grads = Grads(kBatch, kDim, 0.01f);
  std::mt19937_64 rng(3);
  for (int64_t done = 0; done < kRows; done += kBatch) {
    // Spread-out ids, as hashed features are.
    for (int64_t i = 0; i < kBatch; ++i) ids[i] = (done + i) * 2654435761LL % (int64_t{1} << 40);
    ASSERT_TRUE(table->ApplyGradients(ids, grads, 1).ok());
  }
  ASSERT_EQ(table->size(), kRows);
  const double per_row = static_cast<double>(table->MemoryBytes()) / kRows;
  const double heap_per_row = static_cast<double>(mallinfo2().uordblks - heap_before) / kRows;
  const double ratio = per_row / table->RowBytes();
  std::cout << "embedding table, dim " << kDim << " Adagrad, " << kRows << " rows: MemoryBytes "
            << per_row << " B/row (malloc's count: " << heap_per_row << " B/row) against "
            << table->RowBytes() << " B of row + slots: ratio " << ratio << "\n";
  EXPECT_EQ(table->RowBytes(), 128);
  EXPECT_LT(ratio, 2.0);
}

// A record holds its last step only when the table evicts: without
// ttl_steps its 8 bytes are not stored (ForEachRow gives 0), with it they are
// and eviction reads them.
TEST(EmbeddingTableTest, OnlyATableThatEvictsStoresTheLastStep) {
  constexpr int64_t kRows = 100000, kDim = 8;
  EmbeddingTableOptions evicting = Options("ttl", kDim);
  evicting.ttl_steps = 10;
  auto plain = Make(Options("plain", kDim)), ttl = Make(evicting);
  std::vector<int64_t> ids(kRows);
  for (int64_t i = 0; i < kRows; ++i) ids[i] = i * 2654435761LL % (int64_t{1} << 40);
  const std::vector<float> grads = Grads(kRows, kDim, 0.01f);
  ASSERT_TRUE(plain->ApplyGradients(ids, grads, 7).ok());
  ASSERT_TRUE(ttl->ApplyGradients(ids, grads, 7).ok());
  const double saved = static_cast<double>(ttl->MemoryBytes() - plain->MemoryBytes()) / kRows;
  std::cout << "last step: " << saved << " bytes per row more with eviction\n";
  EXPECT_GT(saved, 7.5);
  EXPECT_LT(saved, 12.0);  // 8, and the chunks rounding another way
  auto last_steps = [](const EmbeddingTable& table) {
    std::set<int64_t> steps;
    EXPECT_TRUE(table
                    .ForEachRow([&](int64_t, absl::Span<const float>, absl::Span<const float>,
                                    int64_t last_step, int64_t) {
                      steps.insert(last_step);
                      return absl::OkStatus();
                    })
                    .ok());
    return steps;
  };
  EXPECT_EQ(last_steps(*plain), std::set<int64_t>{0});
  EXPECT_EQ(last_steps(*ttl), std::set<int64_t>{7});
  EXPECT_EQ(ttl->Evict(17), kRows);
  EXPECT_EQ(plain->Evict(17), 0);
}

// A row's count is how often it was trained: every push of its id, those
// before its admission too; a restored row keeps its count, clamped to the
// 32 bits a record holds, and a saturated count stays there.
TEST(EmbeddingTableTest, RowsCountTheirPushes) {
  EmbeddingTableOptions options = Options("counted", 2);
  options.min_count = 3;
  auto table = Make(options);
  auto counts = [&] {
    std::map<int64_t, int64_t> c;
    EXPECT_TRUE(table
                    ->ForEachRow([&](int64_t id, absl::Span<const float>, absl::Span<const float>,
                                     int64_t, int64_t count) {
                      c[id] = count;
                      return absl::OkStatus();
                    })
                    .ok());
    return c;
  };
  for (int step = 1; step <= 5; ++step) {
    std::vector<int64_t> ids = {1};
    if (step % 2 == 1) ids.push_back(2);  // id 2 in pushes 1, 3, 5
    ASSERT_TRUE(table->ApplyGradients(ids, Grads(ids.size(), 2, 0.1f), step).ok());
  }
  EXPECT_EQ(counts(), (std::map<int64_t, int64_t>{{1, 5}, {2, 3}}));

  const std::vector<float> w = {0.5f, 0.5f}, slots = {0.1f, 0.1f};
  ASSERT_TRUE(table->InsertRow(7, w, slots, 1, int64_t{1} << 40).ok());
  ASSERT_TRUE(table->InsertRow(8, w, slots, 1, 41).ok());
  ASSERT_TRUE(table->ApplyGradients({7, 8}, Grads(2, 2, 0.1f), 6).ok());
  const std::map<int64_t, int64_t> after = counts();
  EXPECT_EQ(after.at(7), int64_t{0xffffffff});
  EXPECT_EQ(after.at(8), 42);
}

}  // namespace
}  // namespace pstrain
