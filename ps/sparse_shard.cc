#include "ps/sparse_shard.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "common/crc32c.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "ps/embedding_initializer.h"

namespace pstrain {
namespace {

// Steps beyond this are refused, so step arithmetic never overflows.
constexpr int64_t kMaxStep = int64_t{1} << 62;

}  // namespace

uint64_t RowChecksum(int64_t id, absl::Span<const float> weights, absl::Span<const float> slots,
                     int64_t last_step) {
  uint64_t h = MixBits64(static_cast<uint64_t>(id)) ^ static_cast<uint64_t>(last_step);
  auto mix = [&h](absl::Span<const float> values) {
    for (float v : values) {
      uint32_t bits;
      std::memcpy(&bits, &v, sizeof(bits));
      h = MixBits64(h ^ bits);
    }
  };
  mix(weights);
  mix(slots);
  return h;
}

absl::StatusOr<std::unique_ptr<SparseShard>> SparseShard::Create(
    const Model& model, const SparseTableRules& rules, const SparseShardOptions& options) {
  if (options.num_ps < 1 || options.ps_index < 0 || options.ps_index >= options.num_ps ||
      options.replicas_to_aggregate < 1 || options.total_replicas < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse shard: ps ", options.ps_index, " of ", options.num_ps, ", replicas to aggregate ",
        options.replicas_to_aggregate, " of ", options.total_replicas));
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<EmbeddingTable>> tables,
                           CreateModelTables(model, rules));
  std::vector<TableLayout> layout = ComputeShardLayout(model, options.num_ps).tables;
  std::unique_ptr<SparseShard> shard(
      new SparseShard(std::move(layout), std::move(tables), rules, options));
  if (options.sync) {
    SparseShard* self = shard.get();
    shard->timer_ = std::thread([self] { self->TimerLoop(); });
  }
  return shard;
}

SparseShard::SparseShard(std::vector<TableLayout> layout,
                         std::vector<std::unique_ptr<EmbeddingTable>> tables,
                         const SparseTableRules& rules, const SparseShardOptions& options)
    : layout_(std::move(layout)), tables_(std::move(tables)), rules_(rules), options_(options) {
  absl::MutexLock lock(&mu_);
  accum_.resize(layout_.size());
  live_.assign(options_.total_replicas, true);
  last_async_.assign(options_.total_replicas, -1);
}

SparseShard::~SparseShard() {
  Shutdown();
  {
    absl::MutexLock lock(&mu_);
    stop_timer_ = true;
    timer_cv_.Signal();
  }
  if (timer_.joinable()) timer_.join();
}

void SparseShard::ClearLocked() {
  for (const auto& table : tables_) table->Clear();
  for (Accumulator& a : accum_) a = Accumulator();
  pushed_.clear();
  live_.assign(options_.total_replicas, true);
  last_async_.assign(options_.total_replicas, -1);
}

void SparseShard::Reset(int64_t step, int64_t generation) {
  std::vector<Waiter> ready;
  {
    absl::MutexLock lock(&mu_);
    ClearLocked();
    step_ = step;
    last_evict_ = step;
    generation_ = generation;
    initialized_ = true;
    restoring_ = false;
    ready = TakeReadyLocked(/*all=*/true);
  }
  AnswerAll(std::move(ready));
}

absl::Status SparseShard::Check(int table, absl::Span<const int64_t> ids, size_t values) const {
  if (table < 0 || table >= static_cast<int>(tables_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("table ", table, " is not one of the model's ",
                                                   tables_.size(), " embedding tables"));
  }
  const TableLayout& t = layout_[table];
  if (values != ids.size() * static_cast<size_t>(t.dim)) {
    return absl::InvalidArgumentError(absl::StrCat("table ", t.name, ": ", ids.size(),
                                                   " ids of dim ", t.dim, " need ",
                                                   ids.size() * t.dim, " values, got ", values));
  }
  const int64_t buckets = tables_[table]->options().buckets;
  for (int64_t id : ids) {
    if (id < 0 || (buckets > 0 && id >= buckets)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table ", t.name, ": id ", id,
          id < 0 ? " is negative" : absl::StrCat(" is out of range for ", buckets, " buckets")));
    }
    if (RowOwner(t.key, id, options_.num_ps) != options_.ps_index) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table ", t.name, ": row ", id, " lives on ps ", RowOwner(t.key, id, options_.num_ps),
          ", not on ps ", options_.ps_index, " (a client with another ps count?)"));
    }
  }
  return absl::OkStatus();
}

