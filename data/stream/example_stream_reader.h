#ifndef PSTRAIN_DATA_STREAM_EXAMPLE_STREAM_READER_H_
#define PSTRAIN_DATA_STREAM_EXAMPLE_STREAM_READER_H_

// Internal to data/stream/example_stream.cc: the thread that reads an
// ExampleStream's windows ahead of the one being handed out. It opens the
// replica's files cycle_length at a time (data/stream/stream_deal.h), takes one
// record from each in turn, decodes them (data/stream/example_decoder.h), skips bad
// ones (data/stream/bad_records.h), follows a growing file list
// (data/stream/followed_files.h) and keeps the input's progress.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/env.h"
#include "data/batch_source.h"
#include "data/dataset.h"
#include "data/formats/record_stream.h"
#include "data/stream/bad_records.h"
#include "data/stream/example_decoder.h"
#include "data/stream/example_stream.h"
#include "data/stream/followed_files.h"

namespace pstrain {

// A window: examples in the order they were read, the order they are
// handed out in, and the position it began at.
struct ExampleStream::Window {
  Dataset examples;
  std::vector<int64_t> order;
  InputPosition start;
  int64_t taken = 0;
  bool last = false;   // the stream ends after it
  absl::Status error;  // after its examples: the stream fails with it
};

// Reads windows on its own thread, prefetch_windows ahead. Take, TakeFor,
// CaughtUp and progress may be called from any thread; the rest of its state
// is the reading thread's (and Start's, before the thread starts).
class ExampleStream::Reader {
 public:
  // `env` must outlive this; `options` are checked (ExampleStream::Create).
  Reader(Env* env, ExampleStreamOptions options);
  ~Reader() { Stop(); }

  // Starts the reading thread at `from`. InvalidArgument for a position that
  // does not fit the replica's files; following, the errors of reading the
  // list.
  absl::Status Start(const InputPosition& from);
  void Stop();

  // The next window; blocks until it is read.
  std::unique_ptr<Window> Take();
  // The next window within `secs`, or null.
  std::unique_ptr<Window> TakeFor(double secs);

  bool following() const { return !options_.follow_list.empty(); }
  // Following new files: the reader has read every listed file and waits
  // for more (rather than still reading a window).
  bool CaughtUp() const;

  const InputPosition& StartPosition() const { return start_; }
  int batch_size() const { return options_.batch_size; }
  InputProgress progress() const;

 private:
  struct Slot {
    int64_t file = 0;
    std::unique_ptr<RecordStream> stream;
    uint64_t size = 0;     // the file's, 0 if unknown
    uint64_t counted = 0;  // file_bytes already in progress_
    // Of the file read, counted in progress_.fraction: counted / size,
    // plus where it was opened.
    double share = 0;
  };

  // The reading thread: windows into ready_, until the last one, an error
  // or Stop.
  void Run();
  bool Stopping();

  // The next window: examples from the open files (a file that ends gives
  // its place to the epoch's next one) until the window is full, the epoch
  // ends or, following, every listed file is read; then the next window's
  // position and the order of this one's examples.
  std::unique_ptr<Window> ReadWindow();
  // At a window's start: opens the files of the stream's position (the
  // first window), or reads the followed list again.
  absl::Status BeginWindow();
  // Following, with every listed file read and nothing in the window yet:
  // says so, waits a little and reads the list again.
  absl::Status WaitForNewFiles();
  // The epoch's files are read: FailedPrecondition if this replica read no
  // example in it (a re-dealt epoch may leave it none).
  absl::Status EndEpoch();
  // Whether the epoch that ended was the last (num_epochs).
  bool LastEpoch() const;
  // Goes on to the next epoch, its files in their new order.
  void NextEpoch();
  // One record from each open file in turn, starting with the first, while
  // `*read` < `size`: the slot whose turn is next, 0 after a whole round. A
  // file that ends closes its slot; an error ends the round in `*status`.
  size_t ReadRound(int64_t size, int64_t* read, absl::Status* status);
  // Where the next window begins: a window that ended mid-round starts
  // with slot `next_slot`, the file whose turn it is.
  void EndWindow(size_t next_slot);

  std::vector<std::string> EpochFiles(int64_t epoch) const;
  bool Redealt(int64_t epoch) const;
  // A slot for `stream`, file `file` of the epoch, with its size for the
  // epoch's progress (none if the Env cannot say: then a file counts once
  // it is done).
  Slot NewSlot(int64_t file, std::unique_ptr<RecordStream> stream);
  // Opens the slots of at_.open (at a window's start they are at_'s).
  absl::Status OpenSlots();
  absl::StatusOr<std::unique_ptr<RecordStream>> OpenFile(const std::string& path, uint64_t offset,
                                                         int64_t record);
  // Following new files: reads the list again (at most every second, or
  // poll_secs), its first `limit` files if not 0, and deals its new files.
  // Only at a window's start, where at_.listed records it: a window
  // re-read from its position reads the same files. The reader thread's
  // (and Start's).
  absl::Status RefreshList(int64_t limit = 0);
  // Fills the cycle up to cycle_length from the epoch's next files.
  absl::Status FillCycle();
  // The next record of this replica from slot `s`, decoded into the window;
  // false when the slot's file ended.
  absl::StatusOr<bool> ReadOne(Slot& s);
  // BadRecords::Skip, counted in progress_.
  absl::Status SkipBadRecord(const absl::Status& error);
  // Slot `s` read `record_bytes` more.
  void Count(Slot& s, uint64_t record_bytes);
  // Slot `i`'s file ended: it counts as a whole file done.
  void CloseSlot(size_t i);

  Env* const env_;
  const ExampleStreamOptions options_;
  bool interleaved_ = false;
  ExampleDecoder decoder_;
  std::string joined_;      // kCsv: a record joined from lines
  BadRecords bad_records_;  // skipped since Create
  InputPosition start_;
  // The reading thread's own.
  InputPosition at_;
  int64_t skip_ = 0;
  std::vector<std::string> order_;
  std::vector<Slot> slots_;
  // Following new files: the list as last read, and how many files it held
  // when the wait for new ones was last logged (-1: not waiting). The wait is
  // logged again when the list grows with none of the new files for this
  // replica.
  FollowedFiles list_;
  int64_t waiting_logged_at_ = -1;
  bool started_ = false;
  int64_t epoch_examples_ = 0;  // read in this epoch

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Window>> ready_;
  bool stop_ = false;
  bool caught_up_ = false;  // following: every listed file read, waiting
  InputProgress progress_;
  std::thread thread_;
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_STREAM_EXAMPLE_STREAM_READER_H_
