// A restart with another number of replicas: the unread files, and rests of
// files, of the run before are dealt anew, so that over the whole job every
// example is read once per epoch (and the examples of the shuffle windows
// being handed out at the restart, counted by the deal, once more).
#include "data/stream/input_redeal.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/stream/streamed_batches.h"
#include "gtest/gtest.h"
#include "testing/data_test_util.h"
#include "testing/temp_dir.h"

namespace pstrain {
namespace {

class InputRedealTest : public ::testing::Test {
 protected:
  ExampleStreamOptions Options(int replica, int replicas) const {
    ExampleStreamOptions o;
    o.files = files_;
    o.features.num_dense = 1;
    o.features.sparse = {"ids"};
    o.batch_size = 1;  // every example is in a whole batch
    o.cycle_length = 2;
    o.shuffle_buffer = 5;
    o.seed = 42;
    o.num_epochs = epochs_;
    o.replica = replica;
    o.num_replicas = replicas;
    return o;
  }

  // Replica `replica` of `replicas` (with its share of `deal`, if any)
  // trains `batches` batches (-1: to its input's end) from step `step`,
  // logging its positions as a training replica does; adds the ids it read
  // to seen_.
  void Run(int replica, int replicas, const std::optional<InputDeal>& deal, int64_t step,
           int batches) {
    ExampleStreamOptions o = Options(replica, replicas);
    if (deal.has_value()) o.redeal = deal->ShareOf(replica, /*sync=*/true);
    InputPositionLog log(env_, absl::StrCat(dir_, "/replica-", replica, ".txt"),
                         StreamFingerprint(o), /*every=*/5, /*keep=*/200, PositionLogAbout(o));
    std::string note;
    ASSERT_TRUE(log.Load(&note).ok());
    absl::StatusOr<std::unique_ptr<StreamedBatches>> b =
        StreamedBatches::Start(env_, o, {"ids"}, step, &log);
    ASSERT_TRUE(b.ok()) << b.status();
    float dense = 0;
    float label = 0;
    for (int i = 0; batches < 0 || i < batches; ++i) {
      absl::Status s = (*b)->NextBatch(&dense, &label, nullptr);
      if (batches < 0 && absl::IsOutOfRange(s)) break;
      ASSERT_TRUE(s.ok()) << s << " (replica " << replica << ", batch " << step + i << ")";
      ++seen_[static_cast<int64_t>(dense)];
    }
  }

  // Every replica of a run of `replicas`, `batches` batches each.
  void RunAll(int replicas, const std::optional<InputDeal>& deal, int64_t step, int batches) {
    for (int r = 0; r < replicas; ++r) Run(r, replicas, deal, step, batches);
  }

  InputDeal Plan(int replicas, int64_t step) {
    std::string why_not;
    absl::StatusOr<std::optional<InputDeal>> deal =
        PlanDeal(env_, dir_, Options(0, replicas), step, /*sync=*/true, &why_not);
    EXPECT_TRUE(deal.ok()) << deal.status();
    EXPECT_TRUE(deal.ok() && deal->has_value()) << why_not;
    if (!deal.ok() || !deal->has_value()) return InputDeal();
    EXPECT_TRUE(SaveDeal(env_, dir_, **deal).ok());
    return **deal;
  }

  // Every example read once per epoch, and `read_again` reads more, at
  // most `deals` of them of one example.
  void ExpectEveryExampleOncePerEpoch(int64_t read_again, int deals = 1) {
    ASSERT_EQ(seen_.size(), 7u * 13u);
    int64_t extra = 0;
    for (const auto& [id, times] : seen_) {
      EXPECT_GE(times, epochs_) << "example " << id;
      EXPECT_LE(times, epochs_ + deals) << "example " << id;
      extra += times - epochs_;
    }
    EXPECT_EQ(extra, read_again);
  }

  Env* env_ = Env::Default();
  std::string dir_ = testing_util::TempDirRemovedAtExit("input_redeal");
  // 7 files of 13 examples: 2 replicas have 4 and 3 files.
  std::vector<std::string> files_ = testutil::WriteExampleFiles(dir_, 7, 13, /*gzip=*/true);
  std::map<int64_t, int> seen_;  // id -> times read
  int epochs_ = 2;
};

TEST_F(InputRedealTest, TwoReplicasThenThreeThenTwoReadEveryExampleOncePerEpoch) {
  // 2 replicas train 45 batches: replica 1 (39 examples an epoch) is in its
  // second epoch, replica 0 (52) still in its first.
  RunAll(2, std::nullopt, 0, 45);
  const InputDeal three = Plan(3, 45);
  EXPECT_EQ(three.from_replicas, 2);
  EXPECT_EQ(three.replicas, 3);
  EXPECT_EQ(three.epoch, 1);
  EXPECT_GT(three.read_again, 0);
  EXPECT_LE(three.read_again, 2 * 5);  // one shuffle window per replica
  // Replica 0's rest of epoch 0, its files of epoch 1, replica 1's rest.
  EXPECT_GE(three.pieces.size(), 4u + 1u);
  int begun = 0;
  for (const FilePiece& p : three.pieces) begun += p.offset > 0;
  EXPECT_GE(begun, 1);
  // The deal is kept for every replica, and restarts, of 3.
  absl::StatusOr<std::optional<InputDeal>> loaded = LoadDeal(env_, dir_, Options(2, 3));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->ToString(), three.ToString());
  EXPECT_FALSE(LoadDeal(env_, dir_, Options(0, 4))->has_value());

