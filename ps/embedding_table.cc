#include "ps/embedding_table.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

constexpr int64_t kMaxDim = 65536;
// Records are allocated in chunks of at most this many bytes (a power of two
// records, at least one), so a stripe wastes at most one chunk.
constexpr int64_t kChunkBytes = 64 * 1024;
// A record: [id: int64][count: uint32][last step: int64, only with
// ttl_steps > 0][weights][slots], in floats. Without eviction nothing reads
// the last step, and its 8 bytes would be an eighth of a dim-8 Adagrad row.
// The count (pushes applied to the row, saturating) is 4 bytes: the
// projector's "most used rows" need an order, not an exact figure past 4e9.
constexpr int64_t kIdFloats = 2;
constexpr int64_t kCountFloats = 1;
constexpr int64_t kLastStepFloats = 2;
constexpr int kStripeBits = 6;
static_assert(EmbeddingTable::kNumStripes == 1 << kStripeBits);
constexpr uint64_t kStripeSalt = 0x5851f42d4c957f2dULL;

// An allocator that keeps a running count of the bytes it holds, so
// MemoryBytes() reports what the hash containers really allocated.
template <class T>
class CountingAllocator {
 public:
  using value_type = T;
  explicit CountingAllocator(int64_t* bytes) : bytes_(bytes) {}
  template <class U>
  CountingAllocator(const CountingAllocator<U>& other) : bytes_(other.counter()) {}

  T* allocate(size_t n) {
    *bytes_ += static_cast<int64_t>(n * sizeof(T));
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, size_t n) {
    *bytes_ -= static_cast<int64_t>(n * sizeof(T));
    std::allocator<T>().deallocate(p, n);
  }
  int64_t* counter() const { return bytes_; }

  template <class U>
  bool operator==(const CountingAllocator<U>& other) const {
    return bytes_ == other.counter();
  }

 private:
  int64_t* bytes_;
};

// Fixed-size records in chunks, addressed by a 32-bit index. A free
// record's id field holds -2 - (the next free record, or -1).
class RecordStore {
 public:
  // `last_step`: whether records hold one.
  RecordStore(int64_t stride_floats, int chunk_shift, bool last_step)
      : stride_(stride_floats),
        shift_(chunk_shift),
        header_(kIdFloats + kCountFloats + (last_step ? kLastStepFloats : 0)) {}

  float* Record(uint32_t r) const {
    return chunks_[r >> shift_].get() + static_cast<int64_t>(r & ((1u << shift_) - 1)) * stride_;
  }
  int64_t IdOf(uint32_t r) const { return GetInt(r, 0); }
  // 0 for records without a last step.
  int64_t LastStep(uint32_t r) const { return header_ > kStepOffset ? GetInt(r, kStepOffset) : 0; }
  void SetId(uint32_t r, int64_t id) { SetInt(r, 0, id); }
  void SetLastStep(uint32_t r, int64_t step) {
    if (header_ > kStepOffset) SetInt(r, kStepOffset, step);
  }
  uint32_t Count(uint32_t r) const {
    uint32_t v;
    std::memcpy(&v, Record(r) + kIdFloats, sizeof(v));
    return v;
  }
  void SetCount(uint32_t r, uint32_t count) {
    std::memcpy(Record(r) + kIdFloats, &count, sizeof(count));
  }
  // One more push applied, saturating.
  void CountPush(uint32_t r) {
    const uint32_t c = Count(r);
    if (c != std::numeric_limits<uint32_t>::max()) SetCount(r, c + 1);
  }
  float* Data(uint32_t r) const { return Record(r) + header_; }

