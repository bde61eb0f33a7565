// A job whose data dir and job dir are in a Cloud Storage bucket
// (--job-dir gs://bucket/job, as TensorFlow users pass it): real processes on
// loopback against our fake Cloud Storage server, found through
// STORAGE_EMULATOR_HOST as Google's client libraries find an emulator.
#include <stdlib.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "gtest/gtest.h"
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

}  // namespace
}  // namespace pstrain
