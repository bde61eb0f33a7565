// Tests of the sparse input side: feature hashing, binary metrics, the Criteo
// TSV reader and writer, and the synthetic click dataset.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/env.h"
#include "data/binary_metrics.h"
#include "data/feature_hash.h"
#include "data/formats/criteo.h"
#include "data/synthetic/synthetic_ctr.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

// --- feature_hash -----------------------------------------------------------

TEST(FeatureHashTest, MatchesTensorFlowsDocumentedExample) {
  // TensorFlow's API documentation of tf.strings.to_hash_bucket_fast:
  //   tf.strings.to_hash_bucket_fast(["Hello", "TensorFlow", "2.x"], 3)
  //   -> [0, 2, 2]
  // ([2, 0, 1] is the example of tf.strings.to_hash_bucket, the deprecated op
  // with another hash that "may change from time to time".)
  EXPECT_EQ(HashBucketFast("Hello", 3), 0);
  EXPECT_EQ(HashBucketFast("TensorFlow", 3), 2);
  EXPECT_EQ(HashBucketFast("2.x", 3), 2);
}

TEST(FeatureHashTest, IsTheUnsignedFingerprintModuloBuckets) {
  for (const char* s : {"", "a", "user_17", "Hello"}) {
    const uint64_t fp = Fingerprint64(s);
    EXPECT_EQ(HashBucketFast(s, 1000003), static_cast<int64_t>(fp % 1000003)) << s;
    EXPECT_EQ(HashBucketFast(s, 1), 0);
    // The largest bucket count: the modulo is unsigned, never negative.
    const int64_t big = INT64_MAX;
    EXPECT_EQ(HashBucketFast(s, big), static_cast<int64_t>(fp % static_cast<uint64_t>(big)));
    EXPECT_GE(HashBucketFast(s, big), 0);
  }
}

// The numbers TensorFlow's sparse_cross_op_test.py (python/kernel_tests)
// expects of tf.sparse.cross_hashed over one string value in each of three
// features with num_buckets 0 (h mod 2^63 - 1): with the default hash_key, and
// with hash_key _DEFAULT_HASH_KEY + 1.
TEST(FeatureHashTest, CrossesMatchTensorFlowsSparseCrossTest) {
  const uint64_t values[] = {Fingerprint64("batch1-FC1-F1"), Fingerprint64("batch1-FC2-F1"),
                             Fingerprint64("batch1-FC3-F1")};
  constexpr uint64_t kInt64Max = 0x7fffffffffffffff;
  EXPECT_EQ(CrossFingerprint(values, 3) % kInt64Max, 1971693436396284976u);
  uint64_t h = kCrossHashKey + 1;
  for (uint64_t v : values) h = FingerprintCat64(h, v);
  EXPECT_EQ(h % kInt64Max, 4847552627144134031u);
  // The order matters; one value alone is still combined with the key.
  const uint64_t swapped[] = {values[1], values[0], values[2]};
  EXPECT_NE(CrossFingerprint(swapped, 3), CrossFingerprint(values, 3));
  EXPECT_EQ(CrossFingerprint(values, 1), FingerprintCat64(kCrossHashKey, values[0]));
}

TEST(FeatureHashTest, IntegerIdsHashTheirDecimalString) {
  EXPECT_EQ(HashBucketFastInt64(17, 100), HashBucketFast("17", 100));
  EXPECT_EQ(HashBucketFastInt64(0, 100), HashBucketFast("0", 100));
  EXPECT_EQ(HashBucketFastInt64(-3, 1 << 20), HashBucketFast("-3", 1 << 20));
  EXPECT_EQ(HashBucketFastInt64(INT64_MIN, 977), HashBucketFast("-9223372036854775808", 977));
}

// --- binary_metrics -----------------------------------------------------------

