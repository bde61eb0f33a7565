#ifndef PSTRAIN_DATA_DATASET_H_
#define PSTRAIN_DATA_DATASET_H_

#include <cstdint>
#include <vector>

namespace pstrain {

// An in-memory image classification dataset. Pixels stay uint8 (a quarter of
// the memory of float); batches are converted to float as they are drawn.
// Images are HWC per example and examples are contiguous, so example i is
// images[i * example_size(), (i + 1) * example_size()).
//
// Immutable once loaded; any number of threads may read it concurrently.
struct Dataset {
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> images;  // size() * height * width * channels
  std::vector<int32_t> labels;  // size()

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t example_size() const { return int64_t{height} * width * channels; }
};

enum class Split { kTrain, kTest };

// "train" or "test", for messages.
const char* SplitName(Split split);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_DATASET_H_
