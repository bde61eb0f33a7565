#include "cloud/gcs_env.h"

#include <algorithm>

#include "cloud/metadata.h"
#include "gtest/gtest.h"
#include "tests/fakes/fake_gcs.h"

namespace pstrain {
namespace {

using testing_util::FakeGcs;
using testing_util::FakeMetadata;

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

TEST_F(GcsEnvTest, WritesReadsListsRenamesAndDeletesObjects) {
  ASSERT_TRUE(env_->CreateDirs("gs://bkt/job").ok());
  const std::string binary("\0\x01\xff model bytes \n", 17);
  ASSERT_TRUE(env_->WriteFileAtomic("gs://bkt/job/a b+c.bin", binary).ok());
  EXPECT_EQ(gcs_.GetObject("bkt", "job/a b+c.bin"), binary);
  EXPECT_EQ(*env_->ReadFile("gs://bkt/job/a b+c.bin"), binary);
  EXPECT_TRUE(env_->FileExists("gs://bkt/job/a b+c.bin"));
  EXPECT_FALSE(env_->FileExists("gs://bkt/job/nothing"));
  // A "directory" exists once an object is under it.
  EXPECT_TRUE(env_->FileExists("gs://bkt/job"));
  EXPECT_TRUE(env_->FileExists("gs://bkt/job/"));
  EXPECT_FALSE(env_->FileExists("gs://bkt/jo"));

  ASSERT_TRUE(env_->WriteFileAtomic("gs://bkt/job/eval/events.1", "e").ok());
  ASSERT_TRUE(env_->WriteFileAtomic("gs://bkt/jobs-other/x", "x").ok());
  std::vector<std::string> names = *env_->ListDir("gs://bkt/job/");
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a b+c.bin", "eval"}));

  ASSERT_TRUE(env_->RenameFile("gs://bkt/job/a b+c.bin", "gs://bkt/job/final").ok());
  EXPECT_FALSE(gcs_.HasObject("bkt", "job/a b+c.bin"));
  EXPECT_EQ(gcs_.GetObject("bkt", "job/final"), binary);
  ASSERT_TRUE(env_->DeleteFile("gs://bkt/job/final").ok());
  EXPECT_TRUE(absl::IsNotFound(env_->DeleteFile("gs://bkt/job/final")));
}

// An AtomicWritableFile is one upload at Commit, with no temp object; one
// never committed uploads nothing.
TEST_F(GcsEnvTest, AnAtomicFileIsOneUploadAtCommit) {
  ASSERT_TRUE(env_->WriteFileAtomic("gs://bkt/job/f", "old").ok());
  {
    auto abandoned = env_->NewAtomicWritableFile("gs://bkt/job/f");
    ASSERT_TRUE(abandoned.ok()) << abandoned.status();
    ASSERT_TRUE((*abandoned)->Append("half").ok());
    ASSERT_TRUE((*abandoned)->Close().ok());
  }
  EXPECT_EQ(gcs_.GetObject("bkt", "job/f"), "old");
  auto file = env_->NewAtomicWritableFile("gs://bkt/job/f");
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Append("new ").ok());
  ASSERT_TRUE((*file)->Sync().ok());
  ASSERT_TRUE((*file)->Append("bytes").ok());
  EXPECT_EQ(gcs_.GetObject("bkt", "job/f"), "old");
  EXPECT_EQ(*env_->ListDir("gs://bkt/job"), std::vector<std::string>{"f"});
  ASSERT_TRUE((*file)->Commit().ok());
  EXPECT_EQ(gcs_.GetObject("bkt", "job/f"), "new bytes");
  EXPECT_TRUE(absl::IsFailedPrecondition((*file)->Commit()));
  EXPECT_TRUE(env_->SyncDir("gs://bkt/job").ok());
  EXPECT_TRUE(absl::IsInvalidArgument(env_->NewAtomicWritableFile("gs://bkt").status()));
}

// A large object is read in ranged chunks from any offset, with a server
// failure on the way retried; a missing one is NotFound at open.
TEST_F(GcsEnvTest, ObjectsAreReadInRangedChunksFromAnyOffset) {
  std::string big(GcsEnv::kReadChunkBytes * 2 + 12345, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  gcs_.PutObject("bkt", "data/part-0", big);
  gcs_.PutObject("bkt", "data/empty", "");
  for (uint64_t offset : {uint64_t{0}, uint64_t{GcsEnv::kReadChunkBytes + 7}, uint64_t{big.size()},
                          uint64_t{big.size() + 5}}) {
    absl::StatusOr<std::unique_ptr<SequentialFile>> file =
        env_->NewSequentialFile("gs://bkt/data/part-0", offset);
    ASSERT_TRUE(file.ok()) << file.status();
    std::string all, piece;
    for (int i = 0; i < 100; ++i) {
      if (i == 3) gcs_.FailNext(1, 503);
      ASSERT_TRUE((*file)->Read(1 << 20, &piece).ok());
      if (piece.empty()) break;
      all += piece;
    }
    const std::string want = offset < big.size() ? big.substr(offset) : "";
    ASSERT_EQ(all.size(), want.size()) << "from " << offset;
    EXPECT_TRUE(all == want) << "from " << offset << ": first difference at "
                             << std::mismatch(all.begin(), all.end(), want.begin()).first -
                                    all.begin();
  }
  absl::StatusOr<std::unique_ptr<SequentialFile>> empty =
      env_->NewSequentialFile("gs://bkt/data/empty", 0);
  ASSERT_TRUE(empty.ok()) << empty.status();
  std::string piece = "x";
  ASSERT_TRUE((*empty)->Read(10, &piece).ok());
  EXPECT_EQ(piece, "");
  absl::Status missing = env_->NewSequentialFile("gs://bkt/data/part-9", 0).status();
  EXPECT_TRUE(absl::IsNotFound(missing)) << missing;
  EXPECT_NE(missing.message().find("gs://bkt/data/part-9"), std::string::npos) << missing;
}

TEST_F(GcsEnvTest, ListingFollowsPages) {
  gcs_.SetPageSize(2);
  for (int i = 0; i < 7; ++i) {
    gcs_.PutObject("bkt", "dir/f" + std::to_string(i), "x");
  }
  EXPECT_EQ(env_->ListDir("gs://bkt/dir")->size(), 7u);
}

TEST_F(GcsEnvTest, ErrorsNameThePathAndWhatTheServerSaid) {
  absl::StatusOr<std::string> missing = env_->ReadFile("gs://bkt/no/such/object");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("gs://bkt/no/such/object"), std::string::npos);
  EXPECT_NE(missing.status().message().find("HTTP 404"), std::string::npos);

  absl::Status no_bucket = env_->WriteFileAtomic("gs://other-bucket/job/x", "x");
  EXPECT_TRUE(absl::IsNotFound(no_bucket)) << no_bucket;
  EXPECT_NE(no_bucket.message().find("bucket does not exist"), std::string::npos) << no_bucket;

  EXPECT_TRUE(absl::IsNotFound(env_->ListDir("gs://bkt/empty-dir").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(env_->ReadFile("gs:///x").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(env_->WriteFileAtomic("gs://bkt", "x")));
}

TEST_F(GcsEnvTest, RetriesThrottlingAndServerErrorsWithinTheBudget) {
  gcs_.FailNext(3, 503);
  ASSERT_TRUE(env_->WriteFileAtomic("gs://bkt/j/x", "data").ok());
  gcs_.FailNext(2, 429);
  EXPECT_EQ(*env_->ReadFile("gs://bkt/j/x"), "data");
  gcs_.FailNext(1000, 503);  // longer than the budget
  absl::StatusOr<std::string> r = env_->ReadFile("gs://bkt/j/x");
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("HTTP 503"), std::string::npos) << r.status();
  gcs_.FailNext(0, 503);
}

TEST_F(GcsEnvTest, AnUnreachableEndpointIsAClearError) {
  GcsOptions options;
  options.endpoint = "http://127.0.0.1:1";
  options.retry_budget = absl::Milliseconds(500);
  GcsEnv env(transport_.get(), options);
  absl::StatusOr<std::string> r = env.ReadFile("gs://bkt/x");
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("Cloud Storage at http://127.0.0.1:1 does not answer"),
            std::string::npos)
      << r.status();
}

TEST_F(GcsEnvTest, WritableFileReplacesTheObjectOnEveryFlush) {
  std::unique_ptr<WritableFile> file = *env_->NewWritableFile("gs://bkt/j/events");
  ASSERT_TRUE(file->Append("one").ok());
  ASSERT_TRUE(file->Flush().ok());
  EXPECT_EQ(gcs_.GetObject("bkt", "j/events"), "one");
  ASSERT_TRUE(file->Append("two").ok());
  EXPECT_EQ(gcs_.GetObject("bkt", "j/events"), "one");  // not flushed yet
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ(gcs_.GetObject("bkt", "j/events"), "onetwo");
}

TEST_F(GcsEnvTest, UsesTheMetadataServersAccessToken) {
  FakeMetadata metadata;
  ASSERT_GT(metadata.Start(), 0);
  metadata.Set("instance/service-accounts/default/token",
               R"({"access_token":"ya29.test","expires_in":3599,"token_type":"Bearer"})");
  gcs_.RequireToken("ya29.test");
  EXPECT_TRUE(absl::IsPermissionDenied(env_->WriteFileAtomic("gs://bkt/j/x", "x")));

  MetadataClient client(transport_.get(), metadata.base_url());
  GcsOptions options;
  options.endpoint = gcs_.endpoint();
  options.access_token = [&client] { return client.AccessToken(); };
  GcsEnv env(transport_.get(), options);
  ASSERT_TRUE(env.WriteFileAtomic("gs://bkt/j/x", "x").ok());
  EXPECT_EQ(*env.ReadFile("gs://bkt/j/x"), "x");

  metadata.Set("instance/attributes/pstrain-role", "worker");
  EXPECT_EQ(*client.Get("instance/attributes/pstrain-role"), "worker");
  absl::StatusOr<std::string> missing = client.Get("instance/attributes/pstrain-task-index");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("pstrain-task-index"), std::string::npos);
}

}  // namespace
}  // namespace pstrain
