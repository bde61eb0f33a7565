// Runs the real pstrain-worker binary as a local trainer on small idx files
// written by the test, and checks its exit status and what it prints.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "common/env.h"
#include "data/test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs `args` (argv[0] is the binary) with a time limit, capturing output.
RunResult RunProcess(const std::vector<std::string>& args, int timeout_secs = 300) {
  std::string command = "timeout --kill-after=5 " + std::to_string(timeout_secs);
  for (const std::string& a : args) command += " '" + a + "'";
  command += " 2>&1";
  RunResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Quadrant images: the label (0..3) is the bright quadrant.
void WriteQuadrantData(const std::string& dir, const std::string& prefix, uint32_t n,
                       uint32_t seed) {
  std::vector<uint8_t> pixels(size_t{n} * 784, 0), labels(n);
  uint64_t x = seed;
  for (uint32_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const int q = static_cast<int>((x >> 33) % 4);
    labels[i] = static_cast<uint8_t>(q);
    for (int r = 0; r < 14; ++r) {
      for (int c = 0; c < 14; ++c) {
        pixels[size_t{i} * 784 + (r + (q / 2) * 14) * 28 + c + (q % 2) * 14] =
            static_cast<uint8_t>(128 + ((x >> ((r + c) % 32)) & 127));
      }
    }
  }
  Env* env = Env::Default();
  ASSERT_TRUE(env->CreateDirs(dir).ok());
  ASSERT_TRUE(env->WriteFileAtomic(JoinPath(dir, prefix + "-images-idx3-ubyte"),
                                   testutil::IdxImages(n, 28, 28, pixels))
                  .ok());
  ASSERT_TRUE(env->WriteFileAtomic(JoinPath(dir, prefix + "-labels-idx1-ubyte.gz"),
                                   testutil::Gzip(testutil::IdxLabels(labels)))
                  .ok());
}

class LocalTrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = JoinPath(::testing::TempDir(), "pstrain_local_trainer_" + std::to_string(::getpid()));
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
  RunResult r =
      RunProcess({PSTRAIN_WORKER_BIN, "--data-dir=" + data_, "--job-dir=" + job, "--train-steps=60",
                  "--batch-size=20", "--log_every_n_steps=20", "--threads=2"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step = 20, loss = "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("examples/sec = "), std::string::npos) << r.output;
  std::smatch m;
  const std::regex line(
      "Saving dict for global step 60: accuracy = ([0-9.]+), global_step = 60, loss = ([0-9.]+)");
  ASSERT_TRUE(std::regex_search(r.output, m, line)) << r.output;
  EXPECT_GT(std::stod(m[1]), 0.8) << r.output;  // chance is 0.25
  EXPECT_TRUE(Env::Default()->FileExists(job));
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