absl::Status SparseShard::ReadyLocked() const {
  if (restoring_) {
    return absl::UnavailableError("the rows are being restored from a checkpoint; try again");
  }
  if (!initialized_) {
    return absl::UnavailableError("the rows are not initialized yet; try again");
  }
  return absl::OkStatus();
}

void SparseShard::Pull(int64_t step, bool wait, std::vector<RowsRef> parts, PullDone done) {
  for (const RowsRef& part : parts) {
    if (absl::Status s = Check(part.table, part.ids, part.values.size()); !s.ok()) {
      done(s);
      return;
    }
  }
  absl::Status ready;
  {
    absl::MutexLock lock(&mu_);
    ready = ReadyLocked();
    if (ready.ok() && wait && options_.sync && step_ < step && !shutdown_) {
      waiters_.push_back(
          {step, std::move(parts), std::move(done), absl::Now() + options_.sync_timeout});
      timer_cv_.Signal();
      return;
    }
  }
  if (!ready.ok()) {
    done(ready);
    return;
  }
  Answer(std::move(parts), done);
}

absl::Status SparseShard::PullAndWait(int64_t step, bool wait, std::vector<RowsRef> parts) {
  absl::Notification answered;
  absl::Status status;
  Pull(step, wait, std::move(parts), [&](absl::Status s) {
    status = std::move(s);
    answered.Notify();
  });
  answered.WaitForNotification();
  return status;
}

void SparseShard::Answer(std::vector<RowsRef> parts, const PullDone& done) {
  int64_t rows = 0;
  for (const RowsRef& part : parts) {
    if (absl::Status s = tables_[part.table]->Lookup(part.ids, part.values); !s.ok()) {
      done(s);
      return;
    }
    rows += static_cast<int64_t>(part.ids.size());
  }
  {
    absl::MutexLock lock(&mu_);
    stats_.rows_pulled += rows;
  }
  done(absl::OkStatus());
}

void SparseShard::AnswerAll(std::vector<Waiter> waiters) {
  for (Waiter& w : waiters) Answer(std::move(w.parts), w.done);
}

std::vector<SparseShard::Waiter> SparseShard::TakeReadyLocked(bool all) {
  std::vector<Waiter> ready;
  auto keep = waiters_.begin();
  for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
    if (all || shutdown_ || it->step <= step_) {
      ready.push_back(std::move(*it));
    } else {
      *keep++ = std::move(*it);
    }
  }
  waiters_.erase(keep, waiters_.end());
  return ready;
}

void SparseShard::TimerLoop() {
  while (true) {
    std::vector<Waiter> ready;
    {
      absl::MutexLock lock(&mu_);
      if (stop_timer_) return;
      absl::Time next = absl::InfiniteFuture();
      for (const Waiter& w : waiters_) next = std::min(next, w.give_up);
      if (next > absl::Now()) {
        timer_cv_.WaitWithDeadline(&mu_, next);
        continue;
      }
      TimeOutLocked();
      ready = TakeReadyLocked();
    }
    AnswerAll(std::move(ready));
  }
}

void SparseShard::TimeOutLocked() {
  int64_t latest = step_;
  const absl::Time now = absl::Now();
  for (const Waiter& w : waiters_) {
    if (w.give_up <= now) latest = std::max(latest, w.step);
  }
  if (latest <= step_) return;  // satisfied meanwhile
  std::vector<int> missing;
  for (int r = 0; r < options_.total_replicas; ++r) {
    if (live_[r] && std::find(pushed_.begin(), pushed_.end(), r) == pushed_.end()) {
      missing.push_back(r);
    }
  }
  LOG(WARNING) << "sparse step " << step_ << ": waited " << options_.sync_timeout
               << " for its pushes; applying those of " << pushed_.size()
               << " replicas (missing: " << absl::StrJoin(missing, ", ") << ")";
  absl::Status applied = ApplyPendingLocked();
  if (!applied.ok()) LOG(ERROR) << "sparse step apply failed: " << applied;
  if (step_ < latest) {
    step_ = latest;  // nobody pushed the steps in between
    MaybeSnapshotLocked();
  }
}