  uint32_t Allocate() {
    if (free_head_ >= 0) {
      const uint32_t r = static_cast<uint32_t>(free_head_);
      free_head_ = -2 - IdOf(r);
      return r;
    }
    CHECK_LT(high_water_, std::numeric_limits<uint32_t>::max())
        << "an embedding table stripe is full (2^32 rows, terabytes of memory)";
    const uint32_t r = high_water_++;
    if ((r >> shift_) == chunks_.size()) {
      chunks_.push_back(std::make_unique_for_overwrite<float[]>(stride_ << shift_));
    }
    return r;
  }
  void Free(uint32_t r) {
    SetId(r, -2 - free_head_);
    free_head_ = r;
  }
  // Forgets every record and gives the memory back.
  void Clear() {
    chunks_.clear();
    chunks_.shrink_to_fit();
    high_water_ = 0;
    free_head_ = -1;
  }

  // Records handed out so far; the live ones have an id >= 0.
  uint32_t high_water() const { return high_water_; }

  int64_t Bytes() const {
    return static_cast<int64_t>(chunks_.size()) * (stride_ << shift_) *
               static_cast<int64_t>(sizeof(float)) +
           static_cast<int64_t>(chunks_.capacity() * sizeof(chunks_[0]));
  }

 private:
  int64_t GetInt(uint32_t r, int offset) const {
    int64_t v;
    std::memcpy(&v, Record(r) + offset, sizeof(v));
    return v;
  }
  void SetInt(uint32_t r, int offset, int64_t v) { std::memcpy(Record(r) + offset, &v, sizeof(v)); }

  static constexpr int kStepOffset = kIdFloats + kCountFloats;

  const int64_t stride_;
  const int shift_;
  const int64_t header_;  // floats before a record's weights
  std::vector<std::unique_ptr<float[]>> chunks_;
  uint32_t high_water_ = 0;
  int64_t free_head_ = -1;
};

// The index holds record numbers; hashing and comparing read the id from
// the record, and lookups pass an IdKey (heterogeneous lookup).
struct IdKey {
  int64_t id;
};

struct IndexHash {
  using is_transparent = void;
  size_t operator()(uint32_t r) const { return absl::Hash<int64_t>()(store->IdOf(r)); }
  size_t operator()(IdKey key) const { return absl::Hash<int64_t>()(key.id); }
  const RecordStore* store;
};

struct IndexEq {
  using is_transparent = void;
  bool operator()(uint32_t a, uint32_t b) const { return store->IdOf(a) == store->IdOf(b); }
  bool operator()(uint32_t a, IdKey b) const { return store->IdOf(a) == b.id; }
  bool operator()(IdKey a, uint32_t b) const { return a.id == store->IdOf(b); }
  const RecordStore* store;
};

using Index = absl::flat_hash_set<uint32_t, IndexHash, IndexEq, CountingAllocator<uint32_t>>;

// An id seen in pushes but not yet admitted (min_count > 1).
struct Pending {
  int64_t count = 0;
  int64_t last_step = 0;
};
using PendingMap =
    absl::flat_hash_map<int64_t, Pending, absl::Hash<int64_t>, std::equal_to<int64_t>,
                        CountingAllocator<std::pair<const int64_t, Pending>>>;

// Groups positions 0..n-1 by the stripe of ids[i]: stripe s's positions are
// order[begin[s], begin[s + 1]), in push order.
void GroupByStripe(absl::Span<const int64_t> ids, int (*stripe_of)(int64_t),
                   std::vector<uint32_t>* order,
                   std::array<uint32_t, EmbeddingTable::kNumStripes + 1>* begin) {
  std::vector<uint8_t> stripe(ids.size());
  begin->fill(0);
  for (size_t i = 0; i < ids.size(); ++i) {
    stripe[i] = static_cast<uint8_t>(stripe_of(ids[i]));
    ++(*begin)[stripe[i] + 1];
  }
  for (int s = 0; s < EmbeddingTable::kNumStripes; ++s) (*begin)[s + 1] += (*begin)[s];
  std::array<uint32_t, EmbeddingTable::kNumStripes> next;
  std::copy(begin->begin(), begin->end() - 1, next.begin());
  order->resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) (*order)[next[stripe[i]]++] = static_cast<uint32_t>(i);
}

}  // namespace

