// AtomicWritableFile (common/env.h), on the POSIX Env and against every crash
// point of testing/crash_env.h.
#include <memory>
#include <string>
#include <vector>

#include "common/committed_file.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/crash_env.h"
#include "testing/temp_dir.h"

namespace pstrain {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;
using testing_util::CrashCase;
using testing_util::CrashEnv;
using testing_util::CrashViolations;

std::string TempDir() {
  static const std::string* const dir =
      new std::string(testing_util::TempDirRemovedAtExit("pstrain_atomic_file_test"));
  return *dir;
}

TEST(AtomicWritableFileTest, ThePathChangesOnlyAtCommitAndNoTempFileIsLeft) {
  Env* env = Env::Default();
  const std::string dir = JoinPath(TempDir(), "commit");
  ASSERT_TRUE(env->CreateDirs(dir).ok());
  const std::string path = JoinPath(dir, "f");
  ASSERT_TRUE(env->WriteFileAtomic(path, "old").ok());
  auto file = env->NewAtomicWritableFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Append("new ").ok());
  ASSERT_TRUE((*file)->Append(std::string(200000, 'x')).ok());  // past the write buffer
  ASSERT_TRUE((*file)->Sync().ok());
  EXPECT_EQ(*env->ReadFile(path), "old");
  auto names = env->ListDir(dir);
  ASSERT_TRUE(names.ok());
  ASSERT_THAT(*names, SizeIs(2));  // f and its hidden temp sibling
  ASSERT_TRUE((*file)->Close().ok());
  EXPECT_EQ(*env->ReadFile(path), "old");  // closed is not committed
  EXPECT_FALSE((*file)->Append("late").ok());
  ASSERT_TRUE((*file)->Commit().ok());
  EXPECT_EQ(env->ReadFile(path)->size(), 200004u);
  EXPECT_THAT(*env->ListDir(dir), ElementsAre("f"));
  absl::Status again = (*file)->Commit();
  EXPECT_TRUE(absl::IsFailedPrecondition(again)) << again;
  EXPECT_NE(again.message().find(path), std::string::npos) << again;
}

TEST(AtomicWritableFileTest, AFileNeverCommittedLeavesThePathAsItWas) {
  for (bool posix : {true, false}) {
    MemEnv mem;
    Env* env = posix ? Env::Default() : &mem;
    const std::string dir = posix ? JoinPath(TempDir(), "abandon") : std::string("/mem");
    ASSERT_TRUE(env->CreateDirs(dir).ok());
    const std::string path = JoinPath(dir, "f");
    ASSERT_TRUE(env->WriteFileAtomic(path, "old").ok());
    {
      auto file = env->NewAtomicWritableFile(path);
      ASSERT_TRUE(file.ok()) << file.status();
      ASSERT_TRUE((*file)->Append("half of it").ok());
    }
    {
      auto file = env->NewAtomicWritableFile(path);
      ASSERT_TRUE(file.ok()) << file.status();
      ASSERT_TRUE((*file)->Append("all of it, closed").ok());
      ASSERT_TRUE((*file)->Close().ok());
    }
    EXPECT_EQ(*env->ReadFile(path), "old");
    EXPECT_THAT(*env->ListDir(dir), ElementsAre("f"));
  }
}

TEST(AtomicWritableFileTest, TheTempFileIsAHiddenSiblingThatNamesItsFile) {
  const std::string temp = AtomicTempPath("/job/model.ckpt-5.index");
  EXPECT_EQ(DirName(temp), "/job");
  const std::string name = temp.substr(5);
  EXPECT_EQ(name[0], '.');  // no input pattern matches it
  EXPECT_EQ(CommittedNameOfTemp(name), "model.ckpt-5.index");
  EXPECT_NE(AtomicTempPath("/job/x"), AtomicTempPath("/job/x"));  // one per writer
  EXPECT_EQ(CommittedNameOfTemp(AtomicTempPath("x")), "x");
  EXPECT_EQ(CommittedNameOfTemp("model.ckpt-5.index"), std::nullopt);
  EXPECT_EQ(CommittedNameOfTemp(".hidden"), std::nullopt);
  EXPECT_EQ(CommittedNameOfTemp("model.ckpt-5.index.tmp.12"), std::nullopt);  // not one of ours
  EXPECT_EQ(DirName("/a/b"), "/a");
  EXPECT_EQ(DirName("/b"), "/");
  EXPECT_EQ(DirName("b"), ".");
}

