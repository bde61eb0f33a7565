#ifndef PSTRAIN_DATA_BATCHER_H_
#define PSTRAIN_DATA_BATCHER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "data/dataset.h"

namespace pstrain {

// Draws full batches from one task's shard of a dataset, epoch after epoch.
//
// Shard `task` of `num_tasks` is the examples i with i % num_tasks == task, so
// the shards of all tasks are disjoint and together cover the dataset.
//
// With shuffle, each epoch visits the shard in a new order that is a pure
// function of (seed, epoch number, shard): the same on every run and platform
// (the permutation is computed here, not by std::shuffle, whose algorithm is
// up to the standard library), so a restarted worker can reproduce it.
// Without shuffle, every epoch is in dataset order.
//
// `*dataset` must outlive the iterator and must not change while it is in use.
// Not thread-safe; use one iterator per thread (they may share the dataset).
class BatchIterator {
 public:
  // InvalidArgument for a null or inconsistent dataset, batch_size <= 0,
  // num_tasks <= 0, task outside [0, num_tasks), or an empty shard.
  static absl::StatusOr<std::unique_ptr<BatchIterator>> Create(const Dataset* dataset,
                                                               int batch_size, int task,
                                                               int num_tasks, bool shuffle,
                                                               uint64_t seed);

  BatchIterator(const BatchIterator&) = delete;
  BatchIterator& operator=(const BatchIterator&) = delete;

  // Fills the next batch: `images` (batch_size * H * W * C floats, NHWC,
  // pixel / 255 so in [0, 1]) and `labels` (batch_size). Every batch is full:
  // at the end of an epoch it continues into the next one (reshuffled), so a
  // batch may span two epochs, and a batch larger than the shard repeats
  // examples.
  void Next(float* images, int32_t* labels);

  // Moves past the next `batches` batches without reading them, as if Next
  // had been called that many times (a job resumed at global step S skips S
  // batches, so a sync replica sees the examples an uninterrupted run would).
  void Skip(int64_t batches);

  // Number of completed epochs: incremented as soon as the last example of an
  // epoch has been handed out.
  int64_t epoch() const { return epoch_; }
  int64_t shard_size() const { return static_cast<int64_t>(order_.size()); }
  int batch_size() const { return batch_size_; }

 private:
  BatchIterator(const Dataset* dataset, int batch_size, std::vector<int64_t> shard, bool shuffle,
                uint64_t seed);

  // Sets order_ for epoch_.
  void StartEpoch();

  const Dataset* const dataset_;
  const int batch_size_;
  const std::vector<int64_t> shard_;  // this task's example indices, ascending
  const bool shuffle_;
  const uint64_t seed_;
  std::vector<int64_t> order_;  // shard_ in this epoch's order
  size_t position_ = 0;         // next index into order_
  int64_t epoch_ = 0;
};

// Converts examples [begin, begin + count) of `dataset`, in order, to float
// pixel / 255 (NHWC) in `images` (count * example_size() floats) and copies
// their labels to `labels` (count). For evaluation. The range must lie within
// the dataset (checked; a violation is a programmer error and aborts).
void GatherRange(const Dataset& dataset, int64_t begin, int64_t count, float* images,
                 int32_t* labels);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_BATCHER_H_