TEST(BinaryMetricsTest, AucOfHandWorkedExamples) {
  // sklearn's roc_auc_score documentation example: 3 of 4 pairs ordered.
  const std::vector<float> labels = {0, 0, 1, 1};
  EXPECT_DOUBLE_EQ(*BinaryAuc(std::vector<double>{0.1, 0.4, 0.35, 0.8}, labels), 0.75);
  EXPECT_DOUBLE_EQ(*BinaryAuc(std::vector<double>{0.1, 0.2, 0.3, 0.4}, labels), 1.0);
  EXPECT_DOUBLE_EQ(*BinaryAuc(std::vector<double>{0.4, 0.3, 0.2, 0.1}, labels), 0.0);
  // Float scores take the same path.
  EXPECT_DOUBLE_EQ(*BinaryAuc(std::vector<float>{0.1f, 0.4f, 0.35f, 0.8f}, labels), 0.75);
}

TEST(BinaryMetricsTest, PrCurveCountsAtOrAboveEachThreshold) {
  // Thresholds 0, 0.5, 1: buckets floor(p * 2) = 0, 0, 1, 1 (and 2 for p = 1).
  const std::vector<float> p = {0.1f, 0.4f, 0.6f, 0.9f, 1.0f};
  const std::vector<float> labels = {0, 1, 0, 1, 1};
  absl::StatusOr<std::vector<float>> curve = PrCurve(p, labels, 3);
  ASSERT_TRUE(curve.ok()) << curve.status();
  ASSERT_EQ(curve->size(), 18u);
  const std::vector<float> want = {3,    2,        1,          // true positives: p >= 0, 0.5, 1
                                   2,    1,        0,          // false positives
                                   0,    1,        2,          // true negatives
                                   0,    1,        2,          // false negatives
                                   0.6f, 2 / 3.0f, 1,          // precision
                                   1,    2 / 3.0f, 1 / 3.0f};  // recall
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ((*curve)[i], want[i]) << i;
  // Nothing at or above a threshold: precision 0, not NaN.
  curve = PrCurve(std::vector<float>{0.2f, 0.3f}, std::vector<float>{1, 0}, 3);
  ASSERT_TRUE(curve.ok());
  EXPECT_EQ((*curve)[4 * 3 + 2], 0.0f);
  EXPECT_TRUE(absl::IsInvalidArgument(PrCurve(p, labels, 1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      PrCurve(std::vector<float>{1.5f}, std::vector<float>{1}, 3).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      PrCurve(std::vector<float>{0.5f}, std::vector<float>{2}, 3).status()));
}

TEST(BinaryMetricsTest, AucCountsTiesAsHalf) {
  // Three tied at 0.5 (one positive, two negatives), a positive at 0.9.
  // Pairs: (0.5+, 0.5-) x2 = 1/2 each, (0.9+, 0.5-) x2 = 1 each: 3 / 4.
  EXPECT_DOUBLE_EQ(
      *BinaryAuc(std::vector<double>{0.5, 0.5, 0.5, 0.9}, std::vector<float>{0, 1, 0, 1}), 0.75);
  // Everything tied: no information, 1/2.
  EXPECT_DOUBLE_EQ(
      *BinaryAuc(std::vector<double>{2, 2, 2, 2, 2}, std::vector<float>{1, 0, 0, 1, 0}), 0.5);
  // A tie across classes at the top: pos 3, pos 1 tied with neg 1, neg 0.
  // Pairs: (3,1-)=1, (3,0)=1, (1+,1-)=1/2, (1+,0)=1: 3.5 / 4.
  EXPECT_DOUBLE_EQ(*BinaryAuc(std::vector<double>{3, 1, 1, 0}, std::vector<float>{1, 1, 0, 0}),
                   0.875);
}

TEST(BinaryMetricsTest, AucRefusesWhatItCannotDefine) {
  EXPECT_THAT(BinaryAuc(std::vector<double>{0.1, 0.2}, std::vector<float>{1, 1}).status().message(),
              HasSubstr("only one class"));
  EXPECT_THAT(BinaryAuc(std::vector<double>{0.1}, std::vector<float>{1, 0}).status().message(),
              HasSubstr("1 predictions but 2 labels"));
  EXPECT_THAT(BinaryAuc(std::vector<double>{0.1, 0.2}, std::vector<float>{1, 2}).status().message(),
              HasSubstr("label 2 at index 1 is not 0 or 1"));
  EXPECT_THAT(BinaryAuc(std::vector<double>{0.1, NAN}, std::vector<float>{1, 0}).status().message(),
              HasSubstr("NaN"));
  EXPECT_FALSE(BinaryAuc(std::vector<double>{}, std::vector<float>{}).ok());
}

TEST(BinaryMetricsTest, LogLossOfHandWorkedExamples) {
  // -(ln 0.9 + ln 0.8) / 2
  EXPECT_NEAR(*MeanLogLoss(std::vector<double>{0.9, 0.2}, std::vector<float>{1, 0}),
              (0.10536051565782628 + 0.2231435513142097) / 2, 1e-12);
  // A certain mistake is clipped at epsilon: -ln(1e-7).
  EXPECT_NEAR(*MeanLogLoss(std::vector<double>{0.0}, std::vector<float>{1}), 16.11809565095832,
              1e-6);
  // A certain right answer costs nothing with epsilon 0.
  EXPECT_DOUBLE_EQ(*MeanLogLoss(std::vector<double>{1.0, 0.0}, std::vector<float>{1, 0}, 0.0), 0);
  // Base rate 1/4: the entropy -(1/4 ln 1/4 + 3/4 ln 3/4).
  EXPECT_NEAR(*BaseRateLogLoss(std::vector<float>{1, 0, 0, 0}), 0.5623351446188083, 1e-12);
  EXPECT_THAT(MeanLogLoss(std::vector<double>{1.5}, std::vector<float>{1}).status().message(),
              HasSubstr("probability 1.5 at index 0 is outside [0, 1]"));
  EXPECT_FALSE(MeanLogLoss(std::vector<double>{0.5}, std::vector<float>{-1}).ok());
  EXPECT_FALSE(BaseRateLogLoss(std::vector<float>{}).ok());
}

// --- criteo -------------------------------------------------------------------

// A line of the format from its parts: 13 dense and 26 categorical strings.
std::string Line(const std::string& label, std::vector<std::string> dense,
                 std::vector<std::string> categorical) {
  dense.resize(kCriteoNumDense);
  categorical.resize(kCriteoNumCategorical);
  return absl::StrCat(label, "\t", absl::StrJoin(dense, "\t"), "\t",
                      absl::StrJoin(categorical, "\t"));
}

std::string FullLine(const std::string& label) {
  std::vector<std::string> dense, categorical;
  for (int i = 0; i < kCriteoNumDense; ++i) dense.push_back(absl::StrCat(i * 10));
  for (int i = 0; i < kCriteoNumCategorical; ++i)
    categorical.push_back(absl::StrCat("68fd1e6", i % 10));
  return Line(label, dense, categorical);
}

absl::Status ParseOne(const std::string& line) {
  CriteoBatch batch;
  return ParseCriteoLine(line, &batch);
}

TEST(CriteoTest, ParsesAFullLine) {
  CriteoBatch batch;
  ASSERT_TRUE(ParseCriteoLine(FullLine("1"), &batch).ok());
  ASSERT_EQ(batch.size(), 1);
  EXPECT_EQ(batch.labels[0], 1.0f);
  EXPECT_EQ(batch.dense[12], 120);
  EXPECT_EQ(batch.dense_present[12], 1);
  EXPECT_EQ(batch.categorical[0], 0x68fd1e60u);
  EXPECT_EQ(batch.categorical[25], 0x68fd1e65u);
}

TEST(CriteoTest, EmptyFieldsAreMissing) {
  // The first line of Criteo's Kaggle train.txt has this shape: some empty
  // integer and categorical fields, a negative I2 elsewhere in the data.
  CriteoBatch batch;
  ASSERT_TRUE(
      ParseCriteoLine(Line("0", {"1", "-1", "", "0"}, {"05db9164", "", "ABCDEF09"}), &batch).ok());
  EXPECT_EQ(batch.labels[0], 0.0f);
  EXPECT_EQ(batch.dense[1], -1);
  EXPECT_EQ(batch.dense_present[2], 0);
  EXPECT_EQ(batch.dense[2], 0);
  EXPECT_EQ(batch.dense_present[3], 1);
  EXPECT_EQ(batch.categorical[0], 0x05db9164u);
  EXPECT_EQ(batch.categorical[1], kCriteoMissingId);
  EXPECT_EQ(batch.categorical[2], 0xabcdef09u);
  const std::vector<float> x = CriteoDenseLog1p(batch);
  EXPECT_FLOAT_EQ(x[0], std::log(2.0f));
  EXPECT_EQ(x[1], 0.0f);  // negative: clamped
  EXPECT_EQ(x[2], 0.0f);  // missing
  EXPECT_EQ(x[3], 0.0f);  // log(1 + 0)
}

TEST(CriteoTest, BadLinesSayWhichFieldAndWhy) {
  EXPECT_THAT(ParseOne("0\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11").message(),
              HasSubstr("12 tab-separated fields, expected 40"));
  EXPECT_THAT(ParseOne(FullLine("1") + "\t").message(), HasSubstr("41 tab-separated fields"));
  EXPECT_THAT(ParseOne("").message(), HasSubstr("1 tab-separated fields"));
  EXPECT_THAT(ParseOne(Line("1", {"", "", "12x"}, {})).message(),
              HasSubstr("field 4 (I3) \"12x\": not a decimal integer"));
  EXPECT_THAT(ParseOne(Line("1", {"+5"}, {})).message(), HasSubstr("field 2 (I1)"));
  EXPECT_THAT(ParseOne(Line("1", {"-"}, {})).message(), HasSubstr("field 2 (I1)"));
  EXPECT_THAT(ParseOne(Line("1", {"1234567890123456789"}, {})).message(),
              HasSubstr("at most 18 digits"));
  EXPECT_THAT(ParseOne(Line("1", {}, {"", "68fd1e6"})).message(),
              HasSubstr("field 16 (C2) \"68fd1e6\": not 8 hexadecimal digits"));
  EXPECT_THAT(ParseOne(Line("1", {}, {"68fd1e6g"})).message(), HasSubstr("field 15 (C1)"));
  EXPECT_THAT(ParseOne(Line("1", {}, {"068fd1e60"})).message(), HasSubstr("(C1)"));
  EXPECT_THAT(ParseOne(Line("2", {}, {})).message(),
              HasSubstr("field 1 (label) \"2\": the label must be 0 or 1"));
  EXPECT_THAT(ParseOne(Line("", {}, {})).message(), HasSubstr("(label)"));
  EXPECT_THAT(ParseOne(Line("1", {std::string(5000, '1')}, {})).message(),
              HasSubstr("bytes is longer than the limit of 4096"));
  // Control bytes are escaped in messages.
  EXPECT_THAT(ParseOne(Line("1", {}, {std::string("ab\x01") + "cdefg"})).message(),
              HasSubstr("ab\\001cdefg"));
}

TEST(CriteoTest, ReaderStreamsBatchesAndNamesFileAndLine) {
  MemEnv env;
  std::string text;
  for (int i = 0; i < 5; ++i) absl::StrAppend(&text, FullLine(i % 2 ? "1" : "0"), "\n");
  ASSERT_TRUE(env.WriteFileAtomic("/d/day_0", text).ok());
  absl::StatusOr<std::unique_ptr<CriteoReader>> reader = CriteoReader::Open(&env, "/d/day_0");
  ASSERT_TRUE(reader.ok());
  CriteoBatch batch;
  std::vector<int64_t> sizes;
  absl::Status s;
  while ((s = (*reader)->ReadBatch(2, &batch)).ok()) sizes.push_back(batch.size());
  EXPECT_THAT(sizes, ::testing::ElementsAre(2, 2, 1));
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  EXPECT_TRUE(absl::IsOutOfRange((*reader)->ReadBatch(2, &batch)));
  EXPECT_EQ(batch.size(), 0);

  // A bad third line: the first two come back, then the error names it.
  std::string bad = FullLine("0") + "\n" + FullLine("1") + "\r\n" +
                    Line("1", {"", "", "oops"}, {}) + "\n" + FullLine("0") + "\n";
  ASSERT_TRUE(env.WriteFileAtomic("/d/bad", bad).ok());
  reader = CriteoReader::Open(&env, "/d/bad");
  ASSERT_TRUE(reader.ok());
  s = (*reader)->ReadBatch(10, &batch);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("/d/bad:3: field 4 (I3) \"oops\""));
  EXPECT_EQ(batch.size(), 2);
  EXPECT_EQ((*reader)->ReadBatch(10, &batch), s);  // stays at the bad line

  EXPECT_TRUE(absl::IsNotFound(CriteoReader::Open(&env, "/d/none").status()));
  EXPECT_TRUE(absl::IsInvalidArgument((*reader)->ReadBatch(0, &batch)));
}