absl::Status SparseShard::CheckParts(absl::Span<const ConstRowsRef> parts) const {
  std::vector<absl::flat_hash_set<int64_t>> seen(tables_.size());
  for (const ConstRowsRef& part : parts) {
    PSTRAIN_RETURN_IF_ERROR(Check(part.table, part.ids, part.values.size()));
    for (int64_t id : part.ids) {
      if (!seen[part.table].insert(id).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("table ", layout_[part.table].name, ": id ", id, " is pushed twice"));
      }
    }
    for (float v : part.values) {
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat("table ", layout_[part.table].name,
                         ": a gradient value is not finite (the model diverged?)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SparseShard::PushResult> SparseShard::Push(int replica, int64_t step,
                                                          int64_t generation,
                                                          absl::Span<const ConstRowsRef> parts) {
  if (replica < 0 || replica >= options_.total_replicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica ", replica, " is not in [0, ", options_.total_replicas, ")"));
  }
  if (step < 0 || step > kMaxStep) {
    return absl::InvalidArgumentError(absl::StrCat("step ", step, " is out of range"));
  }
  if (absl::Status s = CheckParts(parts); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(s.message(), "; nothing of this push was applied"));
  }
  int64_t rows = 0;
  for (const ConstRowsRef& part : parts) rows += static_cast<int64_t>(part.ids.size());
  std::vector<Waiter> ready;
  absl::StatusOr<PushResult> result;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = ReadyLocked(); !s.ok()) return s;
    if (generation != 0 && generation != generation_) {
      return absl::AbortedError(absl::StrCat(
          "the rows were restored or initialized again (generation ", generation_, ", the push's ",
          generation, "): its gradients are from before; pull again"));
    }
    stats_.rows_pushed += rows;
    result = PushLocked(replica, step, parts);
    ready = TakeReadyLocked();
  }
  AnswerAll(std::move(ready));
  return result;
}

absl::StatusOr<SparseShard::PushResult> SparseShard::PushLocked(
    int replica, int64_t step, absl::Span<const ConstRowsRef> parts) {
  if (!options_.sync) {
    if (step <= last_async_[replica]) return PushResult{false, step_};  // a retry
    last_async_[replica] = step;
    for (const ConstRowsRef& part : parts) {
      PSTRAIN_RETURN_IF_ERROR(tables_[part.table]->ApplyGradients(part.ids, part.values, step));
    }
    step_ = std::max(step_, step + 1);
    MaybeEvictLocked(step_);
    return PushResult{false, step_};
  }
  if (step < step_) {
    ++stats_.stale_pushes;
    return PushResult{true, step_};
  }
  if (step > step_) {
    // The step moved on without this ps hearing of it (its pushes timed out
    // elsewhere): what is pending belongs to the past.
    absl::Status applied = ApplyPendingLocked();
    if (!applied.ok()) LOG(ERROR) << "sparse step apply failed: " << applied;
    step_ = step;
    MaybeSnapshotLocked();
  }
  if (std::find(pushed_.begin(), pushed_.end(), replica) != pushed_.end()) {
    return PushResult{false, step_};  // a retry: counted once
  }
  for (const ConstRowsRef& part : parts) {
    Accumulator& a = accum_[part.table];
    const int64_t dim = layout_[part.table].dim;
    for (size_t k = 0; k < part.ids.size(); ++k) {
      auto [it, added] = a.index.try_emplace(part.ids[k], static_cast<int64_t>(a.ids.size()));
      if (added) {
        a.ids.push_back(part.ids[k]);
        a.sums.resize(a.sums.size() + dim, 0.0f);
      }
      float* sum = a.sums.data() + it->second * dim;
      const float* g = part.values.data() + k * dim;
      for (int64_t j = 0; j < dim; ++j) sum[j] += g[j];
    }
  }
  pushed_.push_back(replica);
  if (static_cast<int>(pushed_.size()) >= RequiredLocked()) {
    PSTRAIN_RETURN_IF_ERROR(ApplyPendingLocked());
  }
  return PushResult{false, step_};
}

int SparseShard::RequiredLocked() const {
  const int live = static_cast<int>(std::count(live_.begin(), live_.end(), true));
  return std::max(1, std::min(options_.replicas_to_aggregate, live));
}

void SparseShard::ReplicaLeft(int replica) {
  if (replica < 0 || replica >= options_.total_replicas) return;
  std::vector<Waiter> ready;
  {
    absl::MutexLock lock(&mu_);
    live_[replica] = false;
    if (options_.sync && initialized_ && !pushed_.empty() &&
        static_cast<int>(pushed_.size()) >= RequiredLocked()) {
      absl::Status applied = ApplyPendingLocked();
      if (!applied.ok()) LOG(ERROR) << "sparse step apply failed: " << applied;
    }
    ready = TakeReadyLocked();
  }
  AnswerAll(std::move(ready));
}