struct EmbeddingTable::Stripe {
  Stripe(int64_t stride_floats, int chunk_shift, bool last_step)
      : store(stride_floats, chunk_shift, last_step),
        index(0, IndexHash{&store}, IndexEq{&store}, CountingAllocator<uint32_t>(&index_bytes)),
        pending(0, absl::Hash<int64_t>(), std::equal_to<int64_t>(),
                PendingMap::allocator_type(&pending_bytes)) {}

  // Returns the record of `id`, or -1.
  int64_t Find(int64_t id) const ABSL_SHARED_LOCKS_REQUIRED(mu) {
    auto it = index.find(IdKey{id});
    return it == index.end() ? -1 : static_cast<int64_t>(*it);
  }
  // Brings the index entries a Find of `id` probes into the cache.
  void Prefetch(int64_t id) const ABSL_SHARED_LOCKS_REQUIRED(mu) { index.prefetch(IdKey{id}); }

  mutable absl::Mutex mu;
  // Declared before the containers whose allocators point at them.
  int64_t index_bytes ABSL_GUARDED_BY(mu) = 0;
  int64_t pending_bytes ABSL_GUARDED_BY(mu) = 0;
  RecordStore store ABSL_GUARDED_BY(mu);
  Index index ABSL_GUARDED_BY(mu);
  PendingMap pending ABSL_GUARDED_BY(mu);
  int64_t rows ABSL_GUARDED_BY(mu) = 0;
};

absl::StatusOr<std::unique_ptr<EmbeddingTable>> EmbeddingTable::Create(
    const EmbeddingTableOptions& options) {
  if (options.name.empty()) {
    return absl::InvalidArgumentError("embedding table: the name must not be empty");
  }
  auto bad = [&](absl::string_view what, int64_t value) {
    return absl::InvalidArgumentError(
        absl::StrCat("embedding table '", options.name, "': ", what, ", got ", value));
  };
  if (options.dim < 1 || options.dim > kMaxDim) {
    return bad(absl::StrCat("dim must be in [1, ", kMaxDim, "]"), options.dim);
  }
  if (options.buckets < 0) return bad("buckets must be >= 0 (0: a dynamic table)", options.buckets);
  if (options.min_count < 0) return bad("min_count must be >= 0", options.min_count);
  if (options.ttl_steps < 0)
    return bad("ttl_steps must be >= 0 (0: never evict)", options.ttl_steps);
  absl::Status status = ValidateEmbeddingInitializer(options.name, options.initializer);
  if (!status.ok()) return status;
  status = ValidateEmbeddingOptimizer(options.name, options.optimizer);
  if (!status.ok()) return status;
  return std::unique_ptr<EmbeddingTable>(new EmbeddingTable(options));
}

EmbeddingTable::EmbeddingTable(const EmbeddingTableOptions& options)
    : options_(options),
      initializer_(options.name, options.initializer),
      optimizer_(options.optimizer, options.dim) {
  const bool last_step = options.ttl_steps > 0;
  const int64_t stride =
      kIdFloats + kCountFloats + (last_step ? kLastStepFloats : 0) + optimizer_.stored_floats();
  const int64_t records = std::max<int64_t>(1, kChunkBytes / (stride * sizeof(float)));
  const int shift = std::bit_width(static_cast<uint64_t>(records)) - 1;
  for (auto& stripe : stripes_) stripe = std::make_unique<Stripe>(stride, shift, last_step);
}

EmbeddingTable::~EmbeddingTable() = default;

int EmbeddingTable::StripeOf(int64_t id) {
  return static_cast<int>(MixBits64(static_cast<uint64_t>(id) ^ kStripeSalt) >> (64 - kStripeBits));
}

