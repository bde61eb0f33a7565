#include "common/env.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string base = dir ? dir : "/tmp";
  return JoinPath(base, "pstrain_env_test_" + std::to_string(::getpid()));
}

TEST(EnvTest, PosixWriteReadListRoundTrip) {
  Env* env = Env::Default();
  std::string dir = JoinPath(TempDir(), "a/b");
  ASSERT_TRUE(env->CreateDirs(dir).ok());
  ASSERT_TRUE(env->CreateDirs(dir).ok());  // idempotent
  std::string file = JoinPath(dir, "f.bin");
  std::string payload("x\0y", 3);
  ASSERT_TRUE(env->WriteFileAtomic(file, payload).ok());
  auto read = env->ReadFile(file);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, payload);
  auto names = env->ListDir(dir);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, std::vector<std::string>{"f.bin"});  // no temp file left behind
}

TEST(EnvTest, MissingFileIsNotFoundNamingThePath) {
  auto read = Env::Default()->ReadFile("/nonexistent/pstrain/file");
  ASSERT_FALSE(read.ok());
  EXPECT_TRUE(absl::IsNotFound(read.status()));
  EXPECT_NE(read.status().message().find("/nonexistent/pstrain/file"), std::string::npos);
}

TEST(EnvTest, DirectoryIsNotReadAsFile) {
  auto read = Env::Default()->ReadFile("/tmp");
  EXPECT_TRUE(absl::IsInvalidArgument(read.status())) << read.status();
}

TEST(EnvTest, MemEnvRoundTrip) {
  MemEnv env;
  ASSERT_TRUE(env.WriteFileAtomic("/d/x", "1").ok());
  ASSERT_TRUE(env.WriteFileAtomic("/d/sub/y", "2").ok());
  EXPECT_TRUE(env.FileExists("/d"));
  EXPECT_TRUE(env.FileExists("/d/x"));
  EXPECT_FALSE(env.FileExists("/d/z"));
  EXPECT_EQ(*env.ReadFile("/d/x"), "1");
  EXPECT_EQ(*env.ListDir("/d"), (std::vector<std::string>{"sub", "x"}));
  EXPECT_TRUE(absl::IsNotFound(env.ReadFile("/d/z").status()));
}

TEST(JoinPathTest, OneSlash) {
  EXPECT_EQ(JoinPath("a/", "/b"), "a/b");
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("", "b"), "b");
}

}  // namespace
}  // namespace pstrain
