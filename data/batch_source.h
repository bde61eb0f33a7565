#ifndef PSTRAIN_DATA_BATCH_SOURCE_H_
#define PSTRAIN_DATA_BATCH_SOURCE_H_

// Where a training replica's batches come from: a dataset in memory
// (data/batcher.h BatchIterator) or files streamed as it trains
// (data/streamed_batches.h).

#include <cstdint>

#include "absl/status/status.h"
#include "data/sparse_features.h"

namespace pstrain {

class BatchSource {
 public:
  virtual ~BatchSource() = default;

  // The next batch: `images` (batch_size * example floats: pixels, or a
  // tabular example's dense features), `labels` (batch_size) and, when
  // `sparse` is not null, the model's sparse features. OutOfRange when the
  // input has no more examples; a source that reads files returns their
  // errors (naming the file and where in it).
  virtual absl::Status NextBatch(float* images, int32_t* labels, SparseBatch* sparse) = 0;

  // Epochs completed, for progress lines.
  virtual int64_t epoch() const = 0;
  // Examples per batch.
  virtual int batch_size() const = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_BATCH_SOURCE_H_
