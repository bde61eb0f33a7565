// Online training's input: the list of files found so far, and streams
// that follow it, training on each new file once as it comes.
#include "data/stream/file_list.h"

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/record_writer.h"
#include "data/stream/example_stream.h"
#include "data/stream/streamed_batches.h"
#include "gtest/gtest.h"
#include "testing/data_test_util.h"
#include "testing/temp_dir.h"

namespace pstrain {
namespace {

class FileListTest : public ::testing::Test {
 protected:
  // A TFRecord file of examples with ids [from, from + n).
  void WriteIds(const std::string& name, int64_t from, int64_t n) {
    std::string bytes;
    for (int64_t id = from; id < from + n; ++id) {
      bytes += RecordWriter::Frame(testutil::ExampleWithId(id));
    }
    // Written aside and renamed, as a log shipper lands a file.
    ASSERT_TRUE(env_->WriteFileAtomic(absl::StrCat(dir_, "/logs/", name), bytes).ok());
  }

  ExampleStreamOptions Options(int replica, int replicas) const {
    ExampleStreamOptions o;
    o.files = *ReadFileList(env_, list_);
    o.follow_list = list_;
    o.poll_secs = 0.05;
    o.features.num_dense = 1;
    o.features.sparse = {"ids"};
    o.batch_size = 4;
    o.cycle_length = 2;
    o.shuffle_buffer = 6;
    o.seed = 3;
    o.replica = replica;
    o.num_replicas = replicas;
    return o;
  }

  // Batches until the stream waits for new files (at most `limit`).
  std::vector<int64_t> ReadUntilWaiting(ExampleStream& stream, int limit = 1000) {
    std::vector<int64_t> ids;
    Dataset batch;
    for (int i = 0; i < limit; ++i) {
      absl::Status s = stream.Next(&batch);
      if (IsWaitingForInput(s)) break;
      EXPECT_TRUE(s.ok()) << s;
      if (!s.ok()) break;
      for (int64_t j = 0; j < batch.size(); ++j)
        ids.push_back(static_cast<int64_t>(batch.dense[j]));
    }
    return ids;
  }

