// Tests of tabular data: Criteo TSV loaded as a Dataset, the checks of
// data/tabular.h, and batches of dense and sparse features.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/env.h"
#include "data/batcher.h"
#include "data/feature_hash.h"
#include "data/formats/criteo_dataset.h"
#include "data/load.h"
#include "data/tabular.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/data_test_util.h"
#include "testing/temp_dir.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kDir[] = "/data/criteo";

// A TSV line from its parts: up to 13 dense and 26 categorical fields, the
// rest empty (missing).
std::string Line(const std::string& label, std::vector<std::string> dense,
                 std::vector<std::string> categorical) {
  dense.resize(kCriteoNumDense);
  categorical.resize(kCriteoNumCategorical);
  return absl::StrCat(label, "\t", absl::StrJoin(dense, "\t"), "\t",
                      absl::StrJoin(categorical, "\t"), "\n");
}

// Four examples, written as Criteo's files are:
//  0: C2 missing, I2 missing;  1: C1 missing, a negative I2;
//  2: every field present;     3: upper-case hex, and C3 "00000000", which
//                                 the format reads as missing.
std::string FourLines() {
  std::vector<std::string> dense, categorical;
  for (int i = 0; i < kCriteoNumDense; ++i) dense.push_back(absl::StrCat(i * 10 + 1));
  for (int i = 0; i < kCriteoNumCategorical; ++i) {
    categorical.push_back(absl::StrFormat("aaaa%04x", i));
  }
  return absl::StrCat(Line("1", {"1", "", "3"}, {"68fd1e64", "", "05db9164"}),
                      Line("0", {"0", "-2"}, {"", "80e26c9b", "fb936136"}),
                      Line("0", dense, categorical),
                      Line("1", {}, {"ABCDEF09", "0b153874", "00000000"}));
}

uint64_t Fp(std::string_view s) { return Fingerprint64(s); }

// The values of example `i` in `column`.
using testutil::ValuesOf;

// Checks that `sparse` holds `columns` of `data` for `examples`, in order.
void ExpectSparseBatch(const Dataset& data, const std::vector<int>& columns,
                       const std::vector<int64_t>& examples, const SparseBatch& sparse) {
  ASSERT_EQ(sparse.features.size(), columns.size());
  for (size_t f = 0; f < columns.size(); ++f) {
    const SparseFeatureColumn& got = sparse.features[f];
    const SparseFeatureColumn& want = data.sparse[columns[f]];
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.kind, want.kind);
    ASSERT_EQ(got.examples(), static_cast<int64_t>(examples.size()));
    EXPECT_EQ(got.offsets[0], 0);
    EXPECT_EQ(got.offsets.back(), static_cast<int64_t>(got.values.size()));
    for (size_t b = 0; b < examples.size(); ++b) {
      EXPECT_EQ(ValuesOf(got, b), ValuesOf(want, examples[b])) << got.name << " example " << b;
    }
  }
}

// One batch as Next hands it out.
struct Batch {
  std::vector<float> dense;
  std::vector<float> labels;
  SparseBatch sparse;
};

Batch NextBatch(BatchIterator* it, const Dataset& data) {
  Batch batch;
  batch.dense.resize(it->batch_size() * data.num_dense);
  batch.labels.resize(it->batch_size());
  it->Next(batch.dense.data(), batch.labels.data(), &batch.sparse);
  return batch;
}

void ExpectSameBatch(const Batch& a, const Batch& b) {
  EXPECT_EQ(a.dense, b.dense);
  EXPECT_EQ(a.labels, b.labels);
  ASSERT_EQ(a.sparse.features.size(), b.sparse.features.size());
  for (size_t f = 0; f < a.sparse.features.size(); ++f) {
    EXPECT_EQ(a.sparse.features[f].name, b.sparse.features[f].name);
    EXPECT_EQ(a.sparse.features[f].offsets, b.sparse.features[f].offsets);
    EXPECT_EQ(a.sparse.features[f].values, b.sparse.features[f].values);
  }
}

std::unique_ptr<BatchIterator> MustCreate(const Dataset* data, int batch_size, bool shuffle) {
  absl::StatusOr<std::unique_ptr<BatchIterator>> it =
      BatchIterator::Create(data, batch_size, /*task=*/0, /*num_tasks=*/1, shuffle, /*seed=*/7);
  EXPECT_TRUE(it.ok()) << it.status();
  return it.ok() ? *std::move(it) : nullptr;
}

class TabularDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(env_.WriteFileAtomic(JoinPath(kDir, "train.tsv"), FourLines()).ok());
    absl::StatusOr<Dataset> data = LoadDataset(&env_, kDir, Split::kTrain);
    ASSERT_TRUE(data.ok()) << data.status();
    data_ = *std::move(data);
  }

  MemEnv env_;
  Dataset data_;
};

// --- loading ------------------------------------------------------------------

TEST_F(TabularDataTest, LoadsTsvAsTabularExamples) {
  EXPECT_TRUE(data_.tabular);
  EXPECT_EQ(data_.size(), 4);
  EXPECT_EQ(data_.num_dense, 13);
  EXPECT_EQ(data_.example_size(), 13);
  EXPECT_EQ(data_.height * data_.width * data_.channels, 0);
  EXPECT_TRUE(data_.images.empty());
  EXPECT_THAT(data_.labels, ElementsAre(1, 0, 0, 1));
  ASSERT_EQ(data_.dense.size(), 4u * 13);
  EXPECT_FLOAT_EQ(data_.dense[0], std::log(2.0f));  // log1p(1)
  EXPECT_EQ(data_.dense[1], 0.0f);                  // missing
  EXPECT_FLOAT_EQ(data_.dense[2], std::log(4.0f));  // log1p(3)
  EXPECT_EQ(data_.dense[13 + 0], 0.0f);             // log1p(0)
  EXPECT_EQ(data_.dense[13 + 1], 0.0f);             // negative: clamped
  EXPECT_FLOAT_EQ(data_.dense[2 * 13 + 12], std::log1p(121.0f));
}

TEST_F(TabularDataTest, CategoricalFieldsAreFingerprintedColumns) {
  ASSERT_EQ(data_.sparse.size(), 26u);
  for (int c = 0; c < 26; ++c) {
    EXPECT_EQ(data_.sparse[c].name, absl::StrCat("C", c + 1));
    EXPECT_EQ(data_.sparse[c].kind, SparseValueKind::kTokens);
    EXPECT_EQ(data_.sparse[c].examples(), 4);
  }
  const SparseFeatureColumn& c1 = data_.sparse[0];
  const SparseFeatureColumn& c2 = data_.sparse[1];
  const SparseFeatureColumn& c3 = data_.sparse[2];
  EXPECT_THAT(ValuesOf(c1, 0), ElementsAre(Fp("68fd1e64")));
  EXPECT_THAT(ValuesOf(c2, 0), ElementsAre());  // missing: no value
  EXPECT_THAT(ValuesOf(c3, 0), ElementsAre(Fp("05db9164")));
  EXPECT_THAT(ValuesOf(c1, 1), ElementsAre());
  EXPECT_THAT(ValuesOf(c2, 1), ElementsAre(Fp("80e26c9b")));
  EXPECT_THAT(ValuesOf(data_.sparse[4], 1), ElementsAre());
  for (int c = 0; c < 26; ++c) {
    EXPECT_THAT(ValuesOf(data_.sparse[c], 2), ElementsAre(Fp(absl::StrFormat("aaaa%04x", c))));
  }
  // The text hashed is the lower-case form AppendCriteoLine writes.
  EXPECT_THAT(ValuesOf(c1, 3), ElementsAre(Fp("abcdef09")));
  EXPECT_THAT(ValuesOf(c3, 3), ElementsAre());  // "00000000" is kCriteoMissingId
}

TEST_F(TabularDataTest, CriteoToDatasetMatchesTheLoadedFile) {
  absl::StatusOr<CriteoBatch> batch = ReadCriteoFile(&env_, JoinPath(kDir, "train.tsv"));
  ASSERT_TRUE(batch.ok()) << batch.status();
  const Dataset converted = CriteoToDataset(*batch);
  EXPECT_EQ(converted.labels, data_.labels);
  EXPECT_EQ(converted.dense, data_.dense);
  ASSERT_EQ(converted.sparse.size(), data_.sparse.size());
  for (size_t c = 0; c < converted.sparse.size(); ++c) {
    EXPECT_EQ(converted.sparse[c].offsets, data_.sparse[c].offsets);
    EXPECT_EQ(converted.sparse[c].values, data_.sparse[c].values);
  }
  // A written line reads back to the same values.
  std::string line;
  AppendCriteoLine(*batch, 3, &line);
  EXPECT_THAT(line, HasSubstr("\tabcdef09\t0b153874\t\t"));
}