// The crash test finds the mistakes it exists for: each of these writers
// leaves a renamed file empty or cut, or a committed file lost.
TEST(CrashEnvTest, FindsAWriterThatDoesNotSyncOrDoesNotCommitByRename) {
  const auto old_file = [](CrashEnv* env) { env->Put("/d/f", "the old file"); };
  CrashCase in_place{old_file, [](Env* env) -> absl::Status {
                       PSTRAIN_ASSIGN_OR_RETURN(auto f, env->NewWritableFile("/d/f"));
                       PSTRAIN_RETURN_IF_ERROR(f->Append("the new file"));
                       PSTRAIN_RETURN_IF_ERROR(f->Sync());
                       return f->Close();
                     }};
  CrashCase unsynced_rename{old_file, [](Env* env) -> absl::Status {
                              PSTRAIN_ASSIGN_OR_RETURN(auto f, env->NewWritableFile("/d/f.tmp"));
                              PSTRAIN_RETURN_IF_ERROR(f->Append("the new file"));
                              PSTRAIN_RETURN_IF_ERROR(f->Close());
                              PSTRAIN_RETURN_IF_ERROR(env->RenameFile("/d/f.tmp", "/d/f"));
                              return env->SyncDir("/d");
                            }};
  CrashCase no_dir_sync{old_file, [](Env* env) -> absl::Status {
                          PSTRAIN_ASSIGN_OR_RETURN(auto f, env->NewWritableFile("/d/.f.tmp.1.0"));
                          PSTRAIN_RETURN_IF_ERROR(f->Append("the new file"));
                          PSTRAIN_RETURN_IF_ERROR(f->Sync());
                          PSTRAIN_RETURN_IF_ERROR(f->Close());
                          return env->RenameFile("/d/.f.tmp.1.0", "/d/f");
                        }};
  for (const CrashCase* c : {&in_place, &unsynced_rename, &no_dir_sync}) {
    EXPECT_THAT(CrashViolations(*c), Not(IsEmpty()));
  }
  EXPECT_THAT(CrashViolations(unsynced_rename),
              Contains(HasSubstr("/d/f holds 0 bytes, neither the old file's 12 nor the new "
                                 "one's 12")));
  EXPECT_THAT(CrashViolations(no_dir_sync),
              Contains(HasSubstr("/d/f is the old file after its commit")));
}

TEST(AtomicWritableFileTest, WriteFileAtomicLeavesTheOldFileOrTheWholeNewOneAtEveryCrash) {
  EXPECT_THAT(CrashViolations({[](CrashEnv* env) { env->Put("/d/f", "the old file"); },
                               [](Env* env) { return env->WriteFileAtomic("/d/f", "new bytes"); }}),
              IsEmpty());
  EXPECT_THAT(
      CrashViolations({[](CrashEnv*) {}, [](Env* env) { return env->WriteFileAtomic("/f", "x"); }}),
      IsEmpty());
}

TEST(AtomicWritableFileTest, AFileWrittenInPiecesIsWholeOrAbsentAtEveryCrash) {
  EXPECT_THAT(CrashViolations({[](CrashEnv*) {},
                               [](Env* env) -> absl::Status {
                                 PSTRAIN_ASSIGN_OR_RETURN(auto f,
                                                          env->NewAtomicWritableFile("/d/log"));
                                 for (int i = 0; i < 5; ++i) {
                                   PSTRAIN_RETURN_IF_ERROR(f->Append(std::string(100, 'a' + i)));
                                   PSTRAIN_RETURN_IF_ERROR(f->Flush());
                                 }
                                 PSTRAIN_RETURN_IF_ERROR(f->Sync());  // a sync midway
                                 PSTRAIN_RETURN_IF_ERROR(f->Append("end"));
                                 return f->Commit();
                               }}),
              IsEmpty());
}

TEST(AtomicWritableFileTest, FilesCommittedTogetherAreVisibleOnlyOnceAllAreWhole) {
  CrashCase shards{[](CrashEnv* env) { env->Put("/out/part-1", "an old part 1"); },
                   [](Env* env) -> absl::Status {
                     std::vector<std::unique_ptr<AtomicWritableFile>> files;
                     std::vector<AtomicWritableFile*> all;
                     for (const char* name : {"/out/part-0", "/out/part-1", "/out/sub/part-2"}) {
                       PSTRAIN_ASSIGN_OR_RETURN(files.emplace_back(),
                                                env->NewAtomicWritableFile(name));
                       PSTRAIN_RETURN_IF_ERROR(files.back()->Append(std::string(name) + " bytes"));
                       all.push_back(files.back().get());
                     }
                     return CommitFiles(all);
                   },
                   /*together=*/true};
  EXPECT_THAT(CrashViolations(shards), IsEmpty());
}

TEST(AtomicWritableFileTest, ACommitThatFailsRenamesNothing) {
  CrashEnv env;
  env.Put("/out/a", "old a");
  auto a = env.NewAtomicWritableFile("/out/a");
  auto b = env.NewAtomicWritableFile("/out/b");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Append("new a").ok());
  ASSERT_TRUE((*b)->Append("new b").ok());
  env.CrashAfter(3);  // a's sync and close, then b's sync: b's close fails
  EXPECT_TRUE(absl::IsUnavailable(CommitFiles({a->get(), b->get()})));
  EXPECT_EQ(env.AfterCrash(CrashEnv::View::kMetadataKept).at("/out/a"), "old a");
  EXPECT_EQ(env.AfterCrash(CrashEnv::View::kMetadataKept).count("/out/b"), 0u);
}

TEST(CommittedFileTest, ACheckpointFileIsTheOldOneOrWholeAtEveryCrash) {
  EXPECT_THAT(CrashViolations({[](CrashEnv* env) { env->Put("/job/shard", "old"); },
                               [](Env* env) -> absl::Status {
                                 PSTRAIN_ASSIGN_OR_RETURN(auto f,
                                                          CommittedFile::Create(env, "/job/shard"));
                                 PSTRAIN_RETURN_IF_ERROR(f->Append("header"));
                                 PSTRAIN_RETURN_IF_ERROR(f->Append(std::string(1000, 'v')));
                                 return f->Commit();
                               }}),
              IsEmpty());
}

}  // namespace
}  // namespace pstrain
