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
  if (options.num_ps < 1 || options.ps_index < 0 || options.ps_index >= options.num_ps) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparse shard: ps ", options.ps_index, " of ", options.num_ps));
  }
  PSTRAIN_RETURN_IF_ERROR(options.rule.Check());
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<EmbeddingTable>> tables,
                           CreateModelTables(model, rules));
  std::vector<TableLayout> layout = ComputeShardLayout(model, options.num_ps).tables;
  std::unique_ptr<SparseShard> shard(
      new SparseShard(std::move(layout), std::move(tables), rules, options));
  return shard;
}

namespace {

StepRule FollowingSteps(StepRule rule) {
  rule.follows_pushed_steps = true;
  return rule;
}

}  // namespace

SparseShard::SparseShard(std::vector<TableLayout> layout,
                         std::vector<std::unique_ptr<EmbeddingTable>> tables,
                         const SparseTableRules& rules, const SparseShardOptions& options)
    : layout_(std::move(layout)),
      tables_(std::move(tables)),
      rules_(rules),
      options_(options),
      accum_(layout_.size()),
      barrier_("the embedding rows", FollowingSteps(options.rule), &mu_, this) {}

SparseShard::~SparseShard() { barrier_.Stop(); }

void SparseShard::ClearLocked() {
  for (const auto& table : tables_) table->Clear();
  DiscardPendingLocked();
  undo_.reset();
}

void SparseShard::AnswerAll(std::vector<StepBarrier::Done>& released, const absl::Status& status) {
  for (auto& done : released) done(status, {});
}

