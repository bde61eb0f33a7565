// A job whose data dir and job dir are in a Cloud Storage bucket
// (--job-dir gs://bucket/job, as TensorFlow users pass it): real processes on
// loopback against our fake Cloud Storage server, found through
// STORAGE_EMULATOR_HOST as Google's client libraries find an emulator.
#include <stdlib.h>

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "testing/data_test_util.h"
#include "tests/fakes/fake_gcs.h"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using testing_util::FakeGcs;
using testing_util::ProcessResult;
using testing_util::RunProcess;

const std::string kBin = PSTRAIN_BIN_DIR;

class GcsJobTest : public testing_util::ClusterTestBase {
 protected:
  GcsJobTest() : ClusterTestBase("gcsjob") {}

  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(ClusterTestBase::SetUp());
    ASSERT_GT(gcs_.Start(), 0);
    gcs_.CreateBucket("bkt");
    setenv("STORAGE_EMULATOR_HOST", gcs_.endpoint().c_str(), 1);
    // The data, uploaded as a user would (gsutil cp data/* gs://bkt/data/).
    const std::vector<std::string> names = *Env::Default()->ListDir(data_);
    for (const std::string& name : names) {
      gcs_.PutObject("bkt", "data/" + name, *Env::Default()->ReadFile(JoinPath(data_, name)));
    }
    config_ = WriteClusterConfig(
        {.training = "  update: sync\n  batch_size: 20\n  eval_steps: 0\n"
                     "  checkpoint_steps: 10\n  log_every_n_steps: 10\n  threads: 1\n"});
  }
  void TearDown() override {
    unsetenv("STORAGE_EMULATOR_HOST");
    ClusterTestBase::TearDown();
  }

  ProcessResult Launch(int train_steps) {
    return RunProcess({kBin + "/pstrain-launch", "--config=" + config_, "--job-dir=gs://bkt/job",
                       "--data-dir=gs://bkt/data", absl::StrCat("--train-steps=", train_steps)},
                      300);
  }

  FakeGcs gcs_;
  std::string config_;
};

TEST_F(GcsJobTest, TrainsFromABucketIntoABucketAndResumesFromIt) {
  ProcessResult r = Launch(20);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Saving dict for global step 20"), std::string::npos) << r.output;
  const std::set<std::string> names = gcs_.ObjectNames("bkt");
  for (const char* want :
       {"job/checkpoint", "job/model.ckpt-20.index", "job/model.ckpt-20.shard-0-of-1",
        "job/COMPLETED", "job/launch-config.yaml"}) {
    EXPECT_EQ(names.count(want), 1u) << want;
  }
  bool events = false, eval_events = false;
  for (const std::string& n : names) {
    EXPECT_EQ(n.find(".tmp"), std::string::npos) << "temp object left: " << n;
    events = events || absl::StartsWith(n, "job/events.out.tfevents.");
    eval_events = eval_events || absl::StartsWith(n, "job/eval/events.out.tfevents.");
  }
  EXPECT_TRUE(events);
  EXPECT_TRUE(eval_events);
  EXPECT_NE(gcs_.GetObject("bkt", "job/checkpoint").find("model.ckpt-20"), std::string::npos);

  // The tools read the bucket too.
  ProcessResult ckpt = RunProcess({kBin + "/pstrain-ckpt", "gs://bkt/job"}, 60);
  EXPECT_EQ(ckpt.exit_code, 0) << ckpt.output;
  EXPECT_NE(ckpt.output.find("global step: 20\n"), std::string::npos) << ckpt.output;
  ProcessResult ev = RunProcess({kBin + "/pstrain-events", "gs://bkt/job"}, 60);
  EXPECT_EQ(ev.exit_code, 0) << ev.output;
  EXPECT_NE(ev.output.find("accuracy"), std::string::npos) << ev.output;

  // Trained further from the bucket's checkpoint.
  r = Launch(30);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("training resumes at step 21"), std::string::npos) << r.output;
  EXPECT_NE(gcs_.GetObject("bkt", "job/COMPLETED").find("global_step: 30"), std::string::npos);
}

