#ifndef PSTRAIN_TESTING_TEMP_DIR_H_
#define PSTRAIN_TESTING_TEMP_DIR_H_

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace testing_util {

// A fresh directory for a test binary, `name`_XXXXXX under the test temp
// dir (TEST_TMPDIR, else /tmp; mkdtemp, so never one an earlier run left),
// removed with everything in it when the binary exits, pass or fail. Set
// PSTRAIN_KEEP_TEST_DIRS=1 to keep them for a look.
inline std::string TempDirRemovedAtExit(const std::string& name) {
  struct Dirs {
    std::vector<std::string> paths;
    ~Dirs() {
      const char* keep = std::getenv("PSTRAIN_KEEP_TEST_DIRS");
      if (keep != nullptr && std::string(keep) == "1") return;
      for (const std::string& path : paths) {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
      }
    }
  };
  static Dirs dirs;
  std::string path = ::testing::TempDir();
  if (!path.empty() && path.back() != '/') path += '/';
  path += name + "_XXXXXX";
  EXPECT_NE(::mkdtemp(path.data()), nullptr) << path;
  dirs.paths.push_back(path);
  return path;
}

}  // namespace testing_util
}  // namespace pstrain

#endif  // PSTRAIN_TESTING_TEMP_DIR_H_