void SparseShard::Reset(int64_t step, int64_t generation) {
  std::vector<StepBarrier::Done> waiting;
  {
    absl::MutexLock lock(&mu_);
    ClearLocked();
    last_evict_ = step;
    barrier_.ResetLocked(step, generation, &waiting);
  }
  AnswerAll(waiting, absl::OkStatus());  // with the new rows
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

void SparseShard::Pull(int replica, int64_t step, std::vector<RowsRef> parts, PullDone done,
                       int64_t generation) {
  for (const RowsRef& part : parts) {
    if (absl::Status s = Check(part.table, part.ids, part.values.size()); !s.ok()) {
      done(s);
      return;
    }
  }
  barrier_.WaitToRead(replica, step, generation,
                      [this, replica, step, parts = std::move(parts), done = std::move(done)](
                          absl::Status s, const PushResult&) {
                        if (s.ok()) {
                          // (A read that never waits reads the rows as they are.)
                          Answer(replica, replica >= 0 ? step : -1, parts, done);
                        } else {
                          done(s);
                        }
                      });
}

absl::Status SparseShard::PullAndWait(int replica, int64_t step, std::vector<RowsRef> parts) {
  absl::Notification answered;
  absl::Status status;
  Pull(replica, step, std::move(parts), [&](absl::Status s) {
    status = std::move(s);
    answered.Notify();
  });
  answered.WaitForNotification();
  return status;
}

void SparseShard::Answer(int replica, int64_t step, const std::vector<RowsRef>& parts,
                         const PullDone& done) {
  // The rows as they were at `step`, for a replica whose push counted in it
  // (the rows moved one step past it since).
  const auto step_undo = [&]() -> std::shared_ptr<const StepUndo> {
    absl::MutexLock lock(&mu_);
    if (step >= 0 && undo_ != nullptr && undo_->step == step &&
        barrier_.step_locked() == step + 1 && barrier_.CountedLocked(replica, step)) {
      return undo_;
    }
    return nullptr;
  };
  std::shared_ptr<const StepUndo> undo = step_undo();
  int64_t rows = 0;
  for (const RowsRef& part : parts) {
    if (absl::Status s = tables_[part.table]->Lookup(part.ids, part.values); !s.ok()) {
      done(s);
      return;
    }
    rows += static_cast<int64_t>(part.ids.size());
    if (undo == nullptr) continue;
    // The step's rows as they were before it.
    const StepUndo::Table& before = undo->tables[part.table];
    const int64_t dim = layout_[part.table].dim;
    for (size_t k = 0; k < part.ids.size(); ++k) {
      const auto it = before.index.find(part.ids[k]);
      if (it == before.index.end()) continue;
      std::copy_n(before.weights.data() + it->second * dim, dim, part.values.data() + k * dim);
    }
  }
  if (undo != nullptr && step_undo() != undo) {
    // Another step was applied during the lookup (backup workers): the rows
    // as they are now.
    Answer(-1, -1, parts, done);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    stats_.rows_pulled += rows;
  }
  done(absl::OkStatus());
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

absl::StatusOr<PushResult> SparseShard::Push(int replica, int64_t step, int64_t generation,
                                             absl::Span<const ConstRowsRef> parts) {
  absl::StatusOr<PushResult> result;
  Push(
      replica, step, generation, parts,
      [&result](absl::StatusOr<PushResult> r) { result = std::move(r); },
      /*hold_until_applied=*/false);
  return result;
}

void SparseShard::Push(int replica, int64_t step, int64_t generation,
                       absl::Span<const ConstRowsRef> parts, PushDone done,
                       bool hold_until_applied) {
  if (replica < 0 || replica >= options_.rule.total_replicas) {
    done(absl::InvalidArgumentError(
        absl::StrCat("replica ", replica, " is not in [0, ", options_.rule.total_replicas, ")")));
    return;
  }
  if (absl::Status s = CheckParts(parts); !s.ok()) {
    done(absl::InvalidArgumentError(
        absl::StrCat(s.message(), "; nothing of this push was applied")));
    return;
  }
  int64_t rows = 0;
  for (const ConstRowsRef& part : parts) rows += static_cast<int64_t>(part.ids.size());
  // Called with mu_ held when the push counts: applied now (async) or added
  // to the step's sums (sync).
  auto add = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    stats_.rows_pushed += rows;
    if (options_.rule.sync) {
      AccumulateLocked(parts);
      return absl::OkStatus();
    }
    for (const ConstRowsRef& part : parts) {
      PSTRAIN_RETURN_IF_ERROR(tables_[part.table]->ApplyGradients(part.ids, part.values, step));
    }
    KeepAppliedLocked(parts, step);
    return absl::OkStatus();
  };
  barrier_.Push(
      replica, step, generation, add,
      [done = std::move(done)](absl::Status s, PushResult r) {
        if (s.ok()) {
          done(r);
        } else {
          done(std::move(s));
        }
      },
      hold_until_applied);
}

void SparseShard::AccumulateLocked(absl::Span<const ConstRowsRef> parts) {
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
}

absl::Status SparseShard::ApplyPendingLocked(int contributors) {
  const float scale = 1.0f / static_cast<float>(std::max(1, contributors));
  for (Accumulator& a : accum_) {
    for (float& v : a.sums) v *= scale;
  }
  if (observer_) {
    last_ = RowsUpdate();
    last_.apply_step = barrier_.step_locked();
    for (size_t t = 0; t < accum_.size(); ++t) {
      if (!accum_[t].ids.empty()) {
        last_.tables.push_back({static_cast<int>(t), accum_[t].ids, accum_[t].sums});
      }
    }
  }
  return ApplyStepLocked(accum_);
}

absl::Status SparseShard::ApplyStepLocked(std::vector<Accumulator>& rows) {
  const int64_t step = barrier_.step_locked();
  // The rows this step changes, as they are before it (Pull).
  auto undo = std::make_shared<StepUndo>();
  undo->step = step;
  undo->tables.resize(rows.size());
  absl::Status status;
  for (size_t t = 0; t < rows.size(); ++t) {
    Accumulator& a = rows[t];
    StepUndo::Table& before = undo->tables[t];
    if (!a.ids.empty()) {
      before.weights.resize(a.sums.size());
      absl::Status s = tables_[t]->Lookup(a.ids, absl::MakeSpan(before.weights));
      if (s.ok()) s = tables_[t]->ApplyGradients(a.ids, a.sums, step);
      if (status.ok()) status = s;
    }
    before.index = std::move(a.index);
    a = Accumulator();
  }
  undo_ = std::move(undo);
  return status;
}

void SparseShard::KeepAppliedLocked(absl::Span<const ConstRowsRef> parts, int64_t step) {
  if (!observer_) return;
  last_ = RowsUpdate();
  last_.apply_step = step;
  for (const ConstRowsRef& part : parts) {
    last_.tables.push_back(
        {part.table, {part.ids.begin(), part.ids.end()}, {part.values.begin(), part.values.end()}});
  }
}

void SparseShard::AppliedLocked(const AppliedPushes& applied) {
  if (!observer_) return;
  RowsUpdate update = std::move(last_);
  last_ = RowsUpdate();
  update.applied = applied;
  observer_(std::move(update));
}

void SparseShard::SetUpdateObserver(UpdateObserver observer) {
  absl::MutexLock lock(&mu_);
  observer_ = std::move(observer);
  last_ = RowsUpdate();
  barrier_.SetRecordAppliesLocked(observer_ != nullptr);
}

absl::StatusOr<SparseShard::BackupCopy> SparseShard::CopyForBackup(absl::FunctionRef<void()> then) {
  absl::MutexLock lock(&mu_);
  PSTRAIN_RETURN_IF_ERROR(barrier_.ReadyLocked());
  BackupCopy copy;
  for (size_t t = 0; t < tables_.size(); ++t) {
    const int table = static_cast<int>(t);
    PSTRAIN_RETURN_IF_ERROR(tables_[t]->ForEachRow([&](int64_t id, absl::Span<const float> weights,
                                                       absl::Span<const float> slots,
                                                       int64_t last_step, int64_t count) {
      copy.rows.push_back({table,
                           id,
                           {weights.begin(), weights.end()},
                           {slots.begin(), slots.end()},
                           last_step,
                           count});
      return absl::OkStatus();
    }));
    tables_[t]->ForEachPending([&](int64_t id, int64_t count, int64_t last_step) {
      copy.pending.push_back({table, id, count, last_step});
    });
  }
  copy.progress = barrier_.ProgressLocked();
  copy.last_evict = last_evict_;
  if (undo_ != nullptr) {
    copy.undo_step = undo_->step;
    for (const StepUndo::Table& t : undo_->tables) {
      std::vector<int64_t> ids(t.index.size());
      for (const auto& [id, row] : t.index) ids[row] = id;
      copy.undo_ids.push_back(std::move(ids));
      copy.undo_weights.push_back(t.weights);
    }
  }
  then();
  return copy;
}

absl::Status SparseShard::InstallCopy(const BackupCopy& copy) {
  std::vector<StepBarrier::Done> waiting;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    ClearLocked();
    status = barrier_.ResumeLocked(copy.progress, &waiting);
    for (size_t k = 0; status.ok() && k < copy.rows.size(); ++k) {
      const BackupCopy::Row& r = copy.rows[k];
      if (r.table < 0 || r.table >= static_cast<int>(tables_.size())) {
        status = absl::InvalidArgumentError(absl::StrCat("a copied row of table ", r.table));
        break;
      }
      status = tables_[r.table]->InsertRow(r.id, r.weights, r.slots, r.last_step, r.count);
    }
    for (size_t k = 0; status.ok() && k < copy.pending.size(); ++k) {
      const BackupCopy::PendingId& p = copy.pending[k];
      if (p.table < 0 || p.table >= static_cast<int>(tables_.size())) {
        status = absl::InvalidArgumentError(absl::StrCat("a copied id of table ", p.table));
        break;
      }
      status = tables_[p.table]->InsertPending(p.id, p.count, p.last_step);
    }
    if (status.ok() && copy.undo_step >= 0) {
      const bool fits =
          copy.undo_ids.size() == tables_.size() && copy.undo_weights.size() == tables_.size();
      for (size_t t = 0; fits && t < tables_.size(); ++t) {
        if (copy.undo_weights[t].size() !=
            copy.undo_ids[t].size() * static_cast<size_t>(tables_[t]->dim())) {
          status = absl::InvalidArgumentError(
              absl::StrCat("a copy's rows before step ", copy.undo_step, " of table ", t, ": ",
                           copy.undo_weights[t].size(), " weights for ", copy.undo_ids[t].size(),
                           " ids of dim ", tables_[t]->dim()));
        }
      }
      if (!fits) {
        status = absl::InvalidArgumentError(
            absl::StrCat("a copy's rows before step ", copy.undo_step, " for ",
                         copy.undo_ids.size(), " tables, not ", tables_.size()));
      }
    }
    if (status.ok() && copy.undo_step >= 0) {
      auto undo = std::make_shared<StepUndo>();
      undo->step = copy.undo_step;
      for (size_t t = 0; t < copy.undo_ids.size(); ++t) {
        StepUndo::Table table;
        for (size_t k = 0; k < copy.undo_ids[t].size(); ++k) {
          table.index.emplace(copy.undo_ids[t][k], static_cast<int64_t>(k));
        }
        table.weights = copy.undo_weights[t];
        undo->tables.push_back(std::move(table));
      }
      undo_ = std::move(undo);
    }
    last_evict_ = copy.last_evict;
    if (!status.ok()) {
      ClearLocked();
      barrier_.UninitializeLocked(&waiting);
    }
  }
  AnswerAll(waiting, status.ok() ? absl::OkStatus()
                                 : absl::UnavailableError("the rows could not be copied"));
  return status;
}

