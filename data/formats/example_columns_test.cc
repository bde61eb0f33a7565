#include "data/formats/example_columns.h"

#include <string>
#include <vector>

#include "common/env.h"
#include "data/formats/tabular_examples.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

ExampleColumn Ints(const std::string& name, std::vector<std::vector<int64_t>> rows) {
  ExampleColumn c;
  c.name = name;
  for (const auto& r : rows) {
    c.ints.insert(c.ints.end(), r.begin(), r.end());
    c.offsets.push_back(static_cast<int64_t>(c.ints.size()));
  }
  return c;
}

ExampleColumn Floats(const std::string& name, std::vector<std::vector<float>> rows) {
  ExampleColumn c;
  c.name = name;
  c.kind = ExampleColumn::Kind::kFloat;
  for (const auto& r : rows) {
    c.floats.insert(c.floats.end(), r.begin(), r.end());
    c.offsets.push_back(static_cast<int64_t>(c.floats.size()));
  }
  return c;
}

ExampleColumn Strings(const std::string& name, std::vector<std::vector<std::string>> rows) {
  ExampleColumn c;
  c.name = name;
  c.kind = ExampleColumn::Kind::kBytes;
  for (const auto& r : rows) {
    c.bytes.insert(c.bytes.end(), r.begin(), r.end());
    c.offsets.push_back(static_cast<int64_t>(c.bytes.size()));
  }
  return c;
}

std::vector<ExampleColumn> ReadAll(const std::string& pattern, int64_t piece) {
  absl::StatusOr<std::unique_ptr<ExampleColumnReader>> reader =
      ExampleColumnReader::Open(Env::Default(), pattern);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return {};
  absl::StatusOr<ExamplePiece> read = (*reader)->Next(piece);
  EXPECT_TRUE(read.ok()) << read.status();
  return read.ok() ? read->columns : std::vector<ExampleColumn>();
}

class ExampleColumnsTest : public ::testing::Test {
 protected:
  std::string dir_ = testing_util::TempDirRemovedAtExit("example_columns");
  std::vector<ExampleColumn> columns_ = {
      Ints("label", {{1}, {0}, {1}}), Floats("dense", {{0.5f, 1.5f}, {2, 3}, {-1, 0}}),
      Ints("hist", {{3, 7, 7, 2}, {}, {9}}), Strings("word", {{"a", "bc"}, {"d"}, {}})};
};

TEST_F(ExampleColumnsTest, WrittenColumnsReadBackInPieces) {
  absl::StatusOr<std::vector<std::string>> files =
      WriteExampleColumns(Env::Default(), dir_ + "/train.tfrecords", columns_, 1, false);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre(dir_ + "/train.tfrecords"));
  absl::StatusOr<std::unique_ptr<ExampleColumnReader>> reader =
      ExampleColumnReader::Open(Env::Default(), dir_ + "/train.tfrecords");
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<ExamplePiece> piece = (*reader)->Next(2);
  ASSERT_TRUE(piece.ok()) << piece.status();
  EXPECT_EQ(piece->examples, 2);
  const std::vector<ExampleColumn>* first = &piece->columns;
  // Features in name order as first seen: example 0 has all four.
  ASSERT_EQ(first->size(), 4u);
  const ExampleColumn& dense = (*first)[0];
  EXPECT_EQ(dense.name, "dense");
  EXPECT_EQ(dense.kind, ExampleColumn::Kind::kFloat);
  EXPECT_THAT(dense.floats, ElementsAre(0.5f, 1.5f, 2, 3));
  EXPECT_THAT(dense.offsets, ElementsAre(0, 2, 4));
  const ExampleColumn& hist = (*first)[1];
  EXPECT_EQ(hist.name, "hist");
  EXPECT_THAT(hist.ints, ElementsAre(3, 7, 7, 2));
  EXPECT_THAT(hist.offsets, ElementsAre(0, 4, 4));  // example 1 has none
  EXPECT_EQ((*first)[3].name, "word");
  EXPECT_THAT((*first)[3].bytes, ElementsAre("a", "bc", "d"));
  absl::StatusOr<ExamplePiece> second = (*reader)->Next(2);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->examples, 1);
  ASSERT_EQ(second->columns.size(), 3u);  // example 2 has no word
  EXPECT_EQ(second->columns[0].examples(), 1);
  absl::StatusOr<ExamplePiece> end = (*reader)->Next(2);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->examples, 0);
  EXPECT_TRUE(end->columns.empty());
}

