#ifndef PSTRAIN_PS_EMBEDDING_TABLE_H_
#define PSTRAIN_PS_EMBEDDING_TABLE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ps/embedding_initializer.h"
#include "ps/embedding_optimizers.h"

namespace pstrain {

struct EmbeddingTableOptions {
  std::string name;  // non-empty; names the table in errors and seeds its initializer
  int64_t dim = 0;   // floats per row, in [1, 65536]
  // > 0: a bucketed table, ids in [0, buckets). 0: a dynamic table, any id >= 0.
  int64_t buckets = 0;
  EmbeddingInitializerOptions initializer;
  EmbeddingOptimizerOptions optimizer;
  // Admission: an id gets a row at the push that makes it seen in min_count
  // pushes (0 and 1: at its first push). Until then its lookups give its
  // initial value and its pushes only count it; their gradients are dropped.
  int64_t min_count = 0;
  // Eviction: Evict(step) drops the rows last updated at a step <= step -
  // ttl_steps (and the admission counts of ids last pushed then). 0: never.
  int64_t ttl_steps = 0;
};

// The rows of one sparse variable that one ps holds, with their optimizer
// slots.
//
// Rows are created by the first push that admits them (see min_count), never
// by a lookup: a lookup of an id with no row gives its initial value (a
// function of seed, table name and id alone, so every ps computes the same
// one) without storing it, so pulls never grow the table.
//
// Storage: 64 stripes chosen by a mix of the id. Each stripe has its own
// absl::Mutex, an array of fixed-size chunks holding records of [id, count
// (pushes applied to the row, 4 bytes, saturating), last step (only when
// ttl_steps > 0: nothing else reads it), weights, slots], and a flat_hash_set of
// record indices looked up by id (its hash and equality read the id from the record, so the index
// costs 4 bytes + 1 control byte per slot rather than the 16 + 1 of a map from id). Evicted records
// go on a free list threaded through their id field and are reused before the chunks grow. Chunks
// and the index never shrink.
//
// Thread safety: every method may be called from many threads at once.
// Lookup and ApplyGradients lock one stripe at a time, so each row is read
// or updated atomically but a whole push is not: a concurrent lookup may see
// some rows of a push updated and others not yet (as Hogwild-style async
// training does anyway).
class EmbeddingTable {
 public:
  static constexpr int kNumStripes = 64;

  // InvalidArgument naming the table and the bad field.
  static absl::StatusOr<std::unique_ptr<EmbeddingTable>> Create(
      const EmbeddingTableOptions& options);

  EmbeddingTable(const EmbeddingTable&) = delete;
  EmbeddingTable& operator=(const EmbeddingTable&) = delete;
  ~EmbeddingTable();

  const EmbeddingTableOptions& options() const { return options_; }
  int64_t dim() const { return options_.dim; }

  // Writes the current weights of rows `ids` to `out` (ids.size() x dim,
  // row-major). Duplicate ids are fine. InvalidArgument (naming the table and
  // id) for a negative id, an id >= buckets or a wrong out size; then `out`
  // is not written.
  absl::Status Lookup(absl::Span<const int64_t> ids, absl::Span<float> out) const;

  // Applies one push: row ids[i] gets gradient grads[i * dim, (i + 1) * dim)
  // and last step max(its last step, step). Ids must be distinct (workers
  // dedup their batch and sum the gradients of an id; the table refuses
  // rather than guess a rule). InvalidArgument naming the table and id for a
  // negative id, an id >= buckets, a duplicate id or a grads size other than
  // ids.size() * dim; a refused push applies nothing and counts nothing.
  absl::Status ApplyGradients(absl::Span<const int64_t> ids, absl::Span<const float> grads,
                              int64_t step);

  // Drops the rows not updated for ttl_steps as of global step `step` (see
  // EmbeddingTableOptions::ttl_steps) and returns how many. 0 when ttl_steps
  // is 0.
  int64_t Evict(int64_t step);

  // Forgets every row and admission count (a restore or a new
  // initialization), stripe by stripe, while other calls may run: a
  // concurrent one sees each stripe before or after it was cleared.
  void Clear();

  // Rows held (admitted), and ids counted but not yet admitted.
  int64_t size() const;
  int64_t pending_admissions() const;

  // Bytes the table holds on the heap: record chunks, the chunk arrays, the
  // hash indexes and admission counters (counted by their allocator), and
  // the stripes themselves. malloc's own per-block overhead is not counted;
  // the chunks are large blocks, so it is small.
  int64_t MemoryBytes() const;
  // Bytes of the floats one row holds: weights + slots. For FTRL that is z
  // and n only (2 x dim), since its weights are computed from them.
  int64_t RowBytes() const;
  // Floats of ForEachRow's `slots` and InsertRow's: dim (Adagrad's
  // accumulator), 2 x dim (FTRL's z then n), 2 x dim + 1 (Adam's m, v, t).
  int64_t slot_floats() const;

  // Calls fn for every row: its id, weights (dim floats; for FTRL computed
  // from z and n), slots, last step (0 in a table without eviction, which
  // keeps none) and count (the pushes of its id, those before its admission
  // included; a restored row keeps its saved count), stripe by stripe in no particular
  // order, and stops at the first error fn returns. Each stripe is
  // read-locked while fn runs on its rows: fn must not call into this table.
  // The spans are valid only during the call.
  using RowVisitor = absl::FunctionRef<absl::Status(int64_t id, absl::Span<const float> weights,
                                                    absl::Span<const float> slots,
                                                    int64_t last_step, int64_t count)>;
  absl::Status ForEachRow(RowVisitor fn) const;

  // The ids counted but not yet admitted (min_count): each with its count
  // and the last step it was pushed at, stripe by stripe (fn must not call
  // into this table); and one put back (a replicated ps's copy), replacing
  // what the id had. InvalidArgument for a bad id or a count < 1.
  using PendingVisitor = absl::FunctionRef<void(int64_t id, int64_t count, int64_t last_step)>;
  void ForEachPending(PendingVisitor fn) const;
  absl::Status InsertPending(int64_t id, int64_t count, int64_t last_step);

  // Restores one row as ForEachRow gave it (for a checkpoint restore, onto
  // any number of ps). Bypasses admission. A table without eviction ignores
  // `last_step`; `count` is clamped to [0, 2^32 - 1]. For FTRL `weights` must have dim
  // floats but is not used: z and n define the row. InvalidArgument for a
  // bad id, wrong sizes, a non-finite value or a slot out of its domain;
  // AlreadyExists if the id has a row.
  absl::Status InsertRow(int64_t id, absl::Span<const float> weights, absl::Span<const float> slots,
                         int64_t last_step, int64_t count = 0);

 private:
  struct Stripe;
  explicit EmbeddingTable(const EmbeddingTableOptions& options);

  absl::Status CheckId(int64_t id) const;
  static int StripeOf(int64_t id);
  // Brings the index entries a call is about to probe for `ids` (grouped by
  // stripe: order[begin[s], begin[s + 1]) are stripe s's) into the cache all
  // at once, so their misses overlap instead of stalling one id at a time.
  void PrefetchIndex(absl::Span<const int64_t> ids, const std::vector<uint32_t>& order,
                     const std::array<uint32_t, kNumStripes + 1>& begin) const;

  const EmbeddingTableOptions options_;
  const EmbeddingInitializer initializer_;
  const EmbeddingRowOptimizer optimizer_;
  std::array<std::unique_ptr<Stripe>, kNumStripes> stripes_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_EMBEDDING_TABLE_H_
