#include "data/dataset.h"

namespace pstrain {

const char* SplitName(Split split) {
  switch (split) {
    case Split::kTrain:
      return "train";
    case Split::kTest:
      return "test";
  }
  return "unknown";
}

}  // namespace pstrain
