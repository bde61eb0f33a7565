#ifndef PSTRAIN_COMMON_VERSION_H_
#define PSTRAIN_COMMON_VERSION_H_

#include <cstdio>
#include <cstring>

namespace pstrain {

// The release, from the top-level CMakeLists.txt (project VERSION), the
// same in every binary and in the .deb package.
constexpr char kVersion[] = PSTRAIN_VERSION;

// For main(): if the command line has --version (or -version), prints
// "<program> <version>" and returns true (the caller exits 0).
inline bool PrintVersionIfAsked(int argc, char** argv, const char* program) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--version") == 0 || std::strcmp(argv[i], "-version") == 0) {
      std::printf("%s %s\n", program, kVersion);
      return true;
    }
  }
  return false;
}

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_VERSION_H_
