// Runs the real pstrain-worker binary as a local trainer on small idx files
// (and gzip'd Criteo TSV shards) written by the test, and checks its exit
// status and what it prints.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "testing/data_test_util.h"
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

// `n` Criteo TSV lines: C1 takes 20 ids, half of them "good" (label 1 with
// probability 0.9, else 0.1); C2 and C3 and the 13 counts are noise, and
// the other 23 fields are empty.
std::string CriteoLines(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> id(0, 19), count(0, 50);
  std::uniform_real_distribution<double> coin(0, 1);
  std::string text;
  for (int i = 0; i < n; ++i) {
    const int c1 = id(rng);
    const bool click = coin(rng) < (c1 % 2 == 0 ? 0.9 : 0.1);
    absl::StrAppend(&text, click ? "1" : "0");
    for (int d = 0; d < 13; ++d) absl::StrAppend(&text, "\t", count(rng));
    absl::StrAppend(&text, "\t", absl::StrFormat("%08x", 0x1000 + c1),
                    absl::StrFormat("\t%08x\t%08x", 0x2000 + id(rng), 0x3000 + id(rng)));
    for (int c = 3; c < 26; ++c) absl::StrAppend(&text, "\t");
    absl::StrAppend(&text, "\n");
  }
  return text;
}

// Wide & Deep over C1..C3 of 13 counts, with dynamic tables.
constexpr char kWideAndDeep[] = R"(name: wide_and_deep
input: [13]
head: binary
layers:
  - embedding: {feature: C1, dim: 4, dynamic: true, name: emb_C1}
  - embedding: {feature: C2, dim: 4, dynamic: true, name: emb_C2}
  - embedding: {feature: C3, dim: 4, dynamic: true, name: emb_C3}
  - concat: {input: input, inputs: [emb_C1, emb_C2, emb_C3]}
  - dense: {units: 8, activation: relu}
  - dense: {units: 1, name: deep_logit}
  - linear: {features: [C1, C2, C3], dynamic: true, name: wide}
  - add: {input: deep_logit, inputs: [wide]}
)";

class LocalClickModelTest : public LocalTrainerTest {
 protected:
  void SetUp() override {
    LocalTrainerTest::SetUp();
    Env* env = Env::Default();
    shards_ = JoinPath(base_, "ctr");
    ASSERT_TRUE(env->CreateDirs(shards_).ok());
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(env->WriteFileAtomic(absl::StrCat(shards_, "/day-", i, ".tsv.gz"),
                                       testutil::Gzip(CriteoLines(2000, 10 + i)))
                      .ok());
    }
    test_ = JoinPath(base_, "test.tsv");
    ASSERT_TRUE(env->WriteFileAtomic(test_, CriteoLines(1000, 20)).ok());
    spec_ = JoinPath(base_, "wide_and_deep.yaml");
    ASSERT_TRUE(env->WriteFileAtomic(spec_, kWideAndDeep).ok());
  }

  // pstrain-worker without a cluster on the shards, the job dir and more flags.
  RunResult Train(std::vector<std::string> more) {
    std::vector<std::string> args = {PSTRAIN_WORKER_BIN,
                                     "--model=" + spec_,
                                     "--train_files=" + shards_ + "/day-*.tsv.gz",
                                     "--eval_files=" + test_,
                                     "--job_dir=" + JoinPath(base_, "ctr_job"),
                                     "--batch_size=50",
                                     "--eval_batch_size=500",
                                     "--shuffle_buffer=1000",
                                     "--learning_rate=0.01",
                                     "--embedding_learning_rate=0.1",
                                     "--log_every_n_steps=50",
                                     "--threads=2"};
    args.insert(args.end(), more.begin(), more.end());
    return RunProcess(args);
  }

  std::string shards_, test_, spec_;
};

