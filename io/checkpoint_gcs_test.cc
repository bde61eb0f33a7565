// Checkpoint files through the Cloud Storage Env (cloud/gcs_env.h) against a
// fake GCS. Moved from cloud/gcs_env_test.cc unchanged, so cloud's tests do not
// reach up into io.
#include <memory>

#include "cloud/gcs_env.h"
#include "gtest/gtest.h"
#include "io/checkpoint.h"
#include "tests/fakes/fake_gcs.h"

namespace pstrain {
namespace {

using testing_util::FakeGcs;

class GcsEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(gcs_.Start(), 0);
    gcs_.CreateBucket("bkt");
    transport_ = NewCurlTransport();
    GcsOptions options;
    options.endpoint = gcs_.endpoint();
    options.retry_budget = absl::Seconds(3);
    env_ = std::make_unique<GcsEnv>(transport_.get(), options);
  }

  FakeGcs gcs_;
  std::unique_ptr<HttpTransport> transport_;
  std::unique_ptr<GcsEnv> env_;
};

// A checkpoint committed in a bucket: shard and index objects, then the
// `checkpoint` object; no temp object is left and every file reads back.
TEST_F(GcsEnvTest, CheckpointFilesGoThroughTheEnv) {
  SchemeRoutingEnv routing(Env::Default(), env_.get());
  CheckpointState state;
  state.model_checkpoint_path = "model.ckpt-5";
  state.all_model_checkpoint_paths = {"model.ckpt-5"};
  ASSERT_TRUE(
      routing.WriteFileAtomic("gs://bkt/job/checkpoint", FormatCheckpointState(state)).ok());
  ASSERT_TRUE(WriteCompletionMarker(&routing, "gs://bkt/job", 5, "model.ckpt-5").ok());
  EXPECT_EQ(CompletionMarkerStep(*ReadCompletionMarker(&routing, "gs://bkt/job")), 5);
  EXPECT_TRUE(JobAlreadyFinished(&routing, "gs://bkt/job", 5));
  EXPECT_FALSE(JobAlreadyFinished(&routing, "gs://bkt/job", 6));
  // Local paths still go to the local Env.
  EXPECT_FALSE(routing.FileExists("/nonexistent/pstrain/x"));
}

}  // namespace
}  // namespace pstrain
