#include "data/batcher.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/data_test_util.h"

namespace pstrain {
namespace {

using ::testing::ElementsAreArray;
using testutil::MakeDataset;

// Example sizes are small and odd so offsets are exercised.
constexpr int kH = 2, kW = 3, kC = 1;

std::unique_ptr<BatchIterator> MustCreate(const Dataset* dataset, int batch_size, int task,
                                          int num_tasks, bool shuffle, uint64_t seed) {
  absl::StatusOr<std::unique_ptr<BatchIterator>> it =
      BatchIterator::Create(dataset, batch_size, task, num_tasks, shuffle, seed);
  EXPECT_TRUE(it.ok()) << it.status();
  return it.ok() ? *std::move(it) : nullptr;
}

// Draws `num_batches` batches and returns the example indices (the test
// datasets' labels), checking every image against its label on the way.
std::vector<int32_t> Draw(BatchIterator* it, const Dataset& dataset, int num_batches) {
  const int64_t n = dataset.example_size();
  std::vector<float> images(it->batch_size() * n);
  std::vector<float> labels(it->batch_size());
  std::vector<int32_t> drawn;
  for (int b = 0; b < num_batches; ++b) {
    it->Next(images.data(), labels.data());
    for (int i = 0; i < it->batch_size(); ++i) {
      for (int64_t j = 0; j < n; ++j) {
        EXPECT_EQ(images[i * n + j], testutil::PatternPixel(labels[i], j) / 255.0f);
      }
      drawn.push_back(labels[i]);
    }
  }
  return drawn;
}

TEST(BatchIteratorTest, CreateRejectsBadArguments) {
  Dataset dataset = MakeDataset(5, kH, kW, kC);
  auto code = [&](const Dataset* d, int batch_size, int task, int num_tasks) {
    return BatchIterator::Create(d, batch_size, task, num_tasks, true, 1).status().code();
  };
  EXPECT_EQ(code(&dataset, 2, 0, 1), absl::StatusCode::kOk);
  EXPECT_EQ(code(nullptr, 2, 0, 1), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&dataset, 0, 0, 1), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&dataset, -3, 0, 1), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&dataset, 2, 1, 1), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&dataset, 2, -1, 2), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&dataset, 2, 0, 0), absl::StatusCode::kInvalidArgument);
  // Six tasks over five examples: task 5 has nothing.
  EXPECT_EQ(code(&dataset, 2, 4, 6), absl::StatusCode::kOk);
  EXPECT_EQ(code(&dataset, 2, 5, 6), absl::StatusCode::kInvalidArgument);
  Dataset empty = MakeDataset(0, kH, kW, kC);
  EXPECT_EQ(code(&empty, 2, 0, 1), absl::StatusCode::kInvalidArgument);
  Dataset inconsistent = MakeDataset(5, kH, kW, kC);
  inconsistent.images.pop_back();
  EXPECT_EQ(code(&inconsistent, 2, 0, 1), absl::StatusCode::kInvalidArgument);
}

TEST(BatchIteratorTest, ShardsAreDisjointAndCoverTheDataset) {
  Dataset dataset = MakeDataset(11, kH, kW, kC);
  std::set<int32_t> seen;
  int64_t total = 0;
  for (int task = 0; task < 3; ++task) {
    auto it = MustCreate(&dataset, 1, task, 3, /*shuffle=*/true, 42);
    ASSERT_NE(it, nullptr);
    EXPECT_EQ(it->shard_size(), task < 2 ? 4 : 3);
    for (int32_t index : Draw(it.get(), dataset, static_cast<int>(it->shard_size()))) {
      EXPECT_EQ(index % 3, task);
      EXPECT_TRUE(seen.insert(index).second) << "example " << index << " in two shards";
    }
    total += it->shard_size();
  }
  EXPECT_EQ(total, 11);
  EXPECT_EQ(seen.size(), 11u);
}

TEST(BatchIteratorTest, EveryExampleOncePerEpoch) {
  Dataset dataset = MakeDataset(20, kH, kW, kC);
  // Shard of 10 and batches of 3: batches straddle epoch boundaries.
  auto it = MustCreate(&dataset, 3, 1, 2, /*shuffle=*/true, 7);
  ASSERT_NE(it, nullptr);
  std::vector<int32_t> drawn = Draw(it.get(), dataset, 10);  // 30 examples, 3 epochs
  EXPECT_EQ(it->epoch(), 3);
  std::vector<int32_t> expected = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19};
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<int32_t> part(drawn.begin() + epoch * 10, drawn.begin() + (epoch + 1) * 10);
    std::sort(part.begin(), part.end());
    EXPECT_EQ(part, expected) << "epoch " << epoch;
  }
}

TEST(BatchIteratorTest, EpochCountsCompletedEpochs) {
  Dataset dataset = MakeDataset(10, kH, kW, kC);
  auto it = MustCreate(&dataset, 5, 0, 1, /*shuffle=*/false, 0);
  ASSERT_NE(it, nullptr);
  EXPECT_EQ(it->epoch(), 0);
  Draw(it.get(), dataset, 1);
  EXPECT_EQ(it->epoch(), 0);
  Draw(it.get(), dataset, 1);
  EXPECT_EQ(it->epoch(), 1);
  Draw(it.get(), dataset, 3);
  EXPECT_EQ(it->epoch(), 2);
}

