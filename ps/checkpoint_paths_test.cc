#include "ps/checkpoint_paths.h"

#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/env.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

constexpr CheckpointPathKind kPrefix = CheckpointPathKind::kPrefix;
constexpr CheckpointPathKind kIndex = CheckpointPathKind::kIndex;

std::string NewDir() {
  std::string dir = JoinPath(::testing::TempDir(), "pstrain_ckpt_paths_XXXXXX");
  EXPECT_NE(::mkdtemp(dir.data()), nullptr);
  return dir;
}

void ExpectRefused(const std::string& job, const std::string& given, CheckpointPathKind kind) {
  absl::StatusOr<std::string> path = CheckpointPathInJobDir(job, given, kind, "the path");
  ASSERT_FALSE(path.ok()) << given << " -> " << *path;
  EXPECT_TRUE(absl::IsInvalidArgument(path.status()));
  EXPECT_NE(path.status().message().find("job dir " + job), std::string::npos) << path.status();
}

TEST(CheckpointPathsTest, ACheckpointOfTheJobDirByNameOrPath) {
  const std::string job = JoinPath(NewDir(), "job");
  ASSERT_TRUE(Env::Default()->CreateDirs(job).ok());
  const std::string want = JoinPath(job, "model.ckpt-5");
  for (const std::string& given :
       {std::string("model.ckpt-5"), job + "/model.ckpt-5", job + "//./model.ckpt-5"}) {
    absl::StatusOr<std::string> path = CheckpointPathInJobDir(job, given, kPrefix, "prefix");
    ASSERT_TRUE(path.ok()) << given << ": " << path.status();
    EXPECT_EQ(*path, want);
  }
  EXPECT_EQ(*CheckpointPathInJobDir(job + "/", "model.ckpt-5.index", kIndex, "index"),
            JoinPath(job, "model.ckpt-5.index"));
  // The job dir by another name (a symlink to it) is the job dir.
  const std::string alias = JoinPath(NewDir(), "alias");
  ASSERT_EQ(::symlink(job.c_str(), alias.c_str()), 0);
  EXPECT_EQ(*CheckpointPathInJobDir(job, alias + "/model.ckpt-5", kPrefix, "prefix"), want);
}

TEST(CheckpointPathsTest, AnythingElseIsRefused) {
  const std::string job = JoinPath(NewDir(), "job");
  const std::string elsewhere = NewDir();
  ASSERT_TRUE(Env::Default()->CreateDirs(job).ok());
  // A symlink in the job dir to a directory outside it.
  ASSERT_EQ(::symlink(elsewhere.c_str(), JoinPath(job, "link").c_str()), 0);
  for (const std::string& given : std::vector<std::string>{
           "/tmp/elsewhere/evil", elsewhere + "/model.ckpt-1", "../model.ckpt-1",
           "../../../../tmp/model.ckpt-1", job + "/../job/model.ckpt-1", job + "/link/model.ckpt-1",
           "link/model.ckpt-1", "sub/model.ckpt-1", "/model.ckpt-1", "model.ckpt-1.index",
           "model.ckpt-01", "model.ckpt--1", "model.ckpt-1x", "evil", "",
           std::string("model.ckpt-1\0x", 14)}) {
    ExpectRefused(job, given, kPrefix);
  }
  for (const std::string& given : std::vector<std::string>{
           "/etc/passwd", "../../../../etc/shadow", "model.ckpt-1",
           job + "/link/model.ckpt-1.index", elsewhere + "/model.ckpt-1.index"}) {
    ExpectRefused(job, given, kIndex);
  }
  // No job dir: nothing is accepted.
  EXPECT_FALSE(CheckpointPathInJobDir("", "model.ckpt-1", kPrefix, "prefix").ok());
}

TEST(CheckpointPathsTest, CloudStorageJobDirsAreComparedAsWritten) {
  const std::string job = "gs://bkt/job";
  EXPECT_EQ(*CheckpointPathInJobDir(job, "gs://bkt/job/model.ckpt-3", kPrefix, "prefix"),
            "gs://bkt/job/model.ckpt-3");
  EXPECT_EQ(*CheckpointPathInJobDir(job, "model.ckpt-3.index", kIndex, "index"),
            "gs://bkt/job/model.ckpt-3.index");
  ExpectRefused(job, "gs://bkt/other/model.ckpt-3", kPrefix);
  ExpectRefused(job, "gs://bkt/job/../other/model.ckpt-3", kPrefix);
  ExpectRefused(job, "gs://other/job/model.ckpt-3", kPrefix);
}

}  // namespace
}  // namespace pstrain
