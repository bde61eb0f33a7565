#ifndef PSTRAIN_DATA_STREAM_STREAM_POSITION_H_
#define PSTRAIN_DATA_STREAM_STREAM_POSITION_H_

// Where an ExampleStream (data/stream/example_stream.h) is: where the window being
// handed out began in each open file, which files of the epoch are begun,
// and how many of the window's examples were handed out. Saved with every
// checkpoint as one line of text, so that a restarted replica continues with
// the very next example.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain {

// Written as one line of text (ToString) that FromString reads back, e.g.
//   epoch=1 next_file=3 window=2 taken=17 open=0:4096:31,2:0:0
// (each open file as file:offset:record; following new files, listed=N
// comes before open).
struct InputPosition {
  struct Open {
    int64_t file = 0;     // index into the epoch's order of the replica's files
    uint64_t offset = 0;  // decompressed offset of its next record
    int64_t record = 0;   // number of its next record
    bool operator==(const Open&) const = default;
  };
  int64_t epoch = 0;
  int64_t next_file = 0;   // index into the epoch's order of the next file to open
  std::vector<Open> open;  // the files being read, in the order records are taken
  int64_t window = 0;      // windows begun in this epoch
  int64_t taken = 0;       // examples of that window handed out
  // Following new files: the files of the list the window could read (the
  // list is read again only between windows); 0 otherwise.
  int64_t listed = 0;
  bool operator==(const InputPosition&) const = default;

  std::string ToString() const;
  // InvalidArgument naming what is wrong for text ToString did not write.
  static absl::StatusOr<InputPosition> FromString(std::string_view text);
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_STREAM_STREAM_POSITION_H_
