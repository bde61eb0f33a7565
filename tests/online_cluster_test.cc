// Online training (issue 41): a job that follows its train_files trains on
// each new file once as it lands, stops on SIGTERM with its model exported,
// and, restarted, goes on with the files that came meanwhile.

#include <signal.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "data/synthetic_ctr.h"
#include "gtest/gtest.h"
#include "tests/ctr_cluster_util.h"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using testing_util::Background;
using testing_util::CtrClusterTest;
using testing_util::DataConfig;
using testing_util::LoopbackConfig;
using testing_util::ReadAll;
using testing_util::StartProcess;
using testing_util::WaitProcess;

const std::string kBin = PSTRAIN_BIN_DIR;

// Occurrences of `text` in `s`.
int Count(const std::string& s, const std::string& text) {
  int n = 0;
  for (size_t at = s.find(text); at != std::string::npos; at = s.find(text, at + 1)) ++n;
  return n;
}

// Waits (up to `secs`) until the file at `path` holds `text` `times` times.
bool WaitForCount(const std::string& path, const std::string& text, int times, int secs) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(secs);
  while (std::chrono::steady_clock::now() < deadline) {
    if (Count(ReadAll(path), text) >= times) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

class OnlineClusterTest : public CtrClusterTest {
 protected:
  OnlineClusterTest() : CtrClusterTest("online_cluster", PSTRAIN_BIN_DIR) {}

  // Part `i` of the click log: 2000 examples of stream 500 + i, landed
  // whole (written aside and renamed).
  void Land(int i) {
    absl::StatusOr<SyntheticCtr> data = SyntheticCtr::Create(DataConfig());
    ASSERT_TRUE(data.ok()) << data.status();
    ASSERT_TRUE(data->WriteTsv(Env::Default(), Part(i), 2000, 500 + i).ok());
  }
  std::string Part(int i) const { return absl::StrCat(dir_, "/logs/part-00", i, ".tsv"); }

  Background Launch(const std::string& log) {
    const std::string config = WriteClusterConfig(
        LoopbackConfig{.ps = 1,
                       .workers = 1,
                       .training = "  update: async\n  follow: true\n  poll_secs: 0.2\n"
                                   "  checkpoint_steps: 20\n  shuffle_buffer: 500\n"
                                   "  progressive_validation: true\n  progressive_window: 2000\n"
                                   "  export_steps: 20\n  exports_to_keep: 3\n"});
    return StartProcess(
        {kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec_, "--data_dir=" + ctr_,
         "--train_files=" + dir_ + "/logs/part-*.tsv", "--job_dir=" + job_dir(), "--eval_steps=0",
         "--log_every_n_steps=10", "--batch_size=100", "--learning_rate=0.003",
         "--embedding_learning_rate=0.1", "--eval_batch_size=1000"},
        log);
  }
};

TEST_F(OnlineClusterTest, AJobThatFollowsItsFilesTrainsOnEachNewOneAndStopsWhenAsked) {
  ASSERT_TRUE(Env::Default()->CreateDirs(dir_ + "/logs").ok());
  Land(0);
  Land(1);
  const std::string log = dir_ + "/online_1.log";
  Background launch = Launch(log);
  // The chief (replica 0) has part 0, worker 0 part 1; both wait for more.
  ASSERT_TRUE(WaitForCount(log, "of the 2 listed", 2, 120)) << ReadAll(log);
  Land(2);
  Land(3);
  ASSERT_TRUE(WaitForCount(log, "has read its 2 files of the 4 listed", 2, 120)) << ReadAll(log);
  ASSERT_EQ(::kill(launch.pid, SIGTERM), 0);
  ASSERT_EQ(WaitProcess(&launch, 120), 0) << ReadAll(log);
  std::string out = ReadAll(log);
  // Each file was read once, from its start, by the replica it was dealt to.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(Count(out, absl::StrCat("of 2 opens ", Part(i), " in epoch 1")), 1) << Part(i) << "\n"
                                                                                  << out;
    EXPECT_EQ(Count(out, absl::StrCat("replica ", i % 2, " of 2 opens ", Part(i))), 1) << out;
  }
  // Exported while it trained (every 20 steps, from the checkpoints), and
  // as it stopped; the newest 3 kept.
  EXPECT_GE(Count(out, "Exported the model for serving"), 3) << out;
  EXPECT_NE(out.find("the online job stopped: its last checkpoint is exported"), std::string::npos)
      << out;
  absl::StatusOr<std::vector<std::string>> versions =
      Env::Default()->ListDir(job_dir() + "/export");
  ASSERT_TRUE(versions.ok()) << versions.status();
  EXPECT_EQ(versions->size(), 3u);
  EXPECT_FALSE(Env::Default()->FileExists(job_dir() + "/COMPLETED"));
  absl::StatusOr<std::string> list = Env::Default()->ReadFile(job_dir() + "/input/files.txt");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(*list, absl::StrCat(Part(0), "\n", Part(1), "\n", Part(2), "\n", Part(3), "\n"));
  EXPECT_NE(out.find("checkpoint saved at global step"), std::string::npos) << out;
  // Each batch was predicted before it was trained on: the loss and AUC of
  // the last 2000 examples, in the log and for TensorBoard.
  const std::regex progressive(
      "progressive validation \\(last 2000 examples\\): loss = ([0-9.]+), auc = ([0-9.]+)");
  std::vector<double> aucs;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), progressive);
       it != std::sregex_iterator(); ++it) {
    aucs.push_back(std::stod((*it)[2]));
  }
  ASSERT_GE(aucs.size(), 2u) << out;
  std::printf("progressive AUC of the last 2000 examples: %.4f at first, %.4f at the stop\n",
              aucs.front(), aucs.back());
  EXPECT_GT(aucs.back(), aucs.front() + 0.03) << out;
  for (int replica = 0; replica < 2; ++replica) {
    absl::StatusOr<std::vector<std::string>> events =
        Env::Default()->ListDir(absl::StrCat(job_dir(), "/progressive/replica-", replica));
    ASSERT_TRUE(events.ok()) << events.status();
    EXPECT_EQ(events->size(), 1u);
  }

  // Two more land while it is stopped; restarted, it trains on them.
  Land(4);
  Land(5);
  const std::string log2 = dir_ + "/online_2.log";
  Background again = Launch(log2);
  ASSERT_TRUE(WaitForCount(log2, "has read its 3 files of the 6 listed", 2, 120)) << ReadAll(log2);
  ASSERT_EQ(::kill(again.pid, SIGTERM), 0);
  ASSERT_EQ(WaitProcess(&again, 120), 0) << ReadAll(log2);
  out = ReadAll(log2);
  EXPECT_NE(out.find("training resumes at step"), std::string::npos) << out;
  for (int i = 4; i < 6; ++i) {
    EXPECT_EQ(Count(out, absl::StrCat("replica ", i % 2, " of 2 opens ", Part(i), " in epoch 1")),
              1)
        << out;
  }
  EXPECT_NE(out.find("Exported the model for serving"), std::string::npos) << out;
}

// The stream to learn from: pstrain-data writes a file of a drifting click
// log every --every seconds, each with its planted AUC and the first file's
// model's AUC on it (which falls as the ids drift).
TEST_F(OnlineClusterTest, SyntheticCtrStreamWritesADriftingLog) {
  const std::string stream = dir_ + "/stream";
  testing_util::ProcessResult r = testing_util::RunProcess(
      {kBin + "/pstrain-data", "synthetic-ctr", "--stream", stream, "--examples", "5000", "--every",
       "0.1", "--drift", "0.3", "--count", "4", "--gzip"},
      120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::regex line(
      "shard ([0-9]+): 5000 examples to [^;]*part-0000[0-9].tsv.gz; planted AUC "
      "([0-9.]+) \\(the first shard's model: ([0-9.]+)\\)");
  std::vector<double> planted, first;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), line);
       it != std::sregex_iterator(); ++it) {
    planted.push_back(std::stod((*it)[2]));
    first.push_back(std::stod((*it)[3]));
  }
  ASSERT_EQ(planted.size(), 4u) << r.output;
  EXPECT_EQ(planted[0], first[0]);
  EXPECT_LT(first[3], planted[3] - 0.05) << r.output;
  for (int k = 0; k < 4; ++k) {
    EXPECT_TRUE(Env::Default()->FileExists(absl::StrCat(stream, "/part-0000", k, ".tsv.gz")));
  }
  // Nothing else is left in the directory (the files were written aside).
  absl::StatusOr<std::vector<std::string>> names = Env::Default()->ListDir(stream);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names->size(), 4u);
}

}  // namespace
}  // namespace pstrain