absl::Status EmbeddingTable::CheckId(int64_t id) const {
  if (id < 0) {
    return absl::InvalidArgumentError(absl::StrCat("embedding table '", options_.name, "': id ", id,
                                                   " is negative; ids must be >= 0"));
  }
  if (options_.buckets > 0 && id >= options_.buckets) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding table '", options_.name, "': id ", id, " is out of range for a table of ",
        options_.buckets, " buckets (ids must be in [0, ", options_.buckets, "))"));
  }
  return absl::OkStatus();
}

void EmbeddingTable::PrefetchIndex(absl::Span<const int64_t> ids,
                                   const std::vector<uint32_t>& order,
                                   const std::array<uint32_t, kNumStripes + 1>& begin) const {
  for (int s = 0; s < kNumStripes; ++s) {
    if (begin[s] == begin[s + 1]) continue;
    const Stripe& stripe = *stripes_[s];
    absl::ReaderMutexLock lock(&stripe.mu);
    for (uint32_t k = begin[s]; k < begin[s + 1]; ++k) stripe.Prefetch(ids[order[k]]);
  }
}

absl::Status EmbeddingTable::Lookup(absl::Span<const int64_t> ids, absl::Span<float> out) const {
  const int64_t dim = options_.dim;
  if (static_cast<int64_t>(out.size()) != static_cast<int64_t>(ids.size()) * dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding table '", options_.name, "': lookup of ", ids.size(), " ids needs an output of ",
        ids.size(), " x ", dim, " floats, got ", out.size()));
  }
  for (int64_t id : ids) {
    absl::Status status = CheckId(id);
    if (!status.ok()) return status;
  }
  std::vector<uint32_t> order;
  std::array<uint32_t, kNumStripes + 1> begin;
  GroupByStripe(ids, &StripeOf, &order, &begin);
  PrefetchIndex(ids, order, begin);
  std::vector<uint32_t> absent;
  for (int s = 0; s < kNumStripes; ++s) {
    if (begin[s] == begin[s + 1]) continue;
    const Stripe& stripe = *stripes_[s];
    absl::ReaderMutexLock lock(&stripe.mu);
    for (uint32_t k = begin[s]; k < begin[s + 1]; ++k) {
      const uint32_t i = order[k];
      const int64_t r = stripe.Find(ids[i]);
      if (r < 0) {
        absent.push_back(i);
      } else {
        optimizer_.ReadWeights(stripe.store.Data(static_cast<uint32_t>(r)), &out[i * dim]);
      }
    }
  }
  // Initial values are computed outside the locks: they depend on the id only.
  for (uint32_t i : absent) initializer_.Fill(ids[i], out.subspan(i * dim, dim));
  return absl::OkStatus();
}