  // 3 replicas train 20 batches, then 2 again take over at step 65.
  RunAll(3, three, 45, 20);
  const InputDeal two = Plan(2, 65);
  EXPECT_EQ(two.from_replicas, 3);
  EXPECT_EQ(two.epoch, 1);
  // The log of replica 2, which a later run of 3 would take for its own, is gone.
  EXPECT_FALSE(env_->FileExists(dir_ + "/replica-2.txt"));
  RunAll(2, two, 65, -1);
  ExpectEveryExampleOncePerEpoch(three.read_again + two.read_again, /*deals=*/2);
}

TEST_F(InputRedealTest, AReplicaOfARedealtRunResumesFromItsPositions) {
  RunAll(2, std::nullopt, 0, 10);
  const InputDeal deal = Plan(3, 10);
  RunAll(3, deal, 10, 12);
  // The 3 restart at step 22, from their logged positions of batch 20
  // (none has one of batch 10: the deal says where they began).
  RunAll(3, deal, 22, -1);
  ExpectEveryExampleOncePerEpoch(deal.read_again);
  // A step before the deal's is not one its share can begin at.
  ExampleStreamOptions o = Options(0, 3);
  o.redeal = deal.ShareOf(0, true);
  absl::StatusOr<std::unique_ptr<StreamedBatches>> early =
      StreamedBatches::Start(env_, o, {"ids"}, 9, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(early.status())) << early.status();
}

TEST_F(InputRedealTest, AnInputThatEndedLeavesOnlyTheLastEpochsToTheOthers) {
  // 3 epochs among 6 replicas: replicas 1-5 (a file each) read all 3 by
  // batch 39 and wait; replica 0 (2 files) trains on, in its second, to
  // step 45. 7 replicas take over: replica 0's rest of epoch 2 and its files
  // of epoch 3, nothing more.
  epochs_ = 3;
  Run(0, 6, std::nullopt, 0, 45);
  for (int r = 1; r < 6; ++r) Run(r, 6, std::nullopt, 0, -1);
  const InputDeal deal = Plan(7, 45);
  EXPECT_EQ(deal.epoch, 2);
  RunAll(7, deal, 45, -1);
  ExpectEveryExampleOncePerEpoch(deal.read_again);
}

TEST_F(InputRedealTest, NothingToDealOrNotPlannableIsSaid) {
  std::string why_not;
  // No logs at all, and logs of the same number of replicas.
  absl::StatusOr<std::optional<InputDeal>> none =
      PlanDeal(env_, dir_, Options(0, 2), 10, true, &why_not);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  RunAll(2, std::nullopt, 0, 10);
  none = PlanDeal(env_, dir_, Options(0, 2), 10, true, &why_not);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_EQ(why_not, "");
  // A log of the run before missing: not planned, and why.
  ASSERT_TRUE(env_->DeleteFile(dir_ + "/replica-1.txt").ok());
  none = PlanDeal(env_, dir_, Options(0, 3), 10, true, &why_not);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_NE(why_not.find("not all there"), std::string::npos) << why_not;
  // Fewer files than replicas: records, not files, are dealt.
  RunAll(2, std::nullopt, 0, 10);
  none = PlanDeal(env_, dir_, Options(0, 8), 10, true, &why_not);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_NE(why_not.find("fewer files"), std::string::npos) << why_not;
}

TEST_F(InputRedealTest, ADamagedDealIsNamed) {
  InputDeal deal;
  deal.base = 7;
  deal.from_replicas = 2;
  deal.replicas = 3;
  deal.step = 10;
  deal.epoch = 1;
  deal.read_again = 4;
  deal.pieces = {{1, 0, 0}, {3, 120, 4}};
  absl::StatusOr<InputDeal> back = InputDeal::FromString(deal.ToString(), "d");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToString(), deal.ToString());
  const std::string text = deal.ToString();
  for (size_t cut = 0; cut < text.size(); ++cut) {
    absl::StatusOr<InputDeal> part = InputDeal::FromString(text.substr(0, cut), "deal.txt");
    if (part.ok()) continue;  // a cut between pieces
    EXPECT_TRUE(absl::IsDataLoss(part.status())) << part.status();
    EXPECT_NE(part.status().message().find("deal.txt: line"), std::string::npos);
  }
  EXPECT_FALSE(InputDeal::FromString(absl::StrCat(text, "1 x 2\n"), "d").ok());
  EXPECT_FALSE(InputDeal::FromString("pstrain input deal v1\nbase=1\n", "d").ok());
}

}  // namespace
}  // namespace pstrain
