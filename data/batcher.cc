#include "data/batcher.h"

#include <algorithm>
#include <array>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

// pixel / 255 for every byte value: exact division once, a lookup per pixel.
const std::array<float, 256>& PixelToFloat() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = static_cast<float>(i) / 255.0f;
    return t;
  }();
  return table;
}

// Example `index`'s dense input: pixels / 255, or tabular dense features as
// stored.
void ConvertExample(const Dataset& dataset, int64_t index, float* out) {
  const int64_t n = dataset.example_size();
  if (dataset.tabular) {
    const float* in = dataset.dense.data() + index * n;
    std::copy(in, in + n, out);
    return;
  }
  const auto& table = PixelToFloat();
  const uint8_t* in = dataset.images.data() + index * n;
  for (int64_t i = 0; i < n; ++i) out[i] = table[in[i]];
}

// Programmer errors: the indices come from SelectSparseFeatures.
void CheckColumns(const Dataset& dataset, const std::vector<int>& columns) {
  for (int c : columns) {
    CHECK(c >= 0 && static_cast<size_t>(c) < dataset.sparse.size())
        << "sparse column " << c << " of a dataset with " << dataset.sparse.size();
  }
}

// Replaces `*sparse` by empty columns named and typed as `columns` of
// `dataset`, keeping its memory.
void StartSparseBatch(const Dataset& dataset, const std::vector<int>& columns,
                      SparseBatch* sparse) {
  sparse->features.resize(columns.size());
  for (size_t f = 0; f < columns.size(); ++f) {
    const SparseFeatureColumn& from = dataset.sparse[columns[f]];
    SparseFeatureColumn& to = sparse->features[f];
    to.name = from.name;
    to.kind = from.kind;
    to.Clear();
  }
}

void AppendSparseExample(const Dataset& dataset, const std::vector<int>& columns, int64_t index,
                         SparseBatch* sparse) {
  for (size_t f = 0; f < columns.size(); ++f) {
    sparse->features[f].AppendExample(dataset.sparse[columns[f]], index);
  }
}

absl::Status CheckTabularConsistent(const Dataset& dataset) {
  if (dataset.num_dense < 0 ||
      static_cast<int64_t>(dataset.dense.size()) != dataset.size() * dataset.num_dense) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchIterator: inconsistent tabular dataset: ", dataset.size(), " labels, ",
                     dataset.dense.size(), " dense values, ", dataset.num_dense, " per example"));
  }
  for (const SparseFeatureColumn& column : dataset.sparse) {
    if (column.examples() != dataset.size() || column.offsets.front() != 0 ||
        column.offsets.back() != static_cast<int64_t>(column.values.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("BatchIterator: inconsistent tabular dataset: sparse feature ", column.name,
                       " has ", column.examples(), " examples and ", column.values.size(),
                       " values; ", dataset.size(), " labels"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckConsistent(const Dataset& dataset) {
  if (dataset.label_width < 1 || dataset.labels.size() % dataset.label_width != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchIterator: inconsistent dataset: ", dataset.labels.size(), " labels, ",
                     dataset.label_width, " per example"));
  }
  if (dataset.tabular) return CheckTabularConsistent(dataset);
  if (dataset.example_size() <= 0 ||
      static_cast<int64_t>(dataset.images.size()) != dataset.size() * dataset.example_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BatchIterator: inconsistent dataset: ", dataset.size(), " labels, ", dataset.images.size(),
        " pixel bytes, examples of ", dataset.height, "x", dataset.width, "x", dataset.channels));
  }
  return absl::OkStatus();
}

// SplitMix64 finalizer: decorrelates the per-epoch seeds (seed + epoch) so
// nearby seeds do not give related mt19937_64 streams.
uint64_t Mix(uint64_t x) { return MixBits64(x + kSplitMix64Gamma); }

// Uniform in [0, bound) by rejection, so the result does not depend on the
// standard library (std::uniform_int_distribution's algorithm does).
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t bound) {
  // Reject the top partial block of 2^64 so every residue is equally likely.
  const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % bound + 1) % bound;
  uint64_t x;
  do {
    x = rng();
  } while (x > limit);
  return x % bound;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BatchIterator>> BatchIterator::Create(const Dataset* dataset,
                                                                     int batch_size, int task,
                                                                     int num_tasks, bool shuffle,
                                                                     uint64_t seed) {
  if (dataset == nullptr) return absl::InvalidArgumentError("BatchIterator: no dataset");
  if (absl::Status s = CheckConsistent(*dataset); !s.ok()) return s;
  if (batch_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchIterator: batch size must be positive, got ", batch_size));
  }
  if (num_tasks <= 0 || task < 0 || task >= num_tasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchIterator: task ", task, " is not in [0, num_tasks = ", num_tasks, ")"));
  }
  if (task >= dataset->size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BatchIterator: shard ", task, " of ", num_tasks, " is empty: the dataset has ",
        dataset->size(), " examples, fewer than the ", num_tasks, " tasks"));
  }
  std::vector<int64_t> shard;
  shard.reserve((dataset->size() - task + num_tasks - 1) / num_tasks);
  for (int64_t i = task; i < dataset->size(); i += num_tasks) shard.push_back(i);
  return std::unique_ptr<BatchIterator>(
      new BatchIterator(dataset, batch_size, std::move(shard), shuffle, seed));
}