// Issue 52: --train_files without a cluster streams those files (not
// data_dir, here the default Fashion-MNIST one), as a cluster replica does,
// and evaluates on --eval_files.
TEST_F(LocalClickModelTest, TrainsWideAndDeepFromGzippedTsvShards) {
  RunResult r = Train({"--train_steps=200"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int i = 0; i < 3; ++i) {
    EXPECT_NE(r.output.find(absl::StrCat("opens ", shards_, "/day-", i, ".tsv.gz")),
              std::string::npos)
        << r.output;
  }
  std::smatch m;
  const std::regex line(
      "Saving dict for global step 200: accuracy = ([0-9.]+), auc = ([0-9.]+), global_step = "
      "200, loss = ([0-9.]+)");
  ASSERT_TRUE(std::regex_search(r.output, m, line)) << r.output;
  // The planted rule's AUC is 0.9 (chance 0.5); the test set's 1000 examples.
  EXPECT_GT(std::stod(m[2]), 0.8) << r.output;
}

TEST_F(LocalClickModelTest, APatternThatMatchesNothingIsNamed) {
  const std::string missing = shards_ + "/week-*.tsv.gz";
  RunResult r = Train({"--train_steps=5", "--train_files=" + missing});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(missing), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--train_files"), std::string::npos) << r.output;
  const std::string no_test = base_ + "/nothing-*.tsv";
  r = Train({"--train_steps=5", "--eval_files=" + no_test});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(no_test), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--eval_files"), std::string::npos) << r.output;
}

// A key a job without a cluster cannot honour (it keeps no checkpoints,
// follows no new files) is refused, naming it, rather than ignored.
TEST_F(LocalClickModelTest, AKeyItCannotHonourIsRefusedNamingIt) {
  for (const std::string flag : {"--checkpoint_steps=50", "--follow=true", "--exports_to_keep=2",
                                 "--eval_steps=100", "--wire_format=float32"}) {
    RunResult r = Train({"--train_steps=5", flag});
    EXPECT_EQ(r.exit_code, 2) << flag << "\n" << r.output;
    EXPECT_NE(r.output.find(flag.substr(0, flag.find('='))), std::string::npos) << flag << "\n"
                                                                                << r.output;
    EXPECT_NE(r.output.find("without a cluster"), std::string::npos) << flag << "\n" << r.output;
  }
}

// A CSV column read as a number and bucketized (csv_schema `bucketize`):
// its bucket ids feed an embedding, a linear layer and a cross. The clicks
// are planted on the age band (odd or even bucket of 25, 35, 45, 55, 65)
// times the city's half: neither the age nor the city predicts alone, the
// cross of the bucketized age and the city does (its AUC 0.92).
std::string BucketCsv(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> age(18, 79), city(0, 9);
  std::uniform_real_distribution<double> u(0, 1);
  const double bounds[] = {25, 35, 45, 55, 65};
  std::string text = "clicked,city,age\n";
  for (int i = 0; i < n; ++i) {
    const int a = age(rng), c = city(rng);
    int bucket = 0;
    for (double b : bounds) bucket += a >= b;
    const double s = (bucket % 2 == 0 ? 1 : -1) * (c < 5 ? 1 : -1);
    const int clicked = u(rng) < 1 / (1 + std::exp(-2.5 * s)) ? 1 : 0;
    absl::StrAppend(&text, clicked, ",city", c, ",", a, "\n");
  }
  return text;
}

TEST_F(LocalTrainerTest, BucketizedColumnsFeedAnEmbeddingALinearLayerAndACross) {
  Env* env = Env::Default();
  const std::string schema = JoinPath(base_, "schema.yaml");
  ASSERT_TRUE(env->WriteFileAtomic(schema,
                                   "csv:\n  label: clicked\n  numeric:\n"
                                   "    - {name: age, transform: standardize, mean: 49, std: 18}\n"
                                   "  categorical:\n"
                                   "    - {name: age, bucketize: [25, 35, 45, 55, 65]}\n"
                                   "    - {name: city, hash_buckets: 100}\n")
                  .ok());
  const std::string spec = JoinPath(base_, "buckets.yaml");
  ASSERT_TRUE(env->WriteFileAtomic(spec,
                                   "name: buckets\ninput: [1]\nhead: binary\nlayers:\n"
                                   "  - embedding: {feature: age, dim: 4, buckets: 6, name: emb}\n"
                                   "  - concat: {input: input, inputs: [emb]}\n"
                                   "  - dense: {units: 8, activation: relu}\n"
                                   "  - dense: {units: 1, name: deep}\n"
                                   "  - linear: {features: [age, city], crosses: [[age, city]], "
                                   "buckets: 100, name: wide}\n"
                                   "  - add: {input: deep, inputs: [wide]}\n")
                  .ok());
  const std::string train = JoinPath(base_, "train.csv"), test = JoinPath(base_, "test.csv");
  ASSERT_TRUE(env->WriteFileAtomic(train, BucketCsv(6000, 3)).ok());
  ASSERT_TRUE(env->WriteFileAtomic(test, BucketCsv(2000, 4)).ok());
  RunResult r = RunProcess(
      {PSTRAIN_WORKER_BIN, "--model=" + spec, "--csv_schema=" + schema, "--train_files=" + train,
       "--eval_files=" + test, "--job_dir=" + JoinPath(base_, "bucket_job"), "--num_epochs=10",
       "--train_steps=0", "--batch_size=50", "--learning_rate=0.01",
       "--embedding_learning_rate=0.1", "--log_every_n_steps=100", "--threads=2"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  const std::regex line("Saving dict for global step [0-9]+: accuracy = [0-9.]+, auc = ([0-9.]+)");
  ASSERT_TRUE(std::regex_search(r.output, m, line)) << r.output;
  // The planted AUC is 0.92 (0.896 here). A model of the same data without
  // the buckets (a dense age and a linear city) reaches 0.57.
  EXPECT_GT(std::stod(m[1]), 0.85) << r.output;
}

}  // namespace
}  // namespace pstrain
