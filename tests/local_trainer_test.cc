// Runs the real pstrain-worker binary as a local trainer on small idx files
// written by the test, and checks its exit status and what it prints.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "common/env.h"
#include "gtest/gtest.h"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using RunResult = testing_util::ProcessResult;

RunResult RunProcess(const std::vector<std::string>& args) {
  return testing_util::RunProcess(args, 300);
}

void WriteQuadrantData(const std::string& dir, const std::string& prefix, int n, unsigned seed) {
  ASSERT_TRUE(testing_util::WriteQuadrantData(dir, prefix, n, seed)) << dir;
}

class LocalTrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = testing_util::MakeTempDir("local_trainer");
    data_ = JoinPath(base_, "data");
    WriteQuadrantData(data_, "train", 600, 1);
    WriteQuadrantData(data_, "t10k", 200, 2);
  }
  void TearDown() override { std::system(("rm -rf '" + base_ + "'").c_str()); }

  std::string base_, data_;
};

TEST_F(LocalTrainerTest, TrainsEvaluatesAndExitsZero) {
  const std::string job = JoinPath(base_, "job");
  // Hyphenated spellings, as TensorFlow tutorials write them.
  RunResult r = RunProcess({PSTRAIN_WORKER_BIN, "--data-dir=" + data_, "--job-dir=" + job,
                            "--train-steps=60", "--batch-size=20", "--log_every_n_steps=20",
                            "--threads=2", "--trace-steps=30:31"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step = 20, loss = "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("examples/sec = "), std::string::npos) << r.output;
  std::smatch m;
  const std::regex line(
      "Saving dict for global step 60: accuracy = ([0-9.]+), global_step = 60, loss = ([0-9.]+)");
  ASSERT_TRUE(std::regex_search(r.output, m, line)) << r.output;
  EXPECT_GT(std::stod(m[1]), 0.8) << r.output;  // chance is 0.25
  EXPECT_TRUE(Env::Default()->FileExists(job));
  // --trace_steps in single-process mode: the two steps' phases and layers.
  absl::StatusOr<std::string> trace =
      Env::Default()->ReadFile(JoinPath(job, "plugins/profile/steps_30_31/worker-0.trace.json"));
  ASSERT_TRUE(trace.ok()) << trace.status() << "\n" << r.output;
  EXPECT_NE(trace->find("\"forward conv2d\""), std::string::npos);
  EXPECT_NE(trace->find("\"train step\""), std::string::npos);
  EXPECT_NE(trace->find("\"step\":31"), std::string::npos);
  EXPECT_EQ(trace->find("\"step\":32"), std::string::npos);
}

TEST_F(LocalTrainerTest, MissingDataNamesTheDirectory) {
  RunResult r = RunProcess({PSTRAIN_WORKER_BIN, "--data_dir=" + base_ + "/nothing-here",
                            "--job_dir=" + JoinPath(base_, "job2"), "--train_steps=5"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(base_ + "/nothing-here"), std::string::npos) << r.output;
}

TEST_F(LocalTrainerTest, BadFlagsExitTwoWithAReason) {
  RunResult r = RunProcess({PSTRAIN_WORKER_BIN, "--data_dir=" + data_, "--job_dir=" + base_,
                            "--train_steps=5", "--optimizer=adagrad"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--optimizer"), std::string::npos) << r.output;
  r = RunProcess(
      {PSTRAIN_WORKER_BIN, "--data_dir=" + data_, "--job_dir=" + base_, "--train_steps=0"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--train_steps"), std::string::npos) << r.output;
  r = RunProcess({PSTRAIN_WORKER_BIN, "--data_dir=" + data_, "--train_steps=5"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--job_dir"), std::string::npos) << r.output;
}

TEST_F(LocalTrainerTest, DamagedDataFileIsAnErrorNamingIt) {
  const std::string bad = JoinPath(base_, "bad");
  WriteQuadrantData(bad, "train", 50, 3);
  WriteQuadrantData(bad, "t10k", 20, 4);
  auto images = Env::Default()->ReadFile(JoinPath(bad, "train-images-idx3-ubyte"));
  ASSERT_TRUE(images.ok());
  ASSERT_TRUE(Env::Default()
                  ->WriteFileAtomic(JoinPath(bad, "train-images-idx3-ubyte"),
                                    images->substr(0, images->size() / 2))
                  .ok());
  RunResult r = RunProcess(
      {PSTRAIN_WORKER_BIN, "--data_dir=" + bad, "--job_dir=" + base_ + "/job3", "--train_steps=5"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("train-images-idx3-ubyte"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace pstrain
