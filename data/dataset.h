#ifndef PSTRAIN_DATA_DATASET_H_
#define PSTRAIN_DATA_DATASET_H_

#include <cstdint>
#include <vector>

#include "data/sparse_features.h"

namespace pstrain {

// An in-memory dataset: images with class labels, or tabular examples (see
// `tabular` below). Pixels stay uint8 (a quarter of the memory of float);
// batches are converted to float as they are drawn. Images are HWC per
// example and examples are contiguous, so example i is
// images[i * example_size(), (i + 1) * example_size()).
//
// Immutable once loaded; any number of threads may read it concurrently.
struct Dataset {
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> images;  // size() * height * width * channels
  // size() * label_width: per example, a class id (a whole number) or a
  // regression head's target value for each of the model's heads (one but
  // for a multi-task model), example after example.
  std::vector<float> labels;
  int label_width = 1;

  // Tabular examples (click logs: Criteo TSV, Examples with sparse features)
  // instead of images: `num_dense` float features per example, row-major in
  // `dense`, and sparse features, one column each with size() examples.
  // `images` is empty and height, width and channels are 0.
  bool tabular = false;
  int64_t num_dense = 0;
  std::vector<float> dense;  // size() * num_dense
  std::vector<SparseFeatureColumn> sparse;

  int64_t size() const { return static_cast<int64_t>(labels.size()) / label_width; }
  // Floats of one example's dense input: pixels, or tabular dense features.
  int64_t example_size() const { return tabular ? num_dense : int64_t{height} * width * channels; }
};

enum class Split { kTrain, kTest };

// "train" or "test", for messages.
const char* SplitName(Split split);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_DATASET_H_