absl::Status SparseShard::ApplyPendingLocked() {
  const float scale = pushed_.empty() ? 0.0f : 1.0f / static_cast<float>(pushed_.size());
  absl::Status status;
  for (size_t t = 0; t < accum_.size(); ++t) {
    Accumulator& a = accum_[t];
    if (!a.ids.empty()) {
      for (float& v : a.sums) v *= scale;
      absl::Status s = tables_[t]->ApplyGradients(a.ids, a.sums, step_);
      if (status.ok()) status = s;
    }
    a = Accumulator();
  }
  pushed_.clear();
  ++step_;
  MaybeSnapshotLocked();
  MaybeEvictLocked(step_);
  return status;
}

void SparseShard::MaybeEvictLocked(int64_t step) {
  if (rules_.ttl_steps <= 0) return;
  if (step - last_evict_ < std::max<int64_t>(1, rules_.ttl_steps / 10)) return;
  last_evict_ = step;
  for (const auto& table : tables_) stats_.evicted += table->Evict(step);
}

void SparseShard::MaybeSnapshotLocked() {
  if (snapshot_at_ < 0 || step_ < snapshot_at_ || snapshot_.has_value()) return;
  snapshot_ = SnapshotLocked();
}

absl::StatusOr<SparseShard::Snapshot> SparseShard::SnapshotLocked() const {
  std::vector<RowTableHeader> headers;
  for (size_t t = 0; t < tables_.size(); ++t) {
    headers.push_back(
        {layout_[t].name, layout_[t].dim, tables_[t]->slot_floats(), snapshot_optimizer_});
  }
  Snapshot snapshot;
  snapshot.writer = std::make_unique<RowFileWriter>(headers);
  snapshot.checksum.assign(tables_.size(), 0);
  snapshot.step = step_;
  for (size_t t = 0; t < tables_.size(); ++t) {
    uint64_t& sum = snapshot.checksum[t];
    RowFileWriter* writer = snapshot.writer.get();
    PSTRAIN_RETURN_IF_ERROR(
        tables_[t]->ForEachRow([&](int64_t id, absl::Span<const float> weights,
                                   absl::Span<const float> slots, int64_t last_step) {
          writer->Add(static_cast<int>(t), id, weights, slots, last_step);
          sum += RowChecksum(id, weights, slots, last_step);
          return absl::OkStatus();
        }));
  }
  return snapshot;
}

absl::StatusOr<SparseShard::SavedRows> SparseShard::Save(Env* env, const std::string& path,
                                                         int64_t step, int64_t global_step,
                                                         absl::Duration wait,
                                                         const std::string& optimizer) {
  std::optional<absl::StatusOr<Snapshot>> taken;
  {
    absl::MutexLock lock(&mu_);
    if (!initialized_ || restoring_) {
      return absl::FailedPreconditionError(
          "the rows are not initialized; there is nothing to save");
    }
    snapshot_optimizer_ = optimizer;
    if (options_.sync && step_ < step) {
      snapshot_at_ = step;
      snapshot_.reset();
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](SparseShard* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                 return self->snapshot_.has_value() || self->shutdown_;
                               },
                               this),
                           wait);
      if (snapshot_.has_value()) taken = std::move(snapshot_);
      snapshot_.reset();
      snapshot_at_ = -1;
    }
    if (!taken.has_value()) taken = SnapshotLocked();  // async, or past it, or timed out
  }
  PSTRAIN_ASSIGN_OR_RETURN(Snapshot snapshot, std::move(*taken));
  SavedRows saved;
  saved.step = snapshot.step;
  saved.checksum = std::move(snapshot.checksum);
  PSTRAIN_ASSIGN_OR_RETURN(saved.file, snapshot.writer->Write(env, path, global_step));
  return saved;
}

void SparseShard::BeginRestore() {
  absl::MutexLock lock(&mu_);
  restoring_ = true;
}

void SparseShard::CancelRestore() {
  absl::MutexLock lock(&mu_);
  restoring_ = false;
}

