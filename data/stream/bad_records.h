#ifndef PSTRAIN_DATA_STREAM_BAD_RECORDS_H_
#define PSTRAIN_DATA_STREAM_BAD_RECORDS_H_

// What an ExampleStream (data/stream/example_stream.h) does with a bad record:
// tf.data's ignore_errors, bounded by ExampleStreamOptions::max_bad_records.
// A record whose data is damaged or does not decode (DataLoss,
// InvalidArgument), or the damaged rest of a file, is skipped and logged
// while fewer than max_bad_records were; the next one fails the stream. A
// file that is gone (NotFound) or cannot be reached is never skipped.
//
// Not thread-safe: the stream's reading thread owns it.

#include <cstdint>

#include "absl/status/status.h"

namespace pstrain {

class BadRecords {
 public:
  explicit BadRecords(int64_t max_bad_records) : max_bad_records_(max_bad_records) {}

  // For the error of a bad record: OK, logged and counted, while fewer than
  // max_bad_records were skipped; else `error`, saying the limit when there
  // is one. An error of any other kind is returned as it is.
  absl::Status Skip(const absl::Status& error);

  // Records skipped so far.
  int64_t skipped() const { return skipped_; }

 private:
  const int64_t max_bad_records_;
  int64_t skipped_ = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_STREAM_BAD_RECORDS_H_