BatchIterator::BatchIterator(const Dataset* dataset, int batch_size, std::vector<int64_t> shard,
                             bool shuffle, uint64_t seed)
    : dataset_(dataset),
      batch_size_(batch_size),
      shard_(std::move(shard)),
      shuffle_(shuffle),
      seed_(seed) {
  StartEpoch();
}

void BatchIterator::StartEpoch() {
  order_ = shard_;
  position_ = 0;
  if (!shuffle_) return;
  std::mt19937_64 rng(Mix(seed_ + static_cast<uint64_t>(epoch_)));
  // Fisher-Yates, written out for the reason given at UniformBelow.
  for (size_t i = order_.size(); i > 1; --i) {
    std::swap(order_[i - 1], order_[UniformBelow(rng, i)]);
  }
}

BatchIterator::~BatchIterator() {
  if (!prefetching_) return;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void BatchIterator::SetSparseFeatures(std::vector<int> columns) {
  CHECK(!prefetching_) << "SetSparseFeatures after StartPrefetch";
  CheckColumns(*dataset_, columns);
  sparse_columns_ = std::move(columns);
}

void BatchIterator::Fill(float* images, float* labels, SparseBatch* sparse) {
  const int64_t example_size = dataset_->example_size();
  const bool augment = augmentation_.any() && !dataset_->tabular;
  if (augment) scratch_.resize(example_size);
  if (sparse != nullptr) StartSparseBatch(*dataset_, sparse_columns_, sparse);
  for (int b = 0; b < batch_size_; ++b) {
    const int64_t index = order_[position_];
    float* image = images + b * example_size;
    ConvertExample(*dataset_, index, image);
    if (sparse != nullptr) AppendSparseExample(*dataset_, sparse_columns_, index, sparse);
    if (augment) {
      AugmentImage(augmentation_, /*training=*/true, dataset_->height, dataset_->width,
                   dataset_->channels, Mix(Mix(seed_ ^ static_cast<uint64_t>(epoch_)) + index),
                   image, scratch_.data());
    }
    const int width = dataset_->label_width;
    std::copy_n(dataset_->labels.begin() + index * width, width, labels + b * width);
    if (++position_ == order_.size()) {
      ++epoch_;
      StartEpoch();
    }
  }
}

void BatchIterator::StartPrefetch() {
  CHECK(!prefetching_) << "StartPrefetch called twice";
  prefetching_ = true;
  ahead_images_.resize(static_cast<size_t>(batch_size_) * dataset_->example_size());
  ahead_labels_.resize(static_cast<size_t>(batch_size_) * dataset_->label_width);
  thread_ = std::thread([this] { Produce(); });
}

void BatchIterator::Produce() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](BatchIterator* it)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(it->mu_) { return !it->ahead_ready_ || it->stop_; },
          this));
      if (stop_) return;
    }
    Fill(ahead_images_.data(), ahead_labels_.data(),
         sparse_columns_.empty() ? nullptr : &ahead_sparse_);
    absl::MutexLock lock(&mu_);
    ahead_epoch_ = epoch_;
    ahead_ready_ = true;
  }
}

void BatchIterator::Next(float* images, float* labels) { Next(images, labels, nullptr); }

void BatchIterator::Next(float* images, float* labels, SparseBatch* sparse) {
  if (!prefetching_) {
    Fill(images, labels, sparse);
    handed_out_epoch_ = epoch_;
    return;
  }
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&ahead_ready_));
  std::copy(ahead_images_.begin(), ahead_images_.end(), images);
  std::copy(ahead_labels_.begin(), ahead_labels_.end(), labels);
  if (sparse != nullptr && sparse_columns_.empty()) {
    sparse->features.clear();
  } else if (sparse != nullptr) {
    std::swap(*sparse, ahead_sparse_);  // the producer refills the caller's old memory
  }
  handed_out_epoch_ = ahead_epoch_;
  ahead_ready_ = false;
}

void BatchIterator::Skip(int64_t batches) {
  CHECK(!prefetching_) << "Skip after StartPrefetch";
  int64_t left = batches * batch_size_;
  while (left > 0) {
    const int64_t step = std::min<int64_t>(left, static_cast<int64_t>(order_.size() - position_));
    position_ += step;
    left -= step;
    if (position_ == order_.size()) {
      ++epoch_;
      StartEpoch();
    }
  }
  handed_out_epoch_ = epoch_;
}

void GatherRange(const Dataset& dataset, int64_t begin, int64_t count, float* images,
                 float* labels) {
  CHECK_GE(begin, 0);
  CHECK_GE(count, 0);
  CHECK_LE(begin + count, dataset.size());
  const int64_t example_size = dataset.example_size();
  for (int64_t i = 0; i < count; ++i) {
    ConvertExample(dataset, begin + i, images + i * example_size);
    const int width = dataset.label_width;
    std::copy_n(dataset.labels.begin() + (begin + i) * width, width, labels + i * width);
  }
}

void GatherRange(const Dataset& dataset, int64_t begin, int64_t count, float* images, float* labels,
                 const std::vector<int>& columns, SparseBatch* sparse) {
  GatherRange(dataset, begin, count, images, labels);
  if (sparse == nullptr) return;
  CheckColumns(dataset, columns);
  StartSparseBatch(dataset, columns, sparse);
  for (int64_t i = 0; i < count; ++i) AppendSparseExample(dataset, columns, begin + i, sparse);
}

}  // namespace pstrain