TEST(CriteoTest, LastLineWithoutNewlineIsAcceptedWhole) {
  MemEnv env;
  ASSERT_TRUE(env.WriteFileAtomic("/d/f", FullLine("0") + "\n" + FullLine("1")).ok());
  absl::StatusOr<CriteoBatch> all = ReadCriteoFile(&env, "/d/f");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 2);
  EXPECT_EQ(all->labels[1], 1.0f);
}

TEST(CriteoTest, ATruncatedFileIsDataLossAtEveryCut) {
  MemEnv env;
  const std::string text = FullLine("0") + "\n" + FullLine("1") + "\n";
  const size_t second = FullLine("0").size() + 1;
  // Cutting inside the second line loses data, and the reader says so,
  // except at one cut the format cannot tell from a whole line: right after
  // the last tab, which reads as an empty (missing) C26.
  const size_t after_last_tab = text.size() - 1 - kCriteoHexDigits;
  ASSERT_TRUE(env.WriteFileAtomic("/d/cut", text.substr(0, after_last_tab)).ok());
  absl::StatusOr<CriteoBatch> undetectable = ReadCriteoFile(&env, "/d/cut");
  ASSERT_TRUE(undetectable.ok()) << undetectable.status();
  EXPECT_EQ(undetectable->categorical.back(), kCriteoMissingId);
  for (size_t cut = second + 1; cut < text.size() - 1; ++cut) {
    if (cut == after_last_tab) continue;
    ASSERT_TRUE(env.WriteFileAtomic("/d/cut", text.substr(0, cut)).ok());
    absl::StatusOr<CriteoBatch> all = ReadCriteoFile(&env, "/d/cut");
    ASSERT_FALSE(all.ok()) << "cut at " << cut;
    EXPECT_TRUE(absl::IsDataLoss(all.status())) << all.status();
    EXPECT_THAT(all.status().message(), HasSubstr("/d/cut:2: "));
    EXPECT_THAT(all.status().message(), HasSubstr("truncated file?"));
  }
}

