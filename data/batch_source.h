#ifndef PSTRAIN_DATA_BATCH_SOURCE_H_
#define PSTRAIN_DATA_BATCH_SOURCE_H_

// Where a training replica's batches come from: a dataset in memory
// (data/batcher.h BatchIterator) or files streamed as it trains
// (data/stream/streamed_batches.h).

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "data/sparse_features.h"

namespace pstrain {

// What a stream of files has done, for progress lines and summaries.
struct InputProgress {
  int64_t epoch = 0;        // 0-based
  int64_t num_epochs = 0;   // 0: for ever
  int64_t files_done = 0;   // of this epoch
  int64_t files_open = 0;   // being read
  int64_t files = 0;        // the replica's files per epoch
  double fraction = 0;      // of this epoch's file bytes read, in [0, 1]
  uint64_t file_bytes = 0;  // read from files (compressed) since the stream began
  uint64_t bytes = 0;       // of records read (decompressed) since then
  int64_t examples = 0;     // handed out since then
  int64_t bad_records = 0;  // skipped (max_bad_records) since then
};

// A source that follows new files (online training) has none to read yet:
// try again (after checking whether the replica is asked to stop).
inline absl::Status WaitingForInputError(std::string_view what) {
  absl::Status s = absl::UnavailableError(absl::string_view(what.data(), what.size()));
  s.SetPayload("type.pstrain/waiting_for_input", absl::Cord("1"));
  return s;
}
inline bool IsWaitingForInput(const absl::Status& s) {
  return absl::IsUnavailable(s) && s.GetPayload("type.pstrain/waiting_for_input").has_value();
}

class BatchSource {
 public:
  virtual ~BatchSource() = default;

  // The next batch: `images` (batch_size * example floats: pixels, or a
  // tabular example's dense features), `labels` (batch_size) and, when
  // `sparse` is not null, the model's sparse features. OutOfRange when the
  // input has no more examples; a source that reads files returns their
  // errors (naming the file and where in it); one that follows new files
  // WaitingForInputError while it has none (the next call goes on).
  virtual absl::Status NextBatch(float* images, float* labels, SparseBatch* sparse) = 0;

  // Epochs completed, for progress lines.
  virtual int64_t epoch() const = 0;
  // Examples per batch.
  virtual int batch_size() const = 0;
  // A stream of files: where it is. Data in memory: nullopt.
  virtual std::optional<InputProgress> progress() const { return std::nullopt; }
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_BATCH_SOURCE_H_