TEST(TabularLoadTest, TestSplitIsTestTsvOrEvalTsv) {
  MemEnv env;
  ASSERT_TRUE(env.WriteFileAtomic("/d/eval.tsv", FourLines()).ok());
  absl::StatusOr<Dataset> eval = LoadDataset(&env, "/d", Split::kTest);
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_EQ(eval->size(), 4);
  ASSERT_TRUE(env.WriteFileAtomic("/d/test.tsv", Line("1", {}, {}) + Line("0", {}, {})).ok());
  absl::StatusOr<Dataset> test = LoadDataset(&env, "/d", Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->size(), 2);  // test.tsv first
  absl::Status train = LoadDataset(&env, "/d", Split::kTrain).status();
  EXPECT_TRUE(absl::IsNotFound(train)) << train;
  EXPECT_THAT(train.message(), HasSubstr("nor Criteo TSV (train.tsv)"));
  absl::Status none = LoadDataset(&env, "/none", Split::kTest).status();
  EXPECT_THAT(none.message(), HasSubstr("nor Criteo TSV (test.tsv or eval.tsv)"));
}

TEST(TabularLoadTest, LoadsFromADirectoryOnDisk) {
  Env* env = Env::Default();
  const std::string dir = testing_util::TempDirRemovedAtExit("tabular_data_test_on_disk");
  ASSERT_TRUE(env->CreateDirs(dir).ok());
  ASSERT_TRUE(env->WriteFileAtomic(JoinPath(dir, "train.tsv"), FourLines()).ok());
  absl::StatusOr<Dataset> data = LoadDataset(env, dir, Split::kTrain);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->size(), 4);
  EXPECT_TRUE(data->tabular);
  EXPECT_TRUE(env->DeleteFile(JoinPath(dir, "train.tsv")).ok());
}

TEST(TabularLoadTest, ACorruptOrTruncatedFileNamesFileAndLine) {
  MemEnv env;
  const std::string good = Line("1", {"1"}, {"68fd1e64"});
  ASSERT_TRUE(env.WriteFileAtomic("/d/test.tsv", good + Line("1", {"", "x"}, {}) + good).ok());
  absl::Status corrupt = LoadDataset(&env, "/d", Split::kTest).status();
  EXPECT_TRUE(absl::IsInvalidArgument(corrupt)) << corrupt;
  EXPECT_THAT(corrupt.message(), HasSubstr("/d/test.tsv:2: field 3 (I2) \"x\""));

  const std::string two = good + good;
  ASSERT_TRUE(env.WriteFileAtomic("/d/test.tsv", two.substr(0, two.size() - 5)).ok());
  absl::Status truncated = LoadDataset(&env, "/d", Split::kTest).status();
  EXPECT_TRUE(absl::IsDataLoss(truncated)) << truncated;
  EXPECT_THAT(truncated.message(), HasSubstr("/d/test.tsv:2: "));
  EXPECT_THAT(truncated.message(), HasSubstr("truncated file?"));
}

// --- checks -------------------------------------------------------------------

TEST_F(TabularDataTest, SelectSparseFeaturesFindsColumnsOrSaysWhatThereIs) {
  absl::StatusOr<std::vector<int>> columns = SelectSparseFeatures(data_, {"C3", "C1"}, kDir);
  ASSERT_TRUE(columns.ok()) << columns.status();
  EXPECT_THAT(*columns, ElementsAre(2, 0));
  EXPECT_THAT(*SelectSparseFeatures(data_, {}, kDir), ElementsAre());

  absl::Status missing = SelectSparseFeatures(data_, {"C1", "C27"}, kDir).status();
  EXPECT_TRUE(absl::IsInvalidArgument(missing)) << missing;
  EXPECT_THAT(missing.message(), HasSubstr("sparse feature \"C27\" is not in the examples of "
                                           "/data/criteo; their sparse features are: C1, C2, "));
  EXPECT_THAT(missing.message(), HasSubstr("C25, C26."));

  Dataset wide = data_;
  for (int i = 27; i <= 40; ++i) {
    wide.sparse.emplace_back().name = absl::StrCat("C", i);
  }
  missing = SelectSparseFeatures(wide, {"user"}, "/wide").status();
  EXPECT_THAT(missing.message(), HasSubstr("C29, C30 and 10 more."));
  EXPECT_THAT(missing.message(), ::testing::Not(HasSubstr("C31")));

  const Dataset images = testutil::MakeDataset(2, 28, 28, 1);
  EXPECT_THAT(SelectSparseFeatures(images, {"C1"}, "/mnist").status().message(),
              HasSubstr("their sparse features are: none"));
}