absl::Status SparseShard::ApplyReplicated(const RowsUpdate& update) {
  std::vector<ConstRowsRef> parts;
  for (const RowsUpdate::Table& t : update.tables) parts.push_back({t.table, t.ids, t.grads});
  if (absl::Status s = CheckParts(parts); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(s.message(), "; nothing of this update was applied"));
  }
  absl::MutexLock lock(&mu_);
  PSTRAIN_RETURN_IF_ERROR(barrier_.CheckFollowLocked(update.applied));
  if (!parts.empty()) {
    if (options_.rule.sync) {
      std::vector<Accumulator> rows(tables_.size());
      for (const RowsUpdate::Table& t : update.tables) {
        Accumulator& a = rows[t.table];
        for (int64_t id : t.ids) {
          a.index.emplace(id, static_cast<int64_t>(a.ids.size()));
          a.ids.push_back(id);
        }
        a.sums.insert(a.sums.end(), t.grads.begin(), t.grads.end());
      }
      if (observer_) last_ = update;
      PSTRAIN_RETURN_IF_ERROR(ApplyStepLocked(rows));
    } else {
      for (const ConstRowsRef& part : parts) {
        PSTRAIN_RETURN_IF_ERROR(
            tables_[part.table]->ApplyGradients(part.ids, part.values, update.apply_step));
      }
      KeepAppliedLocked(parts, update.apply_step);
    }
  }
  barrier_.FollowLocked(update.applied);
  return absl::OkStatus();
}

