#ifndef PSTRAIN_DATA_STREAM_EXAMPLE_STREAM_H_
#define PSTRAIN_DATA_STREAM_EXAMPLE_STREAM_H_

// Tabular examples streamed from many files, as tf.data streams them
// (list_files -> shard -> interleave -> shuffle -> batch -> prefetch), with
// bounded memory, and a position that says exactly where the stream is, so
// that a restarted replica continues with the very next example.
//
// Each epoch orders the files (drawn from the seed and the epoch, the same
// for every replica, with shuffle_files; else as given), and a replica
// reads its share of them: the k-th file of that order when k % num_replicas
// == replica, or, with fewer files than replicas, every file's records r
// with r % num_replicas == replica. It reads `cycle_length` of its files at
// once, taking one record from each in turn (tf.data's interleave with
// block_length 1); a file that ends gives its place to the next. Examples
// are dealt out in windows: the next `shuffle_buffer` examples, handed out
// in an order drawn from (seed, replica, epoch, window), or in file order
// without a shuffle_buffer. Every epoch visits every example once. No more than the
// window being handed out and `prefetch_windows` more are in memory, and no
// file is read whole.
//
// The position of the next batch is where its window began in each open
// file (decompressed offset and record number), which files are done, and
// how many of the window's examples were handed out: re-reading the window
// from those offsets gives the same examples in the same order.
//
// Its pieces: the position's text form (data/stream/stream_position.h); which files
// a replica reads and in what order (data/stream/stream_deal.h); the thread that
// reads windows ahead (data/stream/example_stream_reader.h), which decodes each
// format's records (data/stream/example_decoder.h), reads a CSV file's header and
// joins its records' lines (data/formats/csv_lines.h), skips bad records
// (data/stream/bad_records.h) and follows a growing file list
// (data/stream/followed_files.h).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "data/batch_source.h"
#include "data/dataset.h"
#include "data/formats/csv_format.h"
#include "data/formats/example_format.h"
#include "data/formats/input_stream.h"
#include "data/formats/tabular_examples.h"
#include "data/stream/stream_position.h"

namespace pstrain {

// Where a file is begun: at its start, or, re-dealt (RedealShare), where
// an earlier run's replica stopped reading it.
struct FilePiece {
  int64_t file = 0;     // index into ExampleStreamOptions::files
  uint64_t offset = 0;  // decompressed offset of the record to begin with
  int64_t record = 0;   // its number in the file
  bool operator==(const FilePiece&) const = default;
};

// A replica's share of what the replicas of a run with another number of
// them left unread (data/stream/input_redeal.h): read as epoch `epoch`, in this
// order, in place of the replica's usual files of that epoch. The epochs
// after it are the usual ones.
struct RedealShare {
  int64_t epoch = 0;
  int64_t first_batch = 0;  // the replica's batch number the share begins at
  std::vector<FilePiece> pieces;
  bool operator==(const RedealShare&) const = default;
};

struct ExampleStreamOptions {
  // Every replica's files, in the same order (ExpandFilePatterns).
  std::vector<std::string> files;
  ExampleFormat format = ExampleFormat::kTfExamples;
  Compression compression = Compression::kAuto;
  TabularFeatures features;  // kTfExamples: what each Example holds
  // kCsv: how records become examples. Every file has the same header: a
  // file whose header differs is an error naming both.
  std::optional<CsvSchema> csv;
  int replica = 0;
  int num_replicas = 1;
  int batch_size = 1;
  // Examples per window; 0: no shuffling (windows of kInOrderWindow in
  // file order).
  int64_t shuffle_buffer = 0;
  uint64_t seed = 0;
  // Each epoch's files in an order drawn from (seed, epoch), the same for
  // every replica, and dealt from it; false: in the order of `files`. Not
  // with follow_list (new files keep their arrival order).
  bool shuffle_files = true;
  int cycle_length = 16;     // files read at once (training.cycle_length)
  int64_t num_epochs = 0;    // 0: for ever
  int prefetch_windows = 2;  // windows read ahead on the stream's thread
  // Bad records (or damaged rests of files) skipped, each logged, before
  // one is an error; tf.data's ignore_errors, bounded.
  int64_t max_bad_records = 0;
  // Logs every file the stream opens (a training replica's), with where.
  bool log_opens = false;
  // Online training (training.follow): the file list (data/stream/file_list.h)
  // that `files` were read from. When the stream has read every file it
  // knows it reads the list again (at most every second) and goes on with
  // the new files; file i of the list goes to replica i % num_replicas.
  // One pass over each file (num_epochs is ignored); never ends.
  std::string follow_list;
  double poll_secs = 30;  // follow: the longest wait between readings of the list
  // A restart with another number of replicas: the stream begins at the
  // share's epoch (a position before it means its start) and reads its
  // pieces first. Needs as many files as replicas, or more.
  std::optional<RedealShare> redeal;
};

// The files replica `options.replica` reads in `epoch`, in their order:
// its share of options.files, or its re-dealt pieces (data/stream/stream_deal.cc).
std::vector<FilePiece> EpochPieces(const ExampleStreamOptions& options, int64_t epoch);

// Examples per window without shuffling.
inline constexpr int64_t kInOrderWindow = 1024;

class ExampleStream {
 public:
  // A stream from `position` (default: the start). InvalidArgument for bad
  // options (no files, batch_size < 1, replica outside [0, num_replicas),
  // cycle_length < 1, a negative shuffle_buffer or num_epochs) or a position
  // that does not fit the replica's files. Starts its reading thread.
  static absl::StatusOr<std::unique_ptr<ExampleStream>> Create(Env* env,
                                                               ExampleStreamOptions options,
                                                               const InputPosition& position = {});
  ~ExampleStream();
  ExampleStream(const ExampleStream&) = delete;
  ExampleStream& operator=(const ExampleStream&) = delete;

  // Replaces `*batch` with the next batch_size examples (a tabular Dataset;
  // fewer only as the last batch of the last epoch). OutOfRange after the
  // last epoch's last example. A file's error (NotFound for one that is
  // gone; DataLoss or InvalidArgument naming the file, its record or line
  // and the field) once the examples before it are handed out. Following
  // new files: WaitingForInputError after about a second without a whole
  // batch (the examples so far are kept for the next call).
  absl::Status Next(Dataset* batch);

  // The position of the next batch.
  InputPosition position() const;
  InputProgress progress() const;

 private:
  class Reader;
  explicit ExampleStream(std::unique_ptr<Reader> reader);

  struct Window;
  std::unique_ptr<Reader> reader_;
  std::unique_ptr<Window> window_;  // being handed out
  Dataset pending_;                 // the batch being filled
  bool pending_started_ = false;
  int64_t examples_ = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_STREAM_EXAMPLE_STREAM_H_