absl::StatusOr<SparseShard::RestoredRows> SparseShard::Restore(
    Env* env, const std::vector<RowsFile>& files, const std::vector<SparseTableInfo>& tables,
    const std::string& optimizer, int64_t step, int64_t generation) {
  for (const SparseTableInfo& saved : tables) {
    for (size_t t = 0; t < layout_.size(); ++t) {
      if (layout_[t].name != saved.name) continue;
      if (layout_[t].dim != saved.dim || tables_[t]->options().buckets != saved.buckets) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the checkpoint's table ", saved.name, " has dim ", saved.dim, " and ", saved.buckets,
            " buckets, the model's has dim ", layout_[t].dim, " and ",
            tables_[t]->options().buckets, " buckets: train this model in a new job dir"));
      }
    }
  }
  std::vector<Waiter> stale;
  {
    absl::MutexLock lock(&mu_);
    restoring_ = true;
    ClearLocked();
    stale = TakeReadyLocked(/*all=*/true);  // answered once the rows are back
  }
  RestoredRows restored;
  restored.checksum.assign(tables_.size(), 0);
  absl::Status status;
  for (const RowsFile& file : files) {
    status = RestoreFile(env, file, optimizer, step, &restored);
    if (!status.ok()) break;
  }
  {
    absl::MutexLock lock(&mu_);
    restoring_ = false;
    initialized_ = status.ok();
    if (!status.ok()) ClearLocked();
    step_ = step;
    last_evict_ = step;
    generation_ = generation;
  }
  if (status.ok()) {
    AnswerAll(std::move(stale));
  } else {
    for (Waiter& w : stale) w.done(absl::UnavailableError("the rows could not be restored"));
  }
  PSTRAIN_RETURN_IF_ERROR(status);
  return restored;
}

absl::Status SparseShard::RestoreFile(Env* env, const RowsFile& file, const std::string& optimizer,
                                      int64_t step, RestoredRows* restored) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string bytes, env->ReadFile(file.path));
  if (bytes.size() != file.size_bytes || crc32c::Value(bytes.data(), bytes.size()) != file.crc32c) {
    return absl::DataLossError(absl::StrCat(
        file.path, " is not the file the checkpoint's index recorded (size or CRC differs)"));
  }
  // The file's table i is the model's table of[i], matched by name (-1: a
  // table the model no longer has).
  std::vector<int> of;
  auto on_tables = [&](const RowFileContents& contents) -> absl::Status {
    for (const RowTableHeader& header : contents.tables) {
      if (header.optimizer != optimizer) {
        return absl::InvalidArgumentError(
            absl::StrCat(file.path, " holds slots of ", header.optimizer, " for table ",
                         header.name, ", but the job's embedding_optimizer is ", optimizer));
      }
      int found = -1;
      for (size_t t = 0; t < layout_.size(); ++t) {
        if (layout_[t].name == header.name) found = static_cast<int>(t);
      }
      if (found >= 0 && (layout_[found].dim != header.dim ||
                         tables_[found]->slot_floats() != header.slot_floats)) {
        return absl::InvalidArgumentError(
            absl::StrCat(file.path, ": table ", header.name, " has rows of dim ", header.dim,
                         " with ", header.slot_floats, " slot floats, the model's has dim ",
                         layout_[found].dim, " with ", tables_[found]->slot_floats()));
      }
      of.push_back(found);
    }
    return absl::OkStatus();
  };
  auto on_row = [&](int table, int64_t id, absl::Span<const float> weights,
                    absl::Span<const float> slots, int64_t last_step) -> absl::Status {
    const int t = of[table];
    if (t < 0 || RowOwner(layout_[t].key, id, options_.num_ps) != options_.ps_index) {
      return absl::OkStatus();
    }
    // A table saved without eviction keeps no last step (0): its rows count
    // as updated at the checkpoint's step, so turning eviction on does not
    // drop them all at once.
    PSTRAIN_RETURN_IF_ERROR(
        tables_[t]->InsertRow(id, weights, slots, last_step > 0 ? last_step : step));
    restored->checksum[t] += RowChecksum(id, weights, slots, last_step);
    ++restored->rows;
    return absl::OkStatus();
  };
  return ParseRowFile(bytes, file.path, on_tables, on_row).status();
}

void SparseShard::Shutdown() {
  std::vector<Waiter> ready;
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
    ready = TakeReadyLocked();
  }
  AnswerAll(std::move(ready));
}

int64_t SparseShard::step() const {
  absl::MutexLock lock(&mu_);
  return step_;
}

SparseShard::Stats SparseShard::GetStats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace pstrain