TEST(CriteoTest, AFileWithoutNewlinesIsRefusedEarly) {
  MemEnv env;
  ASSERT_TRUE(env.WriteFileAtomic("/d/blob", std::string(1 << 20, 'x')).ok());
  absl::StatusOr<CriteoBatch> all = ReadCriteoFile(&env, "/d/blob");
  EXPECT_TRUE(absl::IsInvalidArgument(all.status())) << all.status();
  EXPECT_THAT(all.status().message(), HasSubstr("/d/blob:1: no end of line within 4096 bytes"));
}

TEST(CriteoTest, CorruptBytesGiveAnErrorOrTheSameRowCount) {
  SyntheticCtrConfig config;
  config.vocabulary = {50};
  absl::StatusOr<SyntheticCtr> generator = SyntheticCtr::Create(config);
  ASSERT_TRUE(generator.ok());
  const CriteoBatch batch = generator->Generate(3, 7);
  std::string text;
  for (int64_t i = 0; i < batch.size(); ++i) AppendCriteoLine(batch, i, &text);
  MemEnv env;
  int errors = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    for (char c : {'\0', '\t', '\n', 'z', '7', '-'}) {
      if (text[i] == c) continue;
      std::string corrupt = text;
      corrupt[i] = c;
      ASSERT_TRUE(env.WriteFileAtomic("/d/c", corrupt).ok());
      absl::StatusOr<CriteoBatch> all = ReadCriteoFile(&env, "/d/c");
      if (all.ok()) {
        // Only a changed digit can go unnoticed: rows stay whole.
        EXPECT_EQ(all->size(), 3) << "byte " << i << " -> " << int{c};
      } else {
        ++errors;
        EXPECT_THAT(all.status().message(), HasSubstr("/d/c:")) << all.status();
      }
    }
  }
  EXPECT_GT(errors, 0);
}