absl::Status EmbeddingTable::ApplyGradients(absl::Span<const int64_t> ids,
                                            absl::Span<const float> grads, int64_t step) {
  const int64_t dim = options_.dim;
  if (static_cast<int64_t>(grads.size()) != static_cast<int64_t>(ids.size()) * dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding table '", options_.name, "': a push of ", ids.size(), " ids needs ", ids.size(),
        " x ", dim, " gradient floats, got ", grads.size(), "; nothing applied"));
  }
  for (int64_t id : ids) {
    absl::Status status = CheckId(id);
    if (!status.ok())
      return absl::Status(status.code(), absl::StrCat(status.message(), "; nothing applied"));
  }
  {
    std::vector<std::pair<int64_t, uint32_t>> sorted(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) sorted[i] = {ids[i], static_cast<uint32_t>(i)};
    std::sort(sorted.begin(), sorted.end());
    for (size_t k = 1; k < sorted.size(); ++k) {
      if (sorted[k].first == sorted[k - 1].first) {
        return absl::InvalidArgumentError(absl::StrCat(
            "embedding table '", options_.name, "': id ", sorted[k].first,
            " appears twice in one push (positions ", sorted[k - 1].second, " and ",
            sorted[k].second, "); a worker must sum the gradients of an id; nothing applied"));
      }
    }
  }
  std::vector<uint32_t> order;
  std::array<uint32_t, kNumStripes + 1> begin;
  GroupByStripe(ids, &StripeOf, &order, &begin);
  PrefetchIndex(ids, order, begin);
  std::vector<float> initial(dim);
  const int64_t min_count = options_.min_count;
  for (int s = 0; s < kNumStripes; ++s) {
    if (begin[s] == begin[s + 1]) continue;
    Stripe& stripe = *stripes_[s];
    absl::MutexLock lock(&stripe.mu);
    for (uint32_t k = begin[s]; k < begin[s + 1]; ++k) {
      const uint32_t i = order[k];
      const int64_t id = ids[i];
      const float* grad = &grads[i * dim];
      int64_t found = stripe.Find(id);
      if (found >= 0) {
        const uint32_t r = static_cast<uint32_t>(found);
        optimizer_.Apply(grad, stripe.store.Data(r));
        stripe.store.SetLastStep(r, std::max(step, stripe.store.LastStep(r)));
        stripe.store.CountPush(r);
        continue;
      }
      if (min_count > 1) {
        auto it = stripe.pending.find(id);
        if (it == stripe.pending.end()) it = stripe.pending.emplace(id, Pending{}).first;
        it->second.last_step = std::max(step, it->second.last_step);
        if (++it->second.count < min_count) continue;
        stripe.pending.erase(it);
      }
      const uint32_t r = stripe.store.Allocate();
      stripe.store.SetId(r, id);
      stripe.store.SetLastStep(r, step);
      // Every push of the id counts, those before its admission too.
      stripe.store.SetCount(r, static_cast<uint32_t>(std::clamp<int64_t>(
                                   min_count, 1, std::numeric_limits<uint32_t>::max())));
      initializer_.Fill(id, absl::MakeSpan(initial));
      optimizer_.InitRow(initial.data(), stripe.store.Data(r));
      optimizer_.Apply(grad, stripe.store.Data(r));
      stripe.index.insert(r);
      ++stripe.rows;
    }
  }
  return absl::OkStatus();
}

void EmbeddingTable::Clear() {
  for (auto& stripe : stripes_) {
    absl::MutexLock lock(&stripe->mu);
    stripe->index.clear();
    stripe->pending.clear();
    stripe->store.Clear();
    stripe->rows = 0;
  }
}

int64_t EmbeddingTable::Evict(int64_t step) {
  if (options_.ttl_steps == 0) return 0;
  const int64_t cutoff = step - options_.ttl_steps;  // evict last_step <= cutoff
  int64_t dropped = 0;
  for (auto& stripe_ptr : stripes_) {
    Stripe& stripe = *stripe_ptr;
    absl::MutexLock lock(&stripe.mu);
    const uint32_t n = stripe.store.high_water();
    for (uint32_t r = 0; r < n; ++r) {
      const int64_t id = stripe.store.IdOf(r);
      if (id < 0 || stripe.store.LastStep(r) > cutoff) continue;
      stripe.index.erase(IdKey{id});  // before Free, which overwrites the id
      stripe.store.Free(r);
      --stripe.rows;
      ++dropped;
    }
    absl::erase_if(stripe.pending,
                   [cutoff](const auto& entry) { return entry.second.last_step <= cutoff; });
  }
  return dropped;
}

int64_t EmbeddingTable::size() const {
  int64_t total = 0;
  for (const auto& stripe : stripes_) {
    absl::ReaderMutexLock lock(&stripe->mu);
    total += stripe->rows;
  }
  return total;
}

void EmbeddingTable::ForEachPending(PendingVisitor fn) const {
  for (const auto& stripe : stripes_) {
    absl::ReaderMutexLock lock(&stripe->mu);
    for (const auto& [id, pending] : stripe->pending) fn(id, pending.count, pending.last_step);
  }
}

absl::Status EmbeddingTable::InsertPending(int64_t id, int64_t count, int64_t last_step) {
  PSTRAIN_RETURN_IF_ERROR(CheckId(id));
  if (count < 1) {
    return absl::InvalidArgumentError(absl::StrCat("embedding table '", options_.name, "': id ", id,
                                                   " pending with count ", count));
  }
  Stripe& stripe = *stripes_[StripeOf(id)];
  absl::MutexLock lock(&stripe.mu);
  stripe.pending[id] = Pending{count, last_step};
  return absl::OkStatus();
}

int64_t EmbeddingTable::pending_admissions() const {
  int64_t total = 0;
  for (const auto& stripe : stripes_) {
    absl::ReaderMutexLock lock(&stripe->mu);
    total += static_cast<int64_t>(stripe->pending.size());
  }
  return total;
}

int64_t EmbeddingTable::MemoryBytes() const {
  int64_t total = sizeof(*this) + static_cast<int64_t>(options_.name.capacity());
  for (const auto& stripe : stripes_) {
    absl::ReaderMutexLock lock(&stripe->mu);
    total += sizeof(Stripe) + stripe->store.Bytes() + stripe->index_bytes + stripe->pending_bytes;
  }
  return total;
}

int64_t EmbeddingTable::RowBytes() const {
  return optimizer_.stored_floats() * static_cast<int64_t>(sizeof(float));
}

int64_t EmbeddingTable::slot_floats() const { return optimizer_.slot_floats(); }

absl::Status EmbeddingTable::ForEachRow(RowVisitor fn) const {
  const int64_t dim = options_.dim;
  const int64_t weight_floats = optimizer_.weight_floats();
  std::vector<float> weights(dim);
  for (const auto& stripe_ptr : stripes_) {
    const Stripe& stripe = *stripe_ptr;
    absl::ReaderMutexLock lock(&stripe.mu);
    const uint32_t n = stripe.store.high_water();
    for (uint32_t r = 0; r < n; ++r) {
      const int64_t id = stripe.store.IdOf(r);
      if (id < 0) continue;
      const float* data = stripe.store.Data(r);
      optimizer_.ReadWeights(data, weights.data());
      absl::Status status =
          fn(id, weights, absl::MakeConstSpan(data + weight_floats, slot_floats()),
             stripe.store.LastStep(r), stripe.store.Count(r));
      if (!status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

absl::Status EmbeddingTable::InsertRow(int64_t id, absl::Span<const float> weights,
                                       absl::Span<const float> slots, int64_t last_step,
                                       int64_t count) {
  absl::Status status = CheckId(id);
  if (!status.ok()) return status;
  if (static_cast<int64_t>(weights.size()) != options_.dim ||
      static_cast<int64_t>(slots.size()) != slot_floats()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding table '", options_.name, "': row ", id, " has ", weights.size(), " weights and ",
        slots.size(), " slot floats; the table needs ", options_.dim, " and ", slot_floats()));
  }
  const std::string bad = optimizer_.CheckRestoredRow(weights, slots);
  if (!bad.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("embedding table '", options_.name, "': row ", id, ": ", bad));
  }
  Stripe& stripe = *stripes_[StripeOf(id)];
  absl::MutexLock lock(&stripe.mu);
  if (stripe.Find(id) >= 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("embedding table '", options_.name, "': row ", id, " is already present"));
  }
  stripe.pending.erase(id);
  const uint32_t r = stripe.store.Allocate();
  stripe.store.SetId(r, id);
  stripe.store.SetLastStep(r, last_step);
  stripe.store.SetCount(r, static_cast<uint32_t>(std::clamp<int64_t>(
                               count, 0, std::numeric_limits<uint32_t>::max())));
  optimizer_.RestoreRow(weights, slots, stripe.store.Data(r));
  stripe.index.insert(r);
  ++stripe.rows;
  return absl::OkStatus();
}

}  // namespace pstrain
