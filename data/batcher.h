#ifndef PSTRAIN_DATA_BATCHER_H_
#define PSTRAIN_DATA_BATCHER_H_

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "data/augment.h"
#include "data/batch_source.h"
#include "data/dataset.h"
#include "data/sparse_features.h"

namespace pstrain {

// Draws full batches from one task's shard of a dataset, epoch after epoch.
// The dataset holds images or tabular examples (dense and sparse features).
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
class BatchIterator : public BatchSource {
 public:
  // InvalidArgument for a null or inconsistent dataset, batch_size <= 0,
  // num_tasks <= 0, task outside [0, num_tasks), or an empty shard.
  static absl::StatusOr<std::unique_ptr<BatchIterator>> Create(const Dataset* dataset,
                                                               int batch_size, int task,
                                                               int num_tasks, bool shuffle,
                                                               uint64_t seed);

  BatchIterator(const BatchIterator&) = delete;
  BatchIterator& operator=(const BatchIterator&) = delete;
  ~BatchIterator() override;

  // Next(images, labels, sparse); never fails.
  absl::Status NextBatch(float* images, float* labels, SparseBatch* sparse) override {
    Next(images, labels, sparse);
    return absl::OkStatus();
  }

  // Training augmentation and standardization of every image (data/augment.h),
  // random per example and epoch but the same on every run. Before Next.
  // Ignored for tabular data.
  void SetAugmentation(const Augmentation& augmentation) { augmentation_ = augmentation; }

  // The sparse features that Next(images, labels, sparse) hands out: indices
  // into the dataset's sparse columns (SelectSparseFeatures in data/tabular.h
  // finds them by name), in the order the batch has them. Call before Next
  // and StartPrefetch. The indices must be valid (checked: validate names
  // with SelectSparseFeatures first).
  void SetSparseFeatures(std::vector<int> columns);

  // From here on a background thread prepares the next batch while the
  // caller computes on this one, so training does not wait for input. Call
  // after Skip (which then may not be called again).
  void StartPrefetch();

  // Fills the next batch: `images` (batch_size * H * W * C floats, NHWC,
  // pixel / 255 so in [0, 1]) and `labels` (batch_size * label_width). Every batch is full:
  // at the end of an epoch it continues into the next one (reshuffled), so a
  // batch may span two epochs, and a batch larger than the shard repeats
  // examples.
  // For tabular data `images` receives the dense features instead
  // (batch_size * num_dense floats, as stored: not scaled, not augmented).
  void Next(float* images, float* labels);

  // Next, and for tabular data the batch's sparse features: `*sparse` is
  // replaced by one column per SetSparseFeatures index, in that order, each
  // with the column's name and kind, batch_size examples, offsets starting
  // at 0. `sparse` may be null (then this is Next(images, labels)). Reuses
  // the memory of `*sparse` (with prefetching it is swapped with the batch
  // prepared ahead): pointers into its previous contents become invalid.
  void Next(float* images, float* labels, SparseBatch* sparse);

  // Moves past the next `batches` batches without reading them, as if Next
  // had been called that many times (a job resumed at global step S skips S
  // batches, so a sync replica sees the examples an uninterrupted run would).
  void Skip(int64_t batches);

  // Number of completed epochs: incremented as soon as the last example of an
  // epoch has been handed out (by Next).
  int64_t epoch() const override { return handed_out_epoch_; }
  int64_t shard_size() const { return static_cast<int64_t>(shard_.size()); }
  int batch_size() const override { return batch_size_; }

 private:
  BatchIterator(const Dataset* dataset, int batch_size, std::vector<int64_t> shard, bool shuffle,
                uint64_t seed);

  // Sets order_ for epoch_.
  void StartEpoch();
  // The next batch into the given buffers (advances order_/position_/epoch_).
  void Fill(float* images, float* labels, SparseBatch* sparse);
  void Produce();  // the prefetch thread

  const Dataset* const dataset_;
  const int batch_size_;
  const std::vector<int64_t> shard_;  // this task's example indices, ascending
  const bool shuffle_;
  const uint64_t seed_;
  std::vector<int64_t> order_;  // shard_ in this epoch's order
  size_t position_ = 0;         // next index into order_
  int64_t epoch_ = 0;           // of the next example Fill takes
  int64_t handed_out_epoch_ = 0;
  Augmentation augmentation_;
  std::vector<float> scratch_;
  std::vector<int> sparse_columns_;  // set before the prefetch thread starts

  // Prefetching: one batch ahead, filled by thread_.
  absl::Mutex mu_;
  bool prefetching_ = false;
  bool ahead_ready_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<float> ahead_images_;
  std::vector<float> ahead_labels_;
  SparseBatch ahead_sparse_;  // filled only if sparse_columns_ is not empty
  int64_t ahead_epoch_ = 0;
  std::thread thread_;
};

// Converts examples [begin, begin + count) of `dataset`, in order, to float
// pixel / 255 (NHWC) in `images` (count * example_size() floats) and copies
// their labels to `labels` (count). For evaluation. The range must lie within
// the dataset (checked; a violation is a programmer error and aborts).
// For tabular data `images` receives the dense features as stored.
void GatherRange(const Dataset& dataset, int64_t begin, int64_t count, float* images,
                 float* labels);

// GatherRange, and the examples' sparse features into `*sparse` (if not null):
// one column per index in `columns` (dataset.sparse indices, checked), as
// BatchIterator::Next fills it.
void GatherRange(const Dataset& dataset, int64_t begin, int64_t count, float* images, float* labels,
                 const std::vector<int>& columns, SparseBatch* sparse);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_BATCHER_H_