TEST_F(TabularDataTest, ShapeChecksTellImagesFromTabularData) {
  EXPECT_TRUE(CheckTabularShape(data_, 13, "dlrm", kDir).ok());
  absl::Status other = CheckTabularShape(data_, 12, "dlrm", kDir);
  EXPECT_TRUE(absl::IsInvalidArgument(other)) << other;
  EXPECT_THAT(other.message(), HasSubstr("model dlrm takes tabular examples with 12 dense "
                                         "features, but /data/criteo holds tabular examples "
                                         "with 13 dense features"));

  const Dataset images = testutil::MakeDataset(2, 28, 28, 1);
  absl::Status not_tabular = CheckTabularShape(images, 13, "dlrm", "/mnist");
  EXPECT_TRUE(absl::IsInvalidArgument(not_tabular)) << not_tabular;
  EXPECT_THAT(not_tabular.message(), HasSubstr("model dlrm takes tabular examples with 13 dense "
                                               "features, but /mnist holds 28x28x1 images"));

  EXPECT_TRUE(CheckExampleShape(images, 28, 28, 1, "mnist_cnn", "/mnist").ok());
  absl::Status not_images = CheckExampleShape(data_, 28, 28, 1, "mnist_cnn", kDir);
  EXPECT_TRUE(absl::IsInvalidArgument(not_images)) << not_images;
  EXPECT_THAT(not_images.message(),
              HasSubstr("model mnist_cnn takes 28x28x1 images, but /data/criteo holds tabular "
                        "examples (13 dense and 26 sparse features"));
}

// --- batches ------------------------------------------------------------------