// A job reads what the columns write: TabularExampleParser on the file.
TEST_F(ExampleColumnsTest, AJobReadsThem) {
  std::vector<ExampleColumn> columns = columns_;
  columns.pop_back();  // the tabular reader takes int64 sparse features here
  ASSERT_TRUE(WriteExampleColumns(Env::Default(), dir_ + "/job.tfrecords", columns, 1, false).ok());
  TabularFeatures features;
  features.num_dense = 2;
  features.sparse = {"hist"};
  absl::StatusOr<Dataset> data =
      ReadTabularExamples(Env::Default(), dir_ + "/job.tfrecords", features);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->size(), 3);
  EXPECT_THAT(data->labels, ElementsAre(1, 0, 1));
  EXPECT_THAT(data->dense, ElementsAre(0.5f, 1.5f, 2, 3, -1, 0));
}

// A piece whose examples have no feature still counts them.
TEST_F(ExampleColumnsTest, ExamplesWithoutFeaturesAreCounted) {
  ASSERT_TRUE(WriteExampleColumns(Env::Default(), dir_ + "/sparse.tfrecords",
                                  {Ints("user", {{}, {}, {1}, {2}})}, 1, false)
                  .ok());
  absl::StatusOr<std::unique_ptr<ExampleColumnReader>> reader =
      ExampleColumnReader::Open(Env::Default(), dir_ + "/sparse.tfrecords");
  ASSERT_TRUE(reader.ok());
  absl::StatusOr<ExamplePiece> piece = (*reader)->Next(2);
  ASSERT_TRUE(piece.ok());
  EXPECT_EQ(piece->examples, 2);
  EXPECT_TRUE(piece->columns.empty());
  piece = (*reader)->Next(2);
  ASSERT_TRUE(piece.ok());
  EXPECT_EQ(piece->examples, 2);
  ASSERT_EQ(piece->columns.size(), 1u);
  EXPECT_THAT(piece->columns[0].ints, ElementsAre(1, 2));
}

// Readers take a file's compression from its name.
TEST_F(ExampleColumnsTest, ASingleFilesNameSaysItsCompression) {
  absl::StatusOr<std::vector<std::string>> files =
      WriteExampleColumns(Env::Default(), dir_ + "/plain.tfrecords", columns_, 1, true);
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(std::string(files.status().message()), HasSubstr("ends .gz"));
  EXPECT_FALSE(WriteExampleColumns(Env::Default(), dir_ + "/z.gz", columns_, 1, false).ok());
  files = WriteExampleColumns(Env::Default(), dir_ + "/z.tfrecords.gz", columns_, 1, true);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(ReadAll((*files)[0], 10).front().examples(), 3);
}

TEST_F(ExampleColumnsTest, ShardsAndGzip) {
  absl::StatusOr<std::vector<std::string>> files =
      WriteExampleColumns(Env::Default(), dir_ + "/part", columns_, 2, true);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre(dir_ + "/part-00000-of-00002.tfrecord.gz",
                                  dir_ + "/part-00001-of-00002.tfrecord.gz"));
  // Example i in shard i % 2: shard 0 holds examples 0 and 2.
  const std::vector<ExampleColumn> shard0 = ReadAll((*files)[0], 10);
  ASSERT_FALSE(shard0.empty());
  EXPECT_EQ(shard0[0].examples(), 2);
  const std::vector<ExampleColumn> all = ReadAll(dir_ + "/part-*", 10);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all[0].examples(), 3);
  EXPECT_THAT(
      *Env::Default()->ListDir(dir_),  // no temp file left
      UnorderedElementsAre("part-00000-of-00002.tfrecord.gz", "part-00001-of-00002.tfrecord.gz"));
}

