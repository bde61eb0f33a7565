#include "common/flags.h"

#include <cstring>

namespace pstrain {

void NormalizeFlagSpellings(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    char* arg = argv[i];
    if (std::strncmp(arg, "--", 2) != 0) continue;
    if (arg[2] == '\0') break;  // "--" ends the flags.
    for (char* c = arg + 2; *c != '\0' && *c != '='; ++c) {
      if (*c == '-') *c = '_';
    }
  }
}

}  // namespace pstrain
