#include "common/malloc_tuning.h"

#include <malloc.h>

namespace pstrain {

void TuneMallocForLargeBuffers() {
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit; messages
  // are at most ~4 MiB per layout chunk.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

}  // namespace pstrain
