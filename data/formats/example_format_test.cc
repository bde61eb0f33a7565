#include "data/formats/example_format.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(ExampleFormatTest, EachFileByItsName) {
  EXPECT_EQ(ExampleFormatOfFile("stream/part-0.tsv"), ExampleFormat::kCriteoTsv);
  EXPECT_EQ(ExampleFormatOfFile("gs://b/ctr/day_1.tsv.gz"), ExampleFormat::kCriteoTsv);
  EXPECT_EQ(ExampleFormatOfFile("clicks.csv"), ExampleFormat::kCsv);
  EXPECT_EQ(ExampleFormatOfFile("clicks.csv.gz"), ExampleFormat::kCsv);
  EXPECT_EQ(ExampleFormatOfFile("train-00000-of-00004.tfrecord.gz"), ExampleFormat::kTfExamples);
  EXPECT_EQ(ExampleFormatOfFile("logs/hour=13/part-1"), ExampleFormat::kTfExamples);
  // A pattern's text is no file's name: "stream/*" says nothing of the
  // files it matches.
  EXPECT_EQ(ExampleFormatOfFile("stream/*"), ExampleFormat::kTfExamples);
  EXPECT_EQ(ExampleFormatOfFile("a.tsv.bak"), ExampleFormat::kTfExamples);
}

TEST(ExampleFormatTest, FilesOfOneFormat) {
  absl::StatusOr<ExampleFormat> f =
      ExampleFormatOfFiles({"stream/a.tsv", "stream/b.tsv.gz"}, "training.train_files");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*f, ExampleFormat::kCriteoTsv);
  f = ExampleFormatOfFiles({"x.csv"}, "training.eval_files");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*f, ExampleFormat::kCsv);
  f = ExampleFormatOfFiles({"part-0", "part-1.tfrecord"}, "training.train_files");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*f, ExampleFormat::kTfExamples);
}

TEST(ExampleFormatTest, FilesOfTwoFormatsAreNamed) {
  absl::StatusOr<ExampleFormat> f = ExampleFormatOfFiles(
      {"stream/a.tsv", "stream/b.tsv", "stream/c.tfrecord"}, "training.train_files");
  ASSERT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << f.status();
  const std::string m(f.status().message());
  EXPECT_EQ(m.find("training.train_files"), 0u) << m;
  EXPECT_NE(m.find("stream/a.tsv is Criteo TSV"), std::string::npos) << m;
  EXPECT_NE(m.find("stream/c.tfrecord TFRecord Examples"), std::string::npos) << m;
  EXPECT_EQ(ExampleFormatOfFiles({}, "pstrain-data read").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain
