// Checkpoints with real processes on loopback: a job SIGKILLed at random
// points resumes from its last committed checkpoint, a kill in the middle of
// a save leaves the previous checkpoint usable, SIGTERM to the launcher saves
// and exits 0, a finished job is not trained again, a damaged newest
// checkpoint is skipped, and a checkpoint of 1 ps restores on 2.
#include <signal.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "io/checkpoint.h"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using testing_util::Background;
using testing_util::ProcessResult;
using testing_util::ReadAll;
using testing_util::RunProcess;
using testing_util::StartProcess;
using testing_util::WaitForText;
using testing_util::WaitProcess;

const std::string kBin = PSTRAIN_BIN_DIR;

// The value of the first group of `pattern` in `text`'s last match, or -1.
double LastMatch(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  double value = -1;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    value = std::stod((*it)[1]);
  }
  return value;
}

class CheckpointClusterTest : public testing_util::ClusterTestBase {
 protected:
  CheckpointClusterTest() : ClusterTestBase("ckpt") {}

  std::string WriteConfig(int ps, int workers, const std::string& update, int train_steps,
                          const std::string& extra = "") {
    return WriteClusterConfig(
        {.ps = ps,
         .workers = workers,
         .training =
             absl::StrCat("  data_dir: ", data_, "\n  job_dir: ", job_dir(), "\n  update: ", update,
                          "\n  batch_size: 20\n  train_steps: ", train_steps,
                          "\n  eval_steps: 0\n  log_every_n_steps: 1\n  chief_trains: false",
                          "\n  sync_timeout: 3\n  startup_timeout: 60\n  threads: 1\n", extra),
         .file = absl::StrCat("cluster-", ++configs_, ".yaml")});
  }

  // Starts every task of `config` as its own process (no launcher), logs
  // named after the round.
  std::vector<Background> StartAll(const std::string& config, int ps, int workers, int round) {
    std::vector<Background> procs;
    auto start = [&](const std::string& binary, const std::string& job, int index) {
      procs.push_back(StartProcess({kBin + "/" + binary, "--config=" + config, "--job_name=" + job,
                                    absl::StrCat("--task_index=", index)},
                                   JoinPath(dir_, absl::StrCat(job, index, "-", round, ".log"))));
    };
    for (int i = 0; i < ps; ++i) start("pstrain-ps", "ps", i);
    start("pstrain-chief", "chief", 0);
    for (int i = 0; i < workers; ++i) start("pstrain-worker", "worker", i);
    return procs;
  }

  // The newest checkpoint that exists (its index is written last), or -1.
  int64_t NewestCheckpoint() {
    absl::StatusOr<std::vector<int64_t>> steps = ListCheckpointSteps(Env::Default(), job_dir());
    return steps.ok() && !steps->empty() ? steps->front() : -1;
  }

  // Names of the temp files in the job dir, space-separated.
  std::string TempFiles() {
    absl::StatusOr<std::vector<std::string>> names = Env::Default()->ListDir(job_dir());
    std::string temps;
    if (!names.ok()) return temps;
    for (const std::string& n : *names) {
      if (n.find(".tmp.") != std::string::npos) temps += n + " ";
    }
    return temps;
  }
  bool TempFilesPresent() { return !TempFiles().empty(); }

  int configs_ = 0;
};

TEST_F(CheckpointClusterTest, SigkillEverythingAtRandomThenResumeFromTheLastCheckpoint) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  const int kTrainSteps = 100;
  const std::string config = WriteConfig(1, 2, "sync", kTrainSteps, "  checkpoint_steps: 4\n");
  int64_t committed = -1;
  for (int round = 0; round < 3; ++round) {
    std::vector<Background> procs = StartAll(config, 1, 2, round);
    Background& chief = procs[1];
    if (committed >= 0) {
      // Resumed exactly where the last committed checkpoint left off.
      ASSERT_TRUE(WaitForText(chief.log_path, "training resumes at step", 60))
          << ReadAll(chief.log_path);
      EXPECT_NE(ReadAll(chief.log_path)
                    .find(absl::StrCat("model.ckpt-", committed, ": global step ", committed, " ")),
                std::string::npos)
          << ReadAll(chief.log_path);
    }
    // Kill at a random point after at least one more checkpoint.
    ASSERT_TRUE(WaitForText(chief.log_path, "Saving checkpoints for", 120))
        << ReadAll(chief.log_path);
    absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(0, 1500)(rng)));
    for (Background& p : procs) ::kill(p.pid, SIGKILL);
    for (Background& p : procs) WaitProcess(&p, 10);
    const int64_t newest = NewestCheckpoint();
    ASSERT_GT(newest, committed) << "no new checkpoint in round " << round;
    ASSERT_LT(newest, kTrainSteps) << "the job finished before the kill; nothing to test";
    committed = newest;
    // The checkpoint verifies (every shard file against the index's CRC).
    ProcessResult check = RunProcess({kBin + "/pstrain-ckpt", job_dir()}, 60);
    EXPECT_EQ(check.exit_code, 0) << check.output;
  }
  // The last start runs to the end.
  std::vector<Background> procs = StartAll(config, 1, 2, 3);
  for (Background& p : procs) EXPECT_EQ(WaitProcess(&p, 240), 0) << ReadAll(p.log_path);
  const std::string chief_log = ReadAll(procs[1].log_path);
  EXPECT_NE(chief_log.find(absl::StrCat("model.ckpt-", committed, ": global step ", committed)),
            std::string::npos)
      << chief_log;
  // The workers continued counting from the checkpoint, not from 0.
  const std::string worker_log = ReadAll(procs[2].log_path);
  const double first_step =
      LastMatch(worker_log.substr(0, worker_log.find("loss =") + 200), R"(step = ([0-9]+), loss)");
  EXPECT_GT(first_step, committed) << worker_log;
  EXPECT_GT(LastMatch(chief_log, absl::StrCat("Saving dict for global step ", kTrainSteps,
                                              ": accuracy = ([0-9.]+)")),
            0.8)
      << chief_log;
  EXPECT_TRUE(Env::Default()->FileExists(CompletionMarkerPath(job_dir())));
}

TEST_F(CheckpointClusterTest, SigkillDuringASaveLeavesThePreviousCheckpointUsable) {
  // A checkpoint every step: saves run back to back, and the kill comes the
  // moment a shard file is being written (its temp file exists).
  const std::string config = WriteConfig(1, 1, "async", 100000, "  checkpoint_steps: 1\n");
  std::vector<Background> procs = StartAll(config, 1, 1, 0);
  ASSERT_TRUE(WaitForText(procs[1].log_path, "Saving checkpoints for", 120))
      << ReadAll(procs[1].log_path);
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (!TempFilesPresent() && absl::Now() < give_up) absl::SleepFor(absl::Microseconds(200));
  ASSERT_TRUE(TempFilesPresent()) << "never caught a save in progress";
  for (Background& p : procs) ::kill(p.pid, SIGKILL);
  for (Background& p : procs) WaitProcess(&p, 10);
  const int64_t newest = NewestCheckpoint();
  ASSERT_GE(newest, 0);
  ProcessResult check = RunProcess({kBin + "/pstrain-ckpt", job_dir()}, 60);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  // A restart resumes from it (and a later save clears the temp files).
  const std::string resume = WriteConfig(1, 1, "async", static_cast<int>(newest) + 5);
  procs = StartAll(resume, 1, 1, 1);
  for (Background& p : procs) EXPECT_EQ(WaitProcess(&p, 180), 0) << ReadAll(p.log_path);
  EXPECT_NE(ReadAll(procs[1].log_path)
                .find(absl::StrCat("model.ckpt-", newest, ": global step ", newest)),
            std::string::npos)
      << ReadAll(procs[1].log_path);
  EXPECT_EQ(TempFiles(), "");
}