TEST_F(ExampleColumnsTest, ColumnsThatAreNotOneSetOfExamplesAreRefused) {
  std::vector<ExampleColumn> short_one = columns_;
  short_one[1] = Floats("dense", {{1}});
  absl::StatusOr<std::vector<std::string>> files =
      WriteExampleColumns(Env::Default(), dir_ + "/bad", short_one, 1, false);
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(std::string(files.status().message()),
              HasSubstr("column dense has 1 examples, but column label has 3"));
  EXPECT_FALSE(Env::Default()->FileExists(dir_ + "/bad"));
  std::vector<ExampleColumn> twice = {Ints("a", {{1}}), Ints("a", {{2}})};
  EXPECT_THAT(std::string(CheckExampleColumns(twice).message()), HasSubstr("given twice"));
  ExampleColumn broken = Ints("b", {{1, 2}});
  broken.offsets = {0, 3};
  EXPECT_FALSE(CheckExampleColumns({broken}).ok());
  EXPECT_FALSE(CheckExampleColumns({}).ok());
  EXPECT_FALSE(WriteExampleColumns(Env::Default(), dir_ + "/x", columns_, 0, false).ok());
}

TEST_F(ExampleColumnsTest, DamagedAndTruncatedFilesSayWhere) {
  const std::string path = dir_ + "/whole.tfrecords";
  ASSERT_TRUE(WriteExampleColumns(Env::Default(), path, columns_, 1, false).ok());
  const std::string bytes = *Env::Default()->ReadFile(path);
  // Every cut and a flipped byte in every place: an error or the examples
  // before it, never a crash.
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    ASSERT_TRUE(
        Env::Default()->WriteFileAtomic(dir_ + "/cut.tfrecords", bytes.substr(0, cut)).ok());
    absl::StatusOr<std::unique_ptr<ExampleColumnReader>> reader =
        ExampleColumnReader::Open(Env::Default(), dir_ + "/cut.tfrecords");
    ASSERT_TRUE(reader.ok());
    absl::StatusOr<ExamplePiece> read = (*reader)->Next(10);
    if (!read.ok()) {
      EXPECT_THAT(std::string(read.status().message()), HasSubstr("cut.tfrecords"));
    }
  }
  int damaged = 0;
  for (size_t at = 0; at < bytes.size(); ++at) {
    std::string flipped = bytes;
    flipped[at] ^= 0x5a;
    ASSERT_TRUE(Env::Default()->WriteFileAtomic(dir_ + "/flip.tfrecords", flipped).ok());
    absl::StatusOr<std::unique_ptr<ExampleColumnReader>> reader =
        ExampleColumnReader::Open(Env::Default(), dir_ + "/flip.tfrecords");
    ASSERT_TRUE(reader.ok());
    damaged += !(*reader)->Next(10).ok();
  }
  // The TFRecord CRCs catch every flipped byte.
  EXPECT_EQ(damaged, static_cast<int>(bytes.size()));
}

TEST_F(ExampleColumnsTest, AFeatureOfTwoKindsIsRefused) {
  ASSERT_TRUE(
      WriteExampleColumns(Env::Default(), dir_ + "/a.tfrecords", {Ints("f", {{1}})}, 1, false)
          .ok());
  ASSERT_TRUE(
      WriteExampleColumns(Env::Default(), dir_ + "/b.tfrecords", {Floats("f", {{1.5f}})}, 1, false)
          .ok());
  absl::StatusOr<std::unique_ptr<ExampleColumnReader>> reader =
      ExampleColumnReader::Open(Env::Default(), dir_ + "/a.tfrecords," + dir_ + "/b.tfrecords");
  ASSERT_TRUE(reader.ok()) << reader.status();
  // Across pieces too.
  absl::StatusOr<ExamplePiece> read = (*reader)->Next(1);
  ASSERT_TRUE(read.ok()) << read.status();
  read = (*reader)->Next(10);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(std::string(read.status().message()),
              HasSubstr("feature f holds float values, but int64 values at"));
  EXPECT_TRUE(
      absl::IsNotFound(ExampleColumnReader::Open(Env::Default(), dir_ + "/none-*").status()));
}

}  // namespace
}  // namespace pstrain