// --- synthetic_ctr --------------------------------------------------------------

std::string Tsv(const CriteoBatch& batch) {
  std::string text;
  for (int64_t i = 0; i < batch.size(); ++i) AppendCriteoLine(batch, i, &text);
  return text;
}

TEST(SyntheticCtrTest, SameSeedSameBytesOtherSeedOtherBytes) {
  SyntheticCtrConfig config;
  absl::StatusOr<SyntheticCtr> a = SyntheticCtr::Create(config);
  absl::StatusOr<SyntheticCtr> b = SyntheticCtr::Create(config);
  config.seed = 2;
  absl::StatusOr<SyntheticCtr> c = SyntheticCtr::Create(config);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  MemEnv env;
  ASSERT_TRUE(a->WriteTsv(&env, "/s/a.tsv", 2000, kSyntheticTrainStream).ok());
  ASSERT_TRUE(b->WriteTsv(&env, "/s/b.tsv", 2000, kSyntheticTrainStream).ok());
  ASSERT_TRUE(c->WriteTsv(&env, "/s/c.tsv", 2000, kSyntheticTrainStream).ok());
  ASSERT_TRUE(a->WriteTsv(&env, "/s/test.tsv", 2000, kSyntheticTestStream).ok());
  const std::string bytes = *env.ReadFile("/s/a.tsv");
  EXPECT_EQ(bytes, *env.ReadFile("/s/b.tsv"));
  EXPECT_NE(bytes, *env.ReadFile("/s/c.tsv"));
  EXPECT_NE(bytes, *env.ReadFile("/s/test.tsv"));
  EXPECT_EQ(env.ListDir("/s")->size(), 4u);  // no temp file left

  // A stream read in pieces gives the same examples as in one call.
  SyntheticCtr::Stream stream = a->NewStream(kSyntheticTrainStream);
  CriteoBatch piece;
  std::string pieces;
  for (int n : {1, 999, 1000}) {
    stream.Next(n, &piece);
    pieces += Tsv(piece);
  }
  EXPECT_EQ(pieces, bytes);
}