  Env* env_ = Env::Default();
  std::string dir_ = testing_util::TempDirRemovedAtExit("file_list");
  std::string list_ = dir_ + "/input/files.txt";
  std::string pattern_ = dir_ + "/logs/hour=*/part-*";
};

TEST_F(FileListTest, NewFilesAreAppendedInNameOrderAndKeepTheirPlaces) {
  ASSERT_TRUE(env_->CreateDirs(dir_ + "/input").ok());
  // Nothing yet: no error, an empty list.
  absl::StatusOr<int64_t> added = UpdateFileList(env_, list_, pattern_);
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(*added, 0);
  EXPECT_TRUE(ReadFileList(env_, list_)->empty());
  ASSERT_TRUE(env_->CreateDirs(dir_ + "/logs/hour=13").ok());
  WriteIds("hour=13/part-1", 0, 1);
  WriteIds("hour=13/part-0", 1, 1);
  EXPECT_EQ(*UpdateFileList(env_, list_, pattern_), 2);
  ASSERT_TRUE(env_->CreateDirs(dir_ + "/logs/hour=14").ok());
  WriteIds("hour=14/part-0", 2, 1);
  // A late file of an earlier hour goes after the ones listed before it.
  WriteIds("hour=13/part-2", 3, 1);
  EXPECT_EQ(*UpdateFileList(env_, list_, pattern_), 2);
  EXPECT_EQ(*UpdateFileList(env_, list_, pattern_), 0);
  // A name with a line break cannot be a line of the list: left out, and
  // the files after it are listed still.
  WriteIds("hour=14/part-1\nx", 4, 1);
  WriteIds("hour=14/part-2", 5, 1);
  EXPECT_EQ(*UpdateFileList(env_, list_, pattern_), 1);
  EXPECT_EQ(*UpdateFileList(env_, list_, pattern_), 0);
  const std::string logs = dir_ + "/logs/";
  EXPECT_EQ(*ReadFileList(env_, list_),
            (std::vector<std::string>{logs + "hour=13/part-0", logs + "hour=13/part-1",
                                      logs + "hour=13/part-2", logs + "hour=14/part-0",
                                      logs + "hour=14/part-2"}));
}

TEST_F(FileListTest, StreamsTrainOnEachNewFileOnceAndResumeWhereTheyWere) {
  ASSERT_TRUE(env_->CreateDirs(dir_ + "/input").ok());
  ASSERT_TRUE(env_->CreateDirs(dir_ + "/logs/hour=1").ok());
  for (int f = 0; f < 3; ++f) WriteIds(absl::StrCat("hour=1/part-", f), f * 10, 10);
  ASSERT_TRUE(UpdateFileList(env_, list_, pattern_).ok());
  std::vector<std::unique_ptr<ExampleStream>> streams;
  for (int r = 0; r < 2; ++r) {
    absl::StatusOr<std::unique_ptr<ExampleStream>> s = ExampleStream::Create(env_, Options(r, 2));
    ASSERT_TRUE(s.ok()) << s.status();
    streams.push_back(*std::move(s));
  }
  std::map<int64_t, int> seen;
  // Replica 0 has files 0 and 2 (20 examples: 5 batches), replica 1 file 1
  // (10: 2 batches, 2 examples kept for the next).
  for (int r = 0; r < 2; ++r) {
    for (int64_t id : ReadUntilWaiting(*streams[r])) ++seen[id];
  }
  EXPECT_EQ(seen.size(), 28u);
  // New files land; the streams go on with them (replica 1 first with the
  // 2 examples it had).
  ASSERT_TRUE(env_->CreateDirs(dir_ + "/logs/hour=2").ok());
  for (int f = 0; f < 3; ++f) WriteIds(absl::StrCat("hour=2/part-", f), 30 + f * 10, 10);
  ASSERT_TRUE(UpdateFileList(env_, list_, pattern_).ok());
  Dataset batch;
  absl::Status s;
  for (int i = 0; i < 20 && (s = streams[1]->Next(&batch), IsWaitingForInput(s)); ++i) {
  }
  ASSERT_TRUE(s.ok()) << s;
  for (int64_t j = 0; j < batch.size(); ++j) ++seen[static_cast<int64_t>(batch.dense[j])];
  const InputPosition at = streams[1]->position();
  EXPECT_GT(at.listed, 0);
  std::vector<int64_t> after;
  for (int r = 0; r < 2; ++r) {
    std::vector<int64_t> ids = ReadUntilWaiting(*streams[r]);
    if (r == 1) after = ids;
    for (int64_t id : ids) ++seen[id];
  }
  // Every example once but the few of the last unfinished batches.
  int64_t once = 0;
  for (const auto& [id, times] : seen) {
    EXPECT_EQ(times, 1) << "example " << id;
    once += times == 1;
  }
  EXPECT_GE(once, 60 - 2 * 3);
  // A replica restarted at its position goes on with the same examples.
  ExampleStreamOptions o = Options(1, 2);
  absl::StatusOr<std::unique_ptr<ExampleStream>> resumed = ExampleStream::Create(env_, o, at);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(ReadUntilWaiting(**resumed), after);
}

// An async replica restarted at a batch estimated past what its files
// hold goes on from where they end instead of failing, and trains on the
// files that land next.
TEST_F(FileListTest, StartedPastTheListedFilesAReplicaWaitsForMore) {
  ASSERT_TRUE(env_->CreateDirs(dir_ + "/input").ok());
  ASSERT_TRUE(env_->CreateDirs(dir_ + "/logs/hour=1").ok());
  WriteIds("hour=1/part-0", 0, 10);  // 2 batches of 4, 2 examples over
  ASSERT_TRUE(UpdateFileList(env_, list_, pattern_).ok());
  absl::StatusOr<std::unique_ptr<StreamedBatches>> b =
      StreamedBatches::Start(env_, Options(0, 1), {"ids"}, /*first=*/5, nullptr);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->next_batch(), 2);
  std::vector<float> dense(4);
  std::vector<float> labels(4);
  EXPECT_TRUE(IsWaitingForInput((*b)->NextBatch(dense.data(), labels.data(), nullptr)));
  WriteIds("hour=1/part-1", 10, 10);
  ASSERT_TRUE(UpdateFileList(env_, list_, pattern_).ok());
  absl::Status s;
  for (int i = 0; i < 20; ++i) {
    s = (*b)->NextBatch(dense.data(), labels.data(), nullptr);
    if (!IsWaitingForInput(s)) break;
  }
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ((*b)->next_batch(), 3);
}

TEST_F(FileListTest, APositionSaysHowMuchOfTheListItsWindowSawOnce) {
  InputPosition p;
  p.next_file = 2;
  p.listed = 7;
  p.open = {{1, 40, 2}};
  absl::StatusOr<InputPosition> back = InputPosition::FromString(p.ToString());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, p);
  // Written before online training: no listed.
  EXPECT_TRUE(InputPosition::FromString("epoch=0 next_file=0 window=0 taken=0 open=").ok());
  EXPECT_TRUE(
      InputPosition::FromString("epoch=0 next_file=0 window=0 taken=0 listed=0 open=").ok());
  for (const char* bad : {"epoch=0 next_file=0 window=0 taken=0 listed=3 listed=3",
                          "epoch=0 next_file=0 window=0 window=0 taken=0 open=",
                          "epoch=0 next_file=0 window=0 listed=2 open="}) {
    EXPECT_FALSE(InputPosition::FromString(bad).ok()) << bad;
  }
}

TEST_F(FileListTest, AListThatLostFilesIsAnError) {
  ASSERT_TRUE(env_->CreateDirs(dir_ + "/input").ok());
  ASSERT_TRUE(env_->CreateDirs(dir_ + "/logs/hour=1").ok());
  WriteIds("hour=1/part-0", 0, 10);
  WriteIds("hour=1/part-1", 10, 10);
  ASSERT_TRUE(UpdateFileList(env_, list_, pattern_).ok());
  absl::StatusOr<std::unique_ptr<ExampleStream>> s = ExampleStream::Create(env_, Options(0, 1));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ReadUntilWaiting(**s).size(), 20u);
  ASSERT_TRUE(env_->WriteFileAtomic(list_, dir_ + "/logs/hour=1/part-0\n").ok());
  Dataset batch;
  absl::Status status;
  for (int i = 0; i < 20 && (status = (*s)->Next(&batch), IsWaitingForInput(status)); ++i) {
  }
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_NE(status.message().find("fewer than the 2"), std::string::npos) << status;
}

}  // namespace
}  // namespace pstrain