TEST_F(CheckpointClusterTest, SigtermToTheLauncherSavesAndAFinishedJobIsNotTrainedAgain) {
  const std::string config = WriteConfig(1, 2, "sync", 100000);
  const std::string log = JoinPath(dir_, "launch.log");
  Background launcher = StartProcess({kBin + "/pstrain-launch", "--config=" + config}, log);
  ASSERT_TRUE(WaitForText(log, "step = 8,", 120)) << ReadAll(log);
  const absl::Time sent = absl::Now();
  ASSERT_EQ(::kill(launcher.pid, SIGTERM), 0);
  EXPECT_EQ(WaitProcess(&launcher, 60), 0) << ReadAll(log);
  EXPECT_LT(absl::Now() - sent, absl::Seconds(25)) << "slower than shutdown_grace_secs";
  std::string out = ReadAll(log);
  EXPECT_NE(out.find("all 4 processes exited 0"), std::string::npos) << out;
  const double saved = LastMatch(out, R"(checkpoint saved at global step ([0-9]+))");
  ASSERT_GT(saved, 0) << out;
  EXPECT_EQ(NewestCheckpoint(), static_cast<int64_t>(saved));
  EXPECT_FALSE(Env::Default()->FileExists(CompletionMarkerPath(job_dir())));

  // Restarted, it resumes at saved + 1 and finishes 5 steps later.
  const int target = static_cast<int>(saved) + 5;
  ProcessResult r = RunProcess(
      {kBin + "/pstrain-launch", "--config=" + config, absl::StrCat("--train_steps=", target)},
      180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(absl::StrCat("training resumes at step ", saved + 1)), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(absl::StrCat("Saving dict for global step ", target)), std::string::npos)
      << r.output;
  EXPECT_TRUE(Env::Default()->FileExists(CompletionMarkerPath(job_dir())));

  // Once more: the job is complete, every process says so and exits 0.
  r = RunProcess(
      {kBin + "/pstrain-launch", "--config=" + config, absl::StrCat("--train_steps=", target)}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("already finished"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step = "), std::string::npos) << r.output;
}

TEST_F(CheckpointClusterTest, ADamagedNewestCheckpointIsSkippedAndOnePsRestoresOnTwo) {
  // 1 ps trains 12 steps: checkpoints 6 and 12, evaluation at 12.
  std::string config = WriteConfig(1, 1, "sync", 12, "  checkpoint_steps: 6\n");
  ProcessResult r = RunProcess({kBin + "/pstrain-launch", "--config=" + config}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t at = r.output.find("Saving dict for global step 12:");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string eval12 = r.output.substr(at, r.output.find('\n', at) - at);
  // "... loss = L (T s of training)": the time differs between runs.
  const std::string eval12_values = eval12.substr(0, eval12.find(" ("));
  ASSERT_EQ(NewestCheckpoint(), 12);

  // The same parameters restored on 2 ps evaluate the same, to the last digit.
  ASSERT_TRUE(Env::Default()->DeleteFile(CompletionMarkerPath(job_dir())).ok());
  config = WriteConfig(2, 1, "sync", 12, "  checkpoint_steps: 6\n");
  r = RunProcess({kBin + "/pstrain-launch", "--config=" + config}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(written by 1 ps, restored on 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(eval12_values), std::string::npos) << eval12_values << "\n" << r.output;

  // A flipped bit in checkpoint 12's shard: restore skips it, naming it, and
  // uses checkpoint 6.
  ASSERT_TRUE(Env::Default()->DeleteFile(CompletionMarkerPath(job_dir())).ok());
  const std::string shard = JoinPath(job_dir(), "model.ckpt-12.shard-0-of-1");
  std::string bytes = *Env::Default()->ReadFile(shard);
  bytes[bytes.size() / 2] ^= 0x04;
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(shard, bytes).ok());
  config = WriteConfig(1, 1, "sync", 14, "  checkpoint_steps: 6\n");
  r = RunProcess({kBin + "/pstrain-launch", "--config=" + config}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("skipping damaged checkpoint model.ckpt-12"), std::string::npos)
      << r.output;
  // The checkpoint before it (at step 6 or 7: a sync save is taken at the
  // next step boundary after the chief saw the step pass 5).
  const double restored = LastMatch(r.output, R"(model\.ckpt-[0-9]+: global step ([0-9]+) )");
  EXPECT_GE(restored, 6) << r.output;
  EXPECT_LT(restored, 12) << r.output;
  EXPECT_NE(r.output.find("Saving dict for global step 14"), std::string::npos) << r.output;

  // A checkpoint of another model shape is refused, naming the variable.
  ASSERT_TRUE(Env::Default()->DeleteFile(CompletionMarkerPath(job_dir())).ok());
  const std::string index_path = JoinPath(job_dir(), "model.ckpt-14.index");
  absl::StatusOr<CheckpointIndex> index = ReadCheckpointIndex(Env::Default(), index_path);
  ASSERT_TRUE(index.ok()) << index.status();
  index->mutable_variables(0)->set_shape(0, 3);
  ASSERT_TRUE(WriteCheckpointIndex(Env::Default(), index_path, *index).ok());
  config = WriteConfig(1, 1, "sync", 20);
  r = RunProcess({kBin + "/pstrain-launch", "--config=" + config}, 120);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("variable " + index->variables(0).name() + " has shape [3,"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace pstrain
