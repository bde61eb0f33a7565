#include "common/env.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace pstrain {
namespace {

// One fresh directory per test binary run (mkdtemp: never one an earlier run
// with the same pid left behind).
std::string EnvTestDir() {
  static const std::string* const dir =
      new std::string(testing_util::TempDirRemovedAtExit("pstrain_env_test"));
  return *dir;
}

TEST(EnvTest, PosixWriteReadListRoundTrip) {
  Env* env = Env::Default();
  std::string dir = JoinPath(EnvTestDir(), "a/b");
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

TEST(EnvTest, WritableFileAppendsFlushesAndCloses) {
  for (bool posix : {true, false}) {
    MemEnv mem;
    Env* env = posix ? Env::Default() : &mem;
    const std::string dir = posix ? EnvTestDir() : std::string("/mem");
    ASSERT_TRUE(env->CreateDirs(dir).ok());
    const std::string path = JoinPath(dir, "w.log");
    auto file = env->NewWritableFile(path);
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE((*file)->Append("hello ").ok());
    ASSERT_TRUE((*file)->Flush().ok());
    EXPECT_EQ(*env->ReadFile(path), "hello ");  // flushed bytes are in the file
    ASSERT_TRUE((*file)->Append(std::string(100000, 'x')).ok());
    ASSERT_TRUE((*file)->Sync().ok());
    ASSERT_TRUE((*file)->Close().ok());
    EXPECT_EQ(env->ReadFile(path)->size(), 100006u);
    EXPECT_FALSE((*file)->Append("late").ok());
    // A new file truncates.
    auto again = env->NewWritableFile(path);
    ASSERT_TRUE(again.ok());
    ASSERT_TRUE((*again)->Close().ok());
    EXPECT_EQ(*env->ReadFile(path), "");
  }
  EXPECT_FALSE(Env::Default()->NewWritableFile("/nonexistent/dir/f").ok());
}

TEST(JoinPathTest, OneSlash) {
  EXPECT_EQ(JoinPath("a/", "/b"), "a/b");
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("", "b"), "b");
}

}  // namespace
}  // namespace pstrain
