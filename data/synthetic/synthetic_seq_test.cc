// The synthetic click log of user histories (data/synthetic/synthetic_seq.h).
#include "data/synthetic/synthetic_seq.h"

#include <vector>

#include "data/formats/tabular_examples.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(SyntheticSeqTest, TheSameStreamGivesTheSameExamples) {
  absl::StatusOr<SyntheticSeq> seq = SyntheticSeq::Create(SyntheticSeqConfig());
  ASSERT_TRUE(seq.ok()) << seq.status();
  const std::vector<SeqExample> a = seq->Generate(200, 0), b = seq->Generate(200, 0);
  const std::vector<SeqExample> test = seq->Generate(200, 1);
  int64_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].history, b[i].history);
    EXPECT_EQ(a[i].candidate, b[i].candidate);
    EXPECT_EQ(a[i].label, b[i].label);
    differ += a[i].history != test[i].history;
    EXPECT_GE(a[i].history.size(), 1u);
    EXPECT_LE(a[i].history.size(), 30u);
  }
  EXPECT_GT(differ, 190);  // another stream, other examples
}

TEST(SyntheticSeqTest, RecentMatchesCountMostAndOldOnesHardlyAtAll) {
  SyntheticSeqConfig config;
  config.bias = 0;
  config.weight = 2;
  config.decay = 0.5;
  absl::StatusOr<SyntheticSeq> seq = SyntheticSeq::Create(config);
  ASSERT_TRUE(seq.ok()) << seq.status();
  // Items of two categories.
  int64_t same = 0, other = 0;
  for (int64_t i = 2; i <= config.items && (same == 0 || other == 0); ++i) {
    if (seq->Category(i) == seq->Category(1)) {
      if (same == 0) same = i;
    } else if (other == 0) {
      other = i;
    }
  }
  ASSERT_GT(same, 0);
  ASSERT_GT(other, 0);
  // The candidate (item 1) matches the last item: 2; the one before: 1.
  EXPECT_DOUBLE_EQ(seq->Logit({other, other, same}, 1), 2.0);
  EXPECT_DOUBLE_EQ(seq->Logit({other, same, other}, 1), 1.0);
  EXPECT_DOUBLE_EQ(seq->Logit({same, other, other}, 1), 0.5);
  EXPECT_DOUBLE_EQ(seq->Logit({same, same, same}, 1), 3.5);
  EXPECT_DOUBLE_EQ(seq->Logit({other}, 1), 0.0);
  // The same bag in another order: another logit.
  EXPECT_NE(seq->Logit({same, other}, 1), seq->Logit({other, same}, 1));
}

TEST(SyntheticSeqTest, ExamplesReadBackInOrderAndThePlantedModelPredicts) {
  absl::StatusOr<SyntheticSeq> seq = SyntheticSeq::Create(SyntheticSeqConfig());
  ASSERT_TRUE(seq.ok()) << seq.status();
  const std::vector<SeqExample> examples = seq->Generate(5000, 1);
  TabularFeatures features;
  features.sparse = {"hist", "hist_cat", "cand", "cand_cat"};
  TabularExampleParser parser(features);
  for (const SeqExample& e : examples) ASSERT_TRUE(parser.AppendRecord(seq->Encode(e), "x").ok());
  const Dataset data = parser.Take();
  ASSERT_EQ(data.size(), 5000);
  for (int64_t i = 0; i < 50; ++i) {
    const SparseFeatureColumn& hist = data.sparse[0];
    const SparseFeatureColumn& cats = data.sparse[1];
    const std::vector<int64_t>& want = examples[i].history;
    ASSERT_EQ(hist.offsets[i + 1] - hist.offsets[i], static_cast<int64_t>(want.size()));
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(static_cast<int64_t>(hist.values[hist.offsets[i] + k]), want[k]);
      EXPECT_EQ(static_cast<int64_t>(cats.values[cats.offsets[i] + k]), seq->Category(want[k]) + 1);
    }
    EXPECT_EQ(data.labels[i], examples[i].label);
  }
  absl::StatusOr<SeqQuality> q = SyntheticSeq::Evaluate(examples);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_GT(q->auc, 0.7);
  EXPECT_GT(q->base_rate, 0.2);
  EXPECT_LT(q->base_rate, 0.6);
}

TEST(SyntheticSeqTest, RefusesConfigsOutOfRange) {
  SyntheticSeqConfig c;
  c.categories = 1;
  EXPECT_FALSE(SyntheticSeq::Create(c).ok());
  c = SyntheticSeqConfig();
  c.decay = 1.5;
  EXPECT_FALSE(SyntheticSeq::Create(c).ok());
  c = SyntheticSeqConfig();
  c.max_history = 0;
  EXPECT_FALSE(SyntheticSeq::Create(c).ok());
  EXPECT_FALSE(SyntheticSeq::Evaluate({}).ok());
}

}  // namespace
}  // namespace pstrain
