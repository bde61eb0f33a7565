#ifndef PSTRAIN_DATA_STREAM_STREAMED_BATCHES_H_
#define PSTRAIN_DATA_STREAM_STREAMED_BATCHES_H_

// A training replica's batches streamed from files (data/stream/example_stream.h),
// and the log of where its stream was, by batch number, that lets a
// restarted replica go on with the very batch it stopped before.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "data/batch_source.h"
#include "data/stream/example_stream.h"

namespace pstrain {

// A replica's stream positions by batch number (0-based: batch n is the one
// a sync replica trains at global step n), kept in a small text file (the
// job dir's input/replica-<r>.txt) rewritten every `every` batches with the
// last `keep`. The file names the stream's options (files, replicas, seed,
// shuffle_buffer, format) in a fingerprint; a file written for other options
// is not used. A line "# <about>" after it says for whom it was written (a
// re-deal, data/stream/input_redeal.h, reads it). Not thread-safe.
class InputPositionLog {
 public:
  InputPositionLog(Env* env, std::string path, uint64_t fingerprint, int64_t every = 50,
                   int keep = 200, std::string about = "");

  // Reads what an earlier run of the replica wrote. OK with nothing read
  // when there is no file or it was written for other options (then
  // `*note` says so); DataLoss naming the file for a line it cannot read.
  absl::Status Load(std::string* note);

  // The latest batch at or before `n` with a recorded position.
  std::optional<std::pair<int64_t, InputPosition>> Find(int64_t n) const;

  // Batch n is about to be read at `position`: kept when n is a multiple of
  // `every` (or `always`), and the file rewritten. Positions of batches
  // after n (undone by a rollback) are dropped.
  absl::Status Record(int64_t n, const InputPosition& position, bool always = false);

  const std::string& path() const { return path_; }

 private:
  Env* const env_;
  const std::string path_;
  const uint64_t fingerprint_;
  const std::string about_;
  const int64_t every_;
  const int keep_;
  std::vector<std::pair<int64_t, InputPosition>> entries_;  // by batch number
};

// The fingerprint of what decides a replica's batches.
uint64_t StreamFingerprint(const ExampleStreamOptions& options);
// The same without the replica, the number of replicas and a re-deal: what
// decides the batches of all replicas together.
uint64_t StreamBaseFingerprint(const ExampleStreamOptions& options);
// The line a replica's position log says it was written for: "replica=R
// replicas=N base=B" (B: StreamBaseFingerprint).
std::string PositionLogAbout(const ExampleStreamOptions& options);

class StreamedBatches : public BatchSource {
 public:
  // The replica's batches from batch `first` on: its stream opened at the
  // latest position `log` has at or before `first` (without one: the start,
  // or a re-deal's at its first batch), and the batches between read and
  // dropped. InvalidArgument for a `first` before a re-deal's first batch. `sparse_features`: the
  // model's, by name, in the order it takes them. `log` (may be null) must
  // outlive the source. The errors of ExampleStream::Create and Next.
  static absl::StatusOr<std::unique_ptr<StreamedBatches>> Start(
      Env* env, const ExampleStreamOptions& options, std::vector<std::string> sparse_features,
      int64_t first, InputPositionLog* log);

  // OutOfRange after the last whole batch of the last epoch (the examples
  // after it, fewer than a batch, are dropped).
  absl::Status NextBatch(float* images, float* labels, SparseBatch* sparse) override;
  int64_t epoch() const override { return stream_->progress().epoch; }
  int batch_size() const override { return batch_size_; }
  std::optional<InputProgress> progress() const override { return stream_->progress(); }

  const ExampleStream& stream() const { return *stream_; }
  // Per label of an example (a head of the model): labels outside [0, n)
  // are an error (0: not checked, a regression head's).
  void set_label_classes(std::vector<int> classes) { label_classes_ = std::move(classes); }
  int64_t next_batch() const { return next_; }
  // The stream ended before batch `first` (a replica restarted after its
  // input ended).
  bool ended() const { return ended_; }

 private:
  StreamedBatches(std::unique_ptr<ExampleStream> stream, std::vector<std::string> sparse_features,
                  int64_t next, InputPositionLog* log, int batch_size)
      : batch_size_(batch_size),
        stream_(std::move(stream)),
        sparse_features_(std::move(sparse_features)),
        next_(next),
        log_(log) {}

  const int batch_size_;
  std::unique_ptr<ExampleStream> stream_;
  const std::vector<std::string> sparse_features_;
  std::vector<int> columns_;  // of the stream's batches, once known
  int64_t next_;
  InputPositionLog* const log_;
  Dataset batch_;
  bool ended_ = false;    // the stream ended before the first batch asked for
  bool waiting_ = false;  // the last call waited for new files, mid-batch
  bool following_ = false;
  int64_t logged_window_ = -1;  // the window of the last position recorded
  std::vector<int> label_classes_;
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_STREAM_STREAMED_BATCHES_H_
