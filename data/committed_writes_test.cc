// Every writer of data/ against a crash at each of its steps
// (testing/crash_env.h): no file under its final name is ever cut or empty;
// it is the old file or the whole new one, and shards written together are
// visible only once every one is whole.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/dataset.h"
#include "data/formats/example_columns.h"
#include "data/formats/example_writer.h"
#include "data/formats/tfrecord_dataset.h"
#include "data/synthetic/synthetic_ctr.h"
#include "data/synthetic/synthetic_seq.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/crash_env.h"

namespace pstrain {
namespace {

using ::testing::IsEmpty;
using testing_util::CrashCase;
using testing_util::CrashEnv;
using testing_util::CrashViolations;

// An old shard that a new conversion replaces.
void OldShard(CrashEnv* env) { env->Put("/out/ex-00001-of-00003.tfrecord.gz", "old shard"); }

TEST(CommittedWritesTest, ShardedExampleWriterShardsAreWholeAndVisibleTogether) {
  CrashCase c{OldShard,
              [](Env* env) -> absl::Status {
                PSTRAIN_ASSIGN_OR_RETURN(auto writer,
                                         ShardedExampleWriter::Create(env, "/out/ex", 3));
                for (int i = 0; i < 20; ++i) {
                  PSTRAIN_RETURN_IF_ERROR(writer->Add(absl::StrCat("example ", i)));
                }
                return writer->Close();
              },
              /*together=*/true};
  EXPECT_THAT(CrashViolations(c), IsEmpty());
}

ExampleColumn Labels(int n) {
  ExampleColumn c;
  c.name = "label";
  for (int i = 0; i < n; ++i) {
    c.ints.push_back(i % 2);
    c.offsets.push_back(static_cast<int64_t>(c.ints.size()));
  }
  return c;
}

TEST(CommittedWritesTest, ExampleColumnsShardsAreWholeAndVisibleTogether) {
  for (bool gzip : {false, true}) {
    CrashCase c{[](CrashEnv* env) {
                  env->Put("/out/ex-00001-of-00003.tfrecord", "old shard");
                  env->Put("/out/ex-00001-of-00003.tfrecord.gz", "old shard");
                },
                [gzip](Env* env) {
                  return WriteExampleColumns(env, "/out/ex", {Labels(10)}, 3, gzip).status();
                },
                /*together=*/true};
    EXPECT_THAT(CrashViolations(c), IsEmpty()) << "gzip " << gzip;
  }
  EXPECT_THAT(
      CrashViolations(
          {[](CrashEnv* env) { env->Put("/out/one.tfrecord", "old"); },
           [](Env* env) {
             return WriteExampleColumns(env, "/out/one.tfrecord", {Labels(4)}, 1, false).status();
           }}),
      IsEmpty());
}

TEST(CommittedWritesTest, SyntheticClickLogsAreWholeOrAbsent) {
  SyntheticCtrConfig config;
  absl::StatusOr<SyntheticCtr> ctr = SyntheticCtr::Create(config);
  ASSERT_TRUE(ctr.ok()) << ctr.status();
  EXPECT_THAT(CrashViolations({[](CrashEnv*) {},
                               [&](Env* env) {
                                 return ctr->WriteTsv(env, "/ctr/train.tsv", 40,
                                                      kSyntheticTrainStream);
                               }}),
              IsEmpty());
}

TEST(CommittedWritesTest, SyntheticSequencesAreWholeOrAbsent) {
  absl::StatusOr<SyntheticSeq> seq = SyntheticSeq::Create(SyntheticSeqConfig{});
  ASSERT_TRUE(seq.ok()) << seq.status();
  const std::vector<SeqExample> examples = seq->Generate(30, 0);
  EXPECT_THAT(CrashViolations({[](CrashEnv* env) { env->Put("/seq/train.tfrecords", "old"); },
                               [&](Env* env) {
                                 return seq->WriteTfRecords(env, "/seq/train.tfrecords", examples);
                               }}),
              IsEmpty());
}

TEST(CommittedWritesTest, ConvertedImageRecordsAreWholeOrAbsent) {
  Dataset images;
  images.height = images.width = 2;
  images.channels = 1;
  images.images = {1, 2, 3, 4, 5, 6, 7, 8};
  images.labels = {3, 4};
  EXPECT_THAT(CrashViolations({[](CrashEnv*) {},
                               [&](Env* env) {
                                 return WriteExampleFile(env, "/mnist/train.tfrecords", images,
                                                         ExampleLayout::kMnist);
                               }}),
              IsEmpty());
}

}  // namespace
}  // namespace pstrain