TEST(SyntheticCtrTest, IdsFollowZipf) {
  SyntheticCtrConfig config;
  config.num_categorical = 2;
  config.num_dense = 0;
  config.vocabulary = {1000, 10};
  config.zipf_exponent = {1.1, 0.0};
  absl::StatusOr<SyntheticCtr> generator = SyntheticCtr::Create(config);
  ASSERT_TRUE(generator.ok()) << generator.status();
  // Theory: P(id 1) = 1 / H(1000, 1.1), H the generalized harmonic number.
  double h = 0;
  for (int r = 1; r <= 1000; ++r) h += std::pow(r, -1.1);
  const double p1 = 1 / h;  // ~0.178
  EXPECT_NEAR(generator->IdProbability(0, 1), p1, 1e-12);
  EXPECT_NEAR(generator->IdProbability(0, 2), p1 * std::pow(2, -1.1), 1e-12);

  const int64_t n = 200000;
  const CriteoBatch batch = generator->Generate(n, 0);
  std::vector<int64_t> count0(1001), count1(11);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t id0 = batch.categorical[i * kCriteoNumCategorical];
    const uint32_t id1 = batch.categorical[i * kCriteoNumCategorical + 1];
    ASSERT_TRUE(id0 >= 1 && id0 <= 1000) << id0;
    ASSERT_TRUE(id1 >= 1 && id1 <= 10) << id1;
    ++count0[id0];
    ++count1[id1];
    EXPECT_EQ(batch.categorical[i * kCriteoNumCategorical + 2], kCriteoMissingId);
    EXPECT_EQ(batch.dense_present[i * kCriteoNumDense], 0);
  }
  // Within 5 binomial standard deviations (~0.004 here).
  const double sd = std::sqrt(p1 * (1 - p1) / n);
  EXPECT_NEAR(static_cast<double>(count0[1]) / n, p1, 5 * sd);
  EXPECT_NEAR(static_cast<double>(count0[2]) / count0[1], std::pow(2, -1.1), 0.03);
  // Exponent 0 is uniform over the 10 ids.
  for (int id = 1; id <= 10; ++id) EXPECT_NEAR(static_cast<double>(count1[id]) / n, 0.1, 0.004);
}