void SparseShard::DiscardPendingLocked() {
  for (Accumulator& a : accum_) a = Accumulator();
}

void SparseShard::AdvancedLocked(int64_t step) {
  if (rules_.ttl_steps <= 0) return;
  if (step - last_evict_ < std::max<int64_t>(1, rules_.ttl_steps / 10)) return;
  last_evict_ = step;
  undo_.reset();  // evicted rows would read as new
  for (const auto& table : tables_) stats_.evicted += table->Evict(step);
}

void SparseShard::SnapshotLocked() { snapshot_ = CopyLocked(); }

absl::StatusOr<SparseShard::Snapshot> SparseShard::CopyLocked() const {
  std::vector<RowTableHeader> headers;
  for (size_t t = 0; t < tables_.size(); ++t) {
    headers.push_back(
        {layout_[t].name, layout_[t].dim, tables_[t]->slot_floats(), snapshot_optimizer_});
  }
  Snapshot snapshot;
  snapshot.writer = std::make_unique<RowFileWriter>(headers);
  snapshot.checksum.assign(tables_.size(), 0);
  snapshot.step = barrier_.step_locked();
  for (size_t t = 0; t < tables_.size(); ++t) {
    uint64_t& sum = snapshot.checksum[t];
    RowFileWriter* writer = snapshot.writer.get();
    PSTRAIN_RETURN_IF_ERROR(tables_[t]->ForEachRow([&](int64_t id, absl::Span<const float> weights,
                                                       absl::Span<const float> slots,
                                                       int64_t last_step, int64_t count) {
      writer->Add(static_cast<int>(t), id, weights, slots, last_step, count);
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
  const absl::Time deadline = absl::Now() + wait;
  {
    absl::MutexLock lock(&mu_);
    snapshot_optimizer_ = optimizer;
    snapshot_.reset();
  }
  if (absl::Status s = barrier_.RequestSnapshot(step); !s.ok()) {
    return absl::FailedPreconditionError("the rows are not initialized; there is nothing to save");
  }
  barrier_.AwaitSnapshot(deadline);
  std::optional<absl::StatusOr<Snapshot>> taken;
  {
    absl::MutexLock lock(&mu_);
    taken = std::move(snapshot_);
    snapshot_.reset();
  }
  if (!taken.has_value()) return absl::InternalError("the rows' snapshot was not taken");
  PSTRAIN_ASSIGN_OR_RETURN(Snapshot snapshot, std::move(*taken));
  SavedRows saved;
  saved.step = snapshot.step;
  saved.checksum = std::move(snapshot.checksum);
  PSTRAIN_ASSIGN_OR_RETURN(saved.file, snapshot.writer->Write(env, path, global_step));
  return saved;
}

void SparseShard::BeginRestore() {
  absl::MutexLock lock(&mu_);
  barrier_.SetRestoringLocked(true);
}

void SparseShard::CancelRestore() {
  absl::MutexLock lock(&mu_);
  barrier_.SetRestoringLocked(false);
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
  {
    absl::MutexLock lock(&mu_);
    barrier_.SetRestoringLocked(true);  // waiting pulls are answered once the rows are back
    ClearLocked();
  }
  RestoredRows restored;
  restored.checksum.assign(tables_.size(), 0);
  absl::Status status;
  for (const RowsFile& file : files) {
    status = RestoreFile(env, file, optimizer, step, &restored);
    if (!status.ok()) break;
  }
  std::vector<StepBarrier::Done> waiting;
  {
    absl::MutexLock lock(&mu_);
    last_evict_ = step;
    if (status.ok()) {
      barrier_.ResetLocked(step, generation, &waiting);
    } else {
      ClearLocked();
      barrier_.UninitializeLocked(&waiting);
    }
  }
  AnswerAll(waiting, status.ok() ? absl::OkStatus()
                                 : absl::UnavailableError("the rows could not be restored"));
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
                    absl::Span<const float> slots, int64_t last_step,
                    int64_t count) -> absl::Status {
    const int t = of[table];
    if (t < 0 || RowOwner(layout_[t].key, id, options_.num_ps) != options_.ps_index) {
      return absl::OkStatus();
    }
    // A table saved without eviction keeps no last step (0): its rows count
    // as updated at the checkpoint's step, so turning eviction on does not
    // drop them all at once.
    PSTRAIN_RETURN_IF_ERROR(
        tables_[t]->InsertRow(id, weights, slots, last_step > 0 ? last_step : step, count));
    restored->checksum[t] += RowChecksum(id, weights, slots, last_step);
    ++restored->rows;
    return absl::OkStatus();
  };
  return ParseRowFile(bytes, file.path, on_tables, on_row).status();
}

SparseShard::Stats SparseShard::GetStats() const {
  Stats s;
  static_cast<StepStats&>(s) = barrier_.GetStats();
  absl::MutexLock lock(&mu_);
  s.rows_pulled = stats_.rows_pulled;
  s.rows_pushed = stats_.rows_pushed;
  s.evicted = stats_.evicted;
  return s;
}

}  // namespace pstrain