TEST(BatchIteratorTest, NoShuffleKeepsDatasetOrder) {
  Dataset dataset = MakeDataset(7, kH, kW, kC);
  auto it = MustCreate(&dataset, 4, 0, 1, /*shuffle=*/false, 0);
  ASSERT_NE(it, nullptr);
  EXPECT_THAT(Draw(it.get(), dataset, 3), ElementsAreArray({0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4}));
}

TEST(BatchIteratorTest, ShuffleIsDeterministicForASeed) {
  Dataset dataset = MakeDataset(50, kH, kW, kC);
  auto a = MustCreate(&dataset, 8, 0, 1, /*shuffle=*/true, 1234);
  auto b = MustCreate(&dataset, 8, 0, 1, /*shuffle=*/true, 1234);
  auto c = MustCreate(&dataset, 8, 0, 1, /*shuffle=*/true, 1235);
  ASSERT_TRUE(a && b && c);
  std::vector<int32_t> drawn_a = Draw(a.get(), dataset, 20);
  EXPECT_EQ(drawn_a, Draw(b.get(), dataset, 20));
  EXPECT_NE(drawn_a, Draw(c.get(), dataset, 20));
  std::vector<int32_t> in_order(50);
  std::iota(in_order.begin(), in_order.end(), 0);
  EXPECT_NE(std::vector<int32_t>(drawn_a.begin(), drawn_a.begin() + 50), in_order);
}

TEST(BatchIteratorTest, SkipIsLikeDrawingThatManyBatches) {
  Dataset dataset = MakeDataset(50, kH, kW, kC);
  for (int skip : {0, 1, 6, 7, 13}) {
    auto a = MustCreate(&dataset, 8, 1, 2, /*shuffle=*/true, 99);
    auto b = MustCreate(&dataset, 8, 1, 2, /*shuffle=*/true, 99);
    Draw(a.get(), dataset, skip);
    b->Skip(skip);
    EXPECT_EQ(a->epoch(), b->epoch()) << skip;
    EXPECT_EQ(Draw(a.get(), dataset, 5), Draw(b.get(), dataset, 5)) << skip;
  }
}

// The permutation is computed by this library, so it is the same on every
// platform; pin it so an accidental change (which would break resuming a job
// with the same data order) is noticed.
constexpr int32_t kPinnedOrder[] = {9, 8, 6, 4, 7, 1, 3, 0, 2, 5};

TEST(BatchIteratorTest, ShuffleOrderIsPinned) {
  Dataset dataset = MakeDataset(10, kH, kW, kC);
  auto it = MustCreate(&dataset, 10, 0, 1, /*shuffle=*/true, 2024);
  ASSERT_NE(it, nullptr);
  std::vector<int32_t> first = Draw(it.get(), dataset, 1);
  std::vector<int32_t> again = Draw(MustCreate(&dataset, 10, 0, 1, true, 2024).get(), dataset, 1);
  EXPECT_EQ(first, again);
  EXPECT_THAT(first, ElementsAreArray(kPinnedOrder));
}

TEST(BatchIteratorTest, ShuffleDiffersBetweenEpochs) {
  Dataset dataset = MakeDataset(30, kH, kW, kC);
  auto it = MustCreate(&dataset, 30, 0, 1, /*shuffle=*/true, 99);
  ASSERT_NE(it, nullptr);
  std::vector<int32_t> epoch0 = Draw(it.get(), dataset, 1);
  std::vector<int32_t> epoch1 = Draw(it.get(), dataset, 1);
  std::vector<int32_t> epoch2 = Draw(it.get(), dataset, 1);
  EXPECT_NE(epoch0, epoch1);
  EXPECT_NE(epoch1, epoch2);
  EXPECT_NE(epoch0, epoch2);
}

TEST(BatchIteratorTest, BatchLargerThanShardRepeatsExamples) {
  Dataset dataset = MakeDataset(3, kH, kW, kC);
  auto it = MustCreate(&dataset, 7, 0, 1, /*shuffle=*/false, 0);
  ASSERT_NE(it, nullptr);
  EXPECT_THAT(Draw(it.get(), dataset, 1), ElementsAreArray({0, 1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(it->epoch(), 2);
}

TEST(GatherRangeTest, ScalesPixelsToUnitInterval) {
  Dataset dataset = MakeDataset(4, 1, 2, 2);
  dataset.images[4] = 0;  // example 1
  dataset.images[5] = 255;
  dataset.images[6] = 51;
  std::vector<float> images(2 * 4);
  std::vector<float> labels(2);
  GatherRange(dataset, 1, 2, images.data(), labels.data());
  EXPECT_THAT(labels, ElementsAreArray({1, 2}));
  EXPECT_EQ(images[0], 0.0f);
  EXPECT_EQ(images[1], 1.0f);
  EXPECT_FLOAT_EQ(images[2], 0.2f);
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(images[4 + j], dataset.images[8 + j] / 255.0f);
    EXPECT_GE(images[4 + j], 0.0f);
    EXPECT_LE(images[4 + j], 1.0f);
  }
}

TEST(GatherRangeTest, EmptyRangeAtEnd) {
  Dataset dataset = MakeDataset(4, 1, 2, 2);
  GatherRange(dataset, 4, 0, nullptr, nullptr);
}

TEST(GatherRangeDeathTest, RangeBeyondDatasetIsAProgrammerError) {
  Dataset dataset = MakeDataset(4, 1, 2, 2);
  std::vector<float> images(3 * 4);
  std::vector<float> labels(3);
  EXPECT_DEATH(GatherRange(dataset, 2, 3, images.data(), labels.data()), "");
}

}  // namespace
}  // namespace pstrain