TEST(SyntheticCtrTest, PlantedModelIsInformativeAndKnown) {
  absl::StatusOr<SyntheticCtr> generator = SyntheticCtr::Create(SyntheticCtrConfig());
  ASSERT_TRUE(generator.ok());
  const CriteoBatch test = generator->Generate(50000, kSyntheticTestStream);
  absl::StatusOr<PlantedModelQuality> q = generator->Evaluate(test);
  ASSERT_TRUE(q.ok()) << q.status();
  std::printf(
      "planted model on %lld test examples: AUC %.4f, log loss %.4f, base rate %.4f "
      "(its log loss %.4f)\n",
      static_cast<long long>(q->examples), q->auc, q->log_loss, q->base_rate,
      q->base_rate_log_loss);
  EXPECT_GT(q->auc, 0.7);
  EXPECT_LT(q->log_loss, q->base_rate_log_loss - 0.05);
  EXPECT_GT(q->base_rate, 0.1);
  EXPECT_LT(q->base_rate, 0.5);
  // The dense features are Criteo-like counts whose log1p is ~N(3, 1).
  double mean = 0;
  const std::vector<float> x = CriteoDenseLog1p(test);
  for (float v : x) mean += v;
  EXPECT_NEAR(mean / static_cast<double>(x.size()), kSyntheticDenseOffset, 0.02);
}

// A drifting stream: at each shard about the drift's fraction of the ids
// draw new weights; the model of shard 0 predicts later shards worse, while
// each shard's own planted model stays as good.
TEST(SyntheticCtrTest, DriftChangesAFractionOfTheIdsAtEachShard) {
  SyntheticCtrConfig config;
  config.num_categorical = 4;
  config.vocabulary = {2000};
  absl::StatusOr<SyntheticCtr> generator = SyntheticCtr::Create(config);
  ASSERT_TRUE(generator.ok());
  SyntheticCtr first = *generator;
  SyntheticCtr later = *generator;
  later.SetDrift(0.1, 1);
  int changed = 0;
  for (uint32_t id = 1; id <= 2000; ++id) changed += later.IdWeight(2, id) != first.IdWeight(2, id);
  EXPECT_NEAR(changed, 200, 45);
  // Shard 3 keeps what changed at shard 1 unless it changed again.
  SyntheticCtr third = *generator;
  third.SetDrift(0.1, 3);
  int kept = 0;
  for (uint32_t id = 1; id <= 2000; ++id) {
    kept += third.IdWeight(2, id) == later.IdWeight(2, id) &&
            later.IdWeight(2, id) != first.IdWeight(2, id);
  }
  EXPECT_GT(kept, 120);
  // Drift 0, or shard 0: the weights without drift.
  later.SetDrift(0, 5);
  EXPECT_EQ(later.IdWeight(1, 7), first.IdWeight(1, 7));
  SyntheticCtr tenth = *generator;
  tenth.SetDrift(0.2, 10);
  const CriteoBatch batch = tenth.Generate(20000, 1010);
  absl::StatusOr<PlantedModelQuality> own = tenth.Evaluate(batch);
  absl::StatusOr<PlantedModelQuality> stale = first.Evaluate(batch);
  ASSERT_TRUE(own.ok() && stale.ok());
  std::printf("shard 10 at drift 0.2: planted AUC %.4f, the first shard's model %.4f\n", own->auc,
              stale->auc);
  absl::StatusOr<PlantedModelQuality> start = first.Evaluate(first.Generate(20000, 1000));
  ASSERT_TRUE(start.ok());
  EXPECT_NEAR(own->auc, start->auc, 0.03);
  EXPECT_LT(stale->auc, own->auc - 0.03);
}