TEST_F(TabularDataTest, NextHandsOutDenseLabelsAndSelectedColumns) {
  auto it = MustCreate(&data_, 3, /*shuffle=*/false);
  ASSERT_NE(it, nullptr);
  it->SetSparseFeatures({2, 0});  // C3, C1: reversed
  Batch first = NextBatch(it.get(), data_);
  EXPECT_EQ(first.dense, std::vector<float>(data_.dense.begin(), data_.dense.begin() + 3 * 13));
  EXPECT_THAT(first.labels, ElementsAre(1, 0, 0));
  ExpectSparseBatch(data_, {2, 0}, {0, 1, 2}, first.sparse);
  ASSERT_EQ(first.sparse.features.size(), 2u);
  EXPECT_THAT(first.sparse.features[0].offsets, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(first.sparse.features[0].values,
              ElementsAre(Fp("05db9164"), Fp("fb936136"), Fp("aaaa0002")));
  EXPECT_THAT(first.sparse.features[1].offsets, ElementsAre(0, 1, 1, 2));
  EXPECT_THAT(first.sparse.features[1].values, ElementsAre(Fp("68fd1e64"), Fp("aaaa0000")));

  // Across the end of the epoch: examples 3, 0, 1, offsets rebased to 0.
  Batch second = NextBatch(it.get(), data_);
  EXPECT_THAT(second.labels, ElementsAre(1, 1, 0));
  ExpectSparseBatch(data_, {2, 0}, {3, 0, 1}, second.sparse);
  EXPECT_THAT(second.sparse.features[0].offsets, ElementsAre(0, 0, 1, 2));
  EXPECT_THAT(second.sparse.features[1].offsets, ElementsAre(0, 1, 2, 2));
  EXPECT_EQ(it->epoch(), 1);
}

TEST_F(TabularDataTest, NextWithoutSparseFillsDenseAndLabels) {
  auto it = MustCreate(&data_, 2, /*shuffle=*/false);
  ASSERT_NE(it, nullptr);
  it->SetSparseFeatures({1});
  std::vector<float> dense(2 * 13);
  std::vector<float> labels(2);
  it->Next(dense.data(), labels.data());
  EXPECT_EQ(dense, std::vector<float>(data_.dense.begin(), data_.dense.begin() + 2 * 13));
  EXPECT_THAT(labels, ElementsAre(1, 0));
  SparseBatch sparse;
  it->Next(dense.data(), labels.data(), &sparse);
  ExpectSparseBatch(data_, {1}, {2, 3}, sparse);
}

TEST_F(TabularDataTest, NoSparseFeaturesSelectedGivesAnEmptySparseBatch) {
  auto it = MustCreate(&data_, 2, /*shuffle=*/false);
  ASSERT_NE(it, nullptr);
  Batch batch = NextBatch(it.get(), data_);
  EXPECT_TRUE(batch.sparse.features.empty());
  EXPECT_THAT(batch.labels, ElementsAre(1, 0));
}

TEST_F(TabularDataTest, PrefetchHandsOutTheSameBatches) {
  for (bool shuffle : {false, true}) {
    auto plain = MustCreate(&data_, 3, shuffle);
    auto prefetched = MustCreate(&data_, 3, shuffle);
    ASSERT_NE(plain, nullptr);
    ASSERT_NE(prefetched, nullptr);
    plain->SetSparseFeatures({2, 0});
    prefetched->SetSparseFeatures({2, 0});
    prefetched->StartPrefetch();
    Batch reused;  // one SparseBatch across calls, as a trainer keeps it
    reused.dense.resize(3 * 13);
    reused.labels.resize(3);
    for (int b = 0; b < 7; ++b) {
      prefetched->Next(reused.dense.data(), reused.labels.data(), &reused.sparse);
      ExpectSameBatch(NextBatch(plain.get(), data_), reused);
      EXPECT_EQ(prefetched->epoch(), plain->epoch()) << "batch " << b;
    }
  }
}

TEST_F(TabularDataTest, SkipIsLikeDrawingThatManyBatches) {
  for (int64_t skip = 0; skip < 6; ++skip) {
    auto drawn = MustCreate(&data_, 3, /*shuffle=*/true);
    auto skipped = MustCreate(&data_, 3, /*shuffle=*/true);
    ASSERT_NE(drawn, nullptr);
    ASSERT_NE(skipped, nullptr);
    drawn->SetSparseFeatures({2, 0});
    skipped->SetSparseFeatures({2, 0});
    for (int64_t i = 0; i < skip; ++i) NextBatch(drawn.get(), data_);
    skipped->Skip(skip);
    skipped->StartPrefetch();
    ExpectSameBatch(NextBatch(drawn.get(), data_), NextBatch(skipped.get(), data_));
    ExpectSameBatch(NextBatch(drawn.get(), data_), NextBatch(skipped.get(), data_));
  }
}

TEST_F(TabularDataTest, GatherRangeCopiesDenseAndSparse) {
  std::vector<float> dense(2 * 13);
  std::vector<float> labels(2);
  SparseBatch sparse;
  GatherRange(data_, 1, 2, dense.data(), labels.data(), {2, 0}, &sparse);
  EXPECT_EQ(dense, std::vector<float>(data_.dense.begin() + 13, data_.dense.begin() + 3 * 13));
  EXPECT_THAT(labels, ElementsAre(0, 0));
  ExpectSparseBatch(data_, {2, 0}, {1, 2}, sparse);

  std::vector<float> dense_only(2 * 13);
  GatherRange(data_, 2, 2, dense_only.data(), labels.data());
  EXPECT_EQ(dense_only, std::vector<float>(data_.dense.begin() + 2 * 13, data_.dense.end()));
  EXPECT_THAT(labels, ElementsAre(0, 1));
}

TEST_F(TabularDataTest, CreateRejectsInconsistentTabularData) {
  auto code = [](const Dataset& d) {
    return BatchIterator::Create(&d, 2, 0, 1, false, 1).status().code();
  };
  Dataset short_dense = data_;
  short_dense.dense.pop_back();
  EXPECT_EQ(code(short_dense), absl::StatusCode::kInvalidArgument);
  Dataset short_column = data_;
  short_column.sparse[5].offsets.pop_back();
  EXPECT_EQ(code(short_column), absl::StatusCode::kInvalidArgument);
  Dataset lost_values = data_;
  lost_values.sparse[0].values.pop_back();
  EXPECT_EQ(code(lost_values), absl::StatusCode::kInvalidArgument);
}

TEST(TabularBatchDeathTest, UnknownColumnIsAProgrammerError) {
  Dataset images = testutil::MakeDataset(4, 2, 2, 1);
  auto it = MustCreate(&images, 2, false);
  ASSERT_NE(it, nullptr);
  EXPECT_DEATH(it->SetSparseFeatures({0}), "sparse column 0 of a dataset with 0");
}

TEST(TabularBatchTest, ImageBatchesAreUnchangedWithASparseBatch) {
  Dataset images = testutil::MakeDataset(4, 2, 2, 1);
  auto it = MustCreate(&images, 2, false);
  ASSERT_NE(it, nullptr);
  std::vector<float> pixels(2 * 4);
  std::vector<float> labels(2);
  SparseBatch sparse;
  sparse.features.resize(1);  // stale: replaced
  it->Next(pixels.data(), labels.data(), &sparse);
  EXPECT_THAT(labels, ElementsAre(0, 1));
  EXPECT_EQ(pixels[5], testutil::PatternPixel(1, 1) / 255.0f);
  EXPECT_TRUE(sparse.features.empty());
}

}  // namespace
}  // namespace pstrain
