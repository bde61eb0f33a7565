#include "common/committed_file.h"

#include "common/crc32c.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(CommittedFileTest, ACommittedFileHoldsEveryPieceWithItsSizeAndCrc) {
  MemEnv env;
  ASSERT_TRUE(env.WriteFileAtomic("/d/f", "old").ok());
  auto file = CommittedFile::Create(&env, "/d/f");
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Append("hello, ").ok());
  ASSERT_TRUE((*file)->Append("world").ok());
  EXPECT_EQ(*env.ReadFile("/d/f"), "old");  // nothing replaced before the commit
  ASSERT_TRUE((*file)->Commit().ok());
  EXPECT_EQ(*env.ReadFile("/d/f"), "hello, world");
  EXPECT_EQ((*file)->size(), 12u);
  EXPECT_EQ((*file)->crc32c(), crc32c::Value("hello, world", 12));
  EXPECT_EQ(*env.ListDir("/d"), std::vector<std::string>{"f"});
  EXPECT_FALSE((*file)->Append("more").ok());
  file->reset();
  EXPECT_EQ(*env.ReadFile("/d/f"), "hello, world");  // kept once committed
}

TEST(CommittedFileTest, AFileNeverCommittedLeavesNothingBehind) {
  MemEnv env;
  ASSERT_TRUE(env.WriteFileAtomic("/d/f", "old").ok());
  {
    auto file = CommittedFile::Create(&env, "/d/f");
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->Append("half of it").ok());
  }
  EXPECT_EQ(*env.ReadFile("/d/f"), "old");
  EXPECT_EQ(*env.ListDir("/d"), std::vector<std::string>{"f"});
}

}  // namespace
}  // namespace pstrain