TEST(SyntheticCtrTest, EachDayHasWeightsOfItsOwnForAFractionOfTheIds) {
  SyntheticCtrConfig config;
  config.num_categorical = 4;
  config.vocabulary = {2000};
  absl::StatusOr<SyntheticCtr> generator = SyntheticCtr::Create(config);
  ASSERT_TRUE(generator.ok());
  const SyntheticCtr base = *generator;
  SyntheticCtr day3 = *generator, day4 = *generator, again = *generator;
  day3.SetDay(0.3, 3);
  day4.SetDay(0.3, 4);
  again.SetDay(0.3, 3);
  int changed3 = 0, changed4 = 0, both = 0;
  for (uint32_t id = 1; id <= 2000; ++id) {
    const bool c3 = day3.IdWeight(1, id) != base.IdWeight(1, id);
    const bool c4 = day4.IdWeight(1, id) != base.IdWeight(1, id);
    changed3 += c3;
    changed4 += c4;
    both += c3 && c4 && day3.IdWeight(1, id) == day4.IdWeight(1, id);
    EXPECT_EQ(again.IdWeight(1, id), day3.IdWeight(1, id));  // a pure function of the day
  }
  EXPECT_NEAR(changed3, 600, 80);
  EXPECT_NEAR(changed4, 600, 80);
  EXPECT_EQ(both, 0);  // a day's weights are its own: day 4 comes back to the base
  day3.SetDay(0, 3);
  EXPECT_EQ(day3.IdWeight(2, 11), base.IdWeight(2, 11));
  // A day's examples are predicted better by that day's model than by the
  // base one.
  day4.SetDay(0.5, 4);
  const CriteoBatch batch = day4.Generate(20000, 2004);
  absl::StatusOr<PlantedModelQuality> own = day4.Evaluate(batch);
  absl::StatusOr<PlantedModelQuality> shared = base.Evaluate(batch);
  ASSERT_TRUE(own.ok() && shared.ok());
  EXPECT_GT(own->auc, shared->auc + 0.01);
}

TEST(SyntheticCtrTest, RoundTripsThroughTheReader) {
  absl::StatusOr<SyntheticCtr> generator = SyntheticCtr::Create(SyntheticCtrConfig());
  ASSERT_TRUE(generator.ok());
  MemEnv env;
  ASSERT_TRUE(generator->WriteTsv(&env, "/s/train.tsv", 3000, kSyntheticTrainStream).ok());
  absl::StatusOr<CriteoBatch> read = ReadCriteoFile(&env, "/s/train.tsv");
  ASSERT_TRUE(read.ok()) << read.status();
  const CriteoBatch generated = generator->Generate(3000, kSyntheticTrainStream);
  EXPECT_EQ(read->labels, generated.labels);
  EXPECT_EQ(read->dense, generated.dense);
  EXPECT_EQ(read->dense_present, generated.dense_present);
  EXPECT_EQ(read->categorical, generated.categorical);
  for (int64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(generator->Logit(*read, i), generator->Logit(generated, i));
  }
}

TEST(SyntheticCtrTest, BadConfigsAreRefused) {
  SyntheticCtrConfig config;
  config.num_categorical = 27;
  EXPECT_THAT(SyntheticCtr::Create(config).status().message(), HasSubstr("num_categorical 27"));
  config = SyntheticCtrConfig();
  config.num_dense = -1;
  EXPECT_FALSE(SyntheticCtr::Create(config).ok());
  config = SyntheticCtrConfig();
  config.vocabulary = {10, 20};
  EXPECT_THAT(SyntheticCtr::Create(config).status().message(),
              HasSubstr("1 (for every field) or 26"));
  config = SyntheticCtrConfig();
  config.vocabulary = {0};
  EXPECT_THAT(SyntheticCtr::Create(config).status().message(),
              HasSubstr("vocabulary 0 of field C1"));
  config = SyntheticCtrConfig();
  config.zipf_exponent = {-1};
  EXPECT_FALSE(SyntheticCtr::Create(config).ok());
  config = SyntheticCtrConfig();
  config.id_weight_stddev = NAN;
  EXPECT_FALSE(SyntheticCtr::Create(config).ok());
}

}  // namespace
}  // namespace pstrain
