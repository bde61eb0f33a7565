#ifndef PSTRAIN_DATA_STREAM_STREAM_DEAL_H_
#define PSTRAIN_DATA_STREAM_STREAM_DEAL_H_

// How an ExampleStream (data/stream/example_stream.h) deals its input: which files a
// replica reads and in what order, and the order a window's examples are
// handed out in. Every order is drawn from (seed, replica, epoch, window), so
// a stream re-read from its position hands out the same examples in the same
// order. EpochPieces (example_stream.h) is defined here too.

#include <cstdint>
#include <string>
#include <vector>

#include "data/stream/example_stream.h"

namespace pstrain {

// The order the `n` examples of window `window` of epoch `epoch` are handed
// out in, as indexes into the order they were read in: drawn from
// (options.seed, options.replica, epoch, window) with a shuffle_buffer, the
// read order without one.
std::vector<int64_t> WindowOrder(const ExampleStreamOptions& options, int64_t epoch, int64_t window,
                                 int64_t n);

// Following new files: the files of the list `listed` replica
// options.replica reads, file i when i % options.num_replicas == replica, in
// the list's order.
std::vector<std::string> ListedFilesOf(const ExampleStreamOptions& options,
                                       const std::vector<std::string>& listed);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_STREAM_STREAM_DEAL_H_
