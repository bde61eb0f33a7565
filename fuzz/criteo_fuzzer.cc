// The Criteo TSV reader on files in memory. The first byte picks the batch
// size, so rows land on every boundary between batches; the rest is the file.
// Checks: no crash, and every batch it returns has whole rows (the columns'
// sizes agree) and only 0/1 labels.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/env.h"
#include "data/formats/criteo.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int64_t max_rows = 1 + data[0] % 8;
  pstrain::MemEnv env;
  (void)env.WriteFileAtomic("/d/day_0",
                            std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  absl::StatusOr<std::unique_ptr<pstrain::CriteoReader>> reader =
      pstrain::CriteoReader::Open(&env, "/d/day_0");
  if (!reader.ok()) std::abort();
  pstrain::CriteoBatch batch;
  for (;;) {
    const absl::Status s = (*reader)->ReadBatch(max_rows, &batch);
    const size_t n = batch.labels.size();
    if (n > static_cast<size_t>(max_rows) || batch.dense.size() != n * pstrain::kCriteoNumDense ||
        batch.dense_present.size() != n * pstrain::kCriteoNumDense ||
        batch.categorical.size() != n * pstrain::kCriteoNumCategorical) {
      std::abort();
    }
    for (float y : batch.labels) {
      if (y != 0.0f && y != 1.0f) std::abort();
    }
    if (!s.ok()) break;
  }
  return 0;
}