TEST_F(GcsJobTest, AMissingBucketOrObjectIsAClearError) {
  ProcessResult r = RunProcess(
      {kBin + "/pstrain-launch", "--config=" + config_, "--job-dir=gs://no-such-bucket/job",
       "--data-dir=gs://bkt/data", "--train-steps=5"},
      120);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("gs://no-such-bucket/job"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bucket does not exist"), std::string::npos) << r.output;

  r = RunProcess({kBin + "/pstrain-launch", "--config=" + config_, "--job-dir=gs://bkt/job2",
                  "--data-dir=gs://bkt/nothing-here", "--train-steps=5"},
                 120);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("gs://bkt/nothing-here"), std::string::npos) << r.output;
}

// Streamed input from a bucket (issue 40): 16 gzip'd Criteo-like shards in
// gs://; each of the 3 training replicas opens only its shards (every third
// of the epoch's shuffled order) and
// reads them in ranged pieces; with num_epochs 1 the job ends with its
// input, its job dir in the bucket too.
TEST_F(GcsJobTest, ReplicasStreamTheirShareOfSixteenGzipShardsFromABucket) {
  for (int s = 0; s < 16; ++s) {
    std::string text;
    for (int i = 0; i < 150; ++i) {
      const int id = s * 150 + i;
      absl::StrAppend(&text, id % 3 == 0 ? 1 : 0, "\t", id % 10);
      for (int d = 1; d < 13; ++d) text += "\t";
      absl::StrAppend(&text, "\t", absl::StrFormat("%08x", id % 50 + 1));
      for (int c = 1; c < 26; ++c) text += "\t";
      text += "\n";
    }
    gcs_.PutObject("bkt", absl::StrFormat("ctr/part-%05d-of-00016.tsv.gz", s),
                   testutil::Gzip(text));
  }
  const std::string spec = dir_ + "/tiny_ctr.yaml";
  ASSERT_TRUE(Env::Default()
                  ->WriteFileAtomic(spec,
                                    "name: tiny_ctr\ninput: [13]\nhead: binary\nlayers:\n"
                                    "  - embedding: {feature: C1, dim: 4, dynamic: true, "
                                    "combiner: sum, name: emb}\n"
                                    "  - concat: {input: input, inputs: [emb]}\n"
                                    "  - dense: {units: 1}\n")
                  .ok());
  const std::string config = WriteClusterConfig(
      {.workers = 2,
       .training = "  update: sync\n  batch_size: 20\n  eval_steps: 0\n  log_every_n_steps: 10\n"
                   "  threads: 1\n  shuffle_buffer: 100\n",
       .file = "ctr.yaml"});
  ProcessResult r =
      RunProcess({kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec,
                  "--job-dir=gs://bkt/ctrjob", "--train_files=gs://bkt/ctr/part-*-of-00016.tsv.gz",
                  "--eval_files=gs://bkt/ctr/part-00000-of-00016.tsv.gz", "--num_epochs=1"},
                 300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(gcs_.HasObject("bkt", "ctrjob/COMPLETED")) << r.output;
  // Replica 0 (the chief) has 6 shards of 150 examples: 45 batches of 20.
  EXPECT_NE(r.output.find("Saving dict for global step 45"), std::string::npos) << r.output;
  std::map<int, std::set<int>> opened;  // replica -> shards
  int opens = 0;
  const std::regex line(
      "input: replica ([0-9]) of 3 opens gs://bkt/ctr/part-([0-9]{5})-of-00016\\.tsv\\.gz in "
      "epoch 1");
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), line);
       it != std::sregex_iterator(); ++it) {
    opened[std::stoi((*it)[1])].insert(std::stoi((*it)[2]));
    ++opens;
  }
  EXPECT_EQ(opens, 16) << r.output;  // each shard once
  // Dealt from the epoch's shuffled order (training.shuffle_files): every
  // third file of it, 6, 5 and 5 shards.
  std::set<int> all;
  for (int replica = 0; replica < 3; ++replica) {
    EXPECT_EQ(opened[replica].size(), replica == 0 ? 6u : 5u) << "replica " << replica << "\n"
                                                              << r.output;
    all.insert(opened[replica].begin(), opened[replica].end());
  }
  EXPECT_EQ(all.size(), 16u) << r.output;
}

}  // namespace
}  // namespace pstrain
