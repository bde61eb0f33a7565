#include "ps/ps_task.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "io/checkpoint.h"
#include "ps/optimizer_config.h"
#include "ps_protocol/shard_layout.h"

namespace pstrain {
namespace {

std::vector<ParameterShard*> Pointers(const std::vector<std::unique_ptr<ParameterShard>>& shards) {
  std::vector<ParameterShard*> out;
  for (const auto& s : shards) out.push_back(s.get());
  return out;
}

}  // namespace

StepRule StepRuleOf(const JobConfig& job) {
  StepRule rule;
  rule.sync = job.training.update == UpdateMode::kSync;
  rule.staleness = job.training.update == UpdateMode::kSsp ? job.training.staleness : -1;
  rule.replicas_to_aggregate = EffectiveReplicasToAggregate(job);
  rule.total_replicas = EffectiveTotalReplicas(job);
  rule.sync_timeout = absl::Seconds(job.training.sync_timeout);
  rule.train_steps = job.training.train_steps;
  return rule;
}

absl::StatusOr<std::unique_ptr<PsTask>> PsTask::Create(const JobConfig& job, const Model& model,
                                                       int ps_index, Env* env, TraceRecorder* trace,
                                                       PsReplication replication) {
  const int num_ps = static_cast<int>(job.cluster.ps.size());
  if (replication.copies < 1 || replication.copies > num_ps ||
      (replication.copies > 1 && replication.links == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ps_replication = ", replication.copies, " must be in [1, ", num_ps,
        "] (the number of ps tasks)", replication.copies > 1 ? " with links to the backups" : ""));
  }
  const ShardLayout layout = ComputeShardLayout(model, num_ps);
  PSTRAIN_ASSIGN_OR_RETURN(OptimizerConfig optimizer,
                           OptimizerConfigFromSpec(job.training, NumTrainingReplicas(job)));
  const StepRule rule = StepRuleOf(job);
  std::vector<std::unique_ptr<ParameterShard>> shards, backups;
  std::vector<std::vector<int>> backups_of(layout.chunks.size());
  for (size_t c = 0; c < layout.chunks.size(); ++c) {
    const Chunk& chunk = layout.chunks[c];
    const std::vector<int> holders = ReplicaTasks(chunk.ps, num_ps, replication.copies);
    backups_of[c].assign(holders.begin() + 1, holders.end());
    if (std::find(holders.begin(), holders.end(), ps_index) == holders.end()) continue;
    ShardOptions options;
    options.chunk = static_cast<int>(c);
    options.num_chunks = static_cast<int>(layout.chunks.size());
    options.begin = chunk.begin;
    options.end = chunk.end;
    options.segments = SegmentsForRange(model, chunk.begin, chunk.end);
    options.num_state = chunk.state;
    options.optimizer = optimizer;
    options.rule = rule;
    options.trace = trace;
    // Built batch norms carry their own decay (StateDecays); this is the
    // fallback.
    options.state_decay = StateDecayOf(job.training);
    if (chunk.state > 0) options.state_decays = StateDecays(model, options.state_decay);
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ParameterShard> shard,
                             ParameterShard::Create(options));
    (chunk.ps == ps_index ? shards : backups).push_back(std::move(shard));
  }
  if (shards.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("ps task ", ps_index, " of ", num_ps,
                                                   " holds no chunk of model ", model.name()));
  }
  PsIdentity identity;
  identity.model = job.training.model;
  identity.ps_index = ps_index;
  identity.num_ps = num_ps;
  identity.num_params = layout.num_params;
  identity.job_dir = job.training.job_dir;
  auto task = std::make_unique<PsTask>(identity, std::move(shards), env, std::move(backups));
  std::vector<int> row_backups;
  if (model.has_sparse()) {
    PSTRAIN_ASSIGN_OR_RETURN(SparseTableRules rules, SparseTableRulesOf(job.training));
    SparseShardOptions options;
    options.ps_index = ps_index;
    options.num_ps = num_ps;
    options.rule = rule;
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<SparseShard> sparse,
                             SparseShard::Create(model, rules, options));
    task->AttachSparse(std::move(sparse), job.training.embedding_optimizer);
    for (int partition = 0; partition < num_ps; ++partition) {
      const std::vector<int> holders = ReplicaTasks(partition, num_ps, replication.copies);
      if (partition == ps_index) {
        row_backups.assign(holders.begin() + 1, holders.end());
      } else if (std::find(holders.begin(), holders.end(), ps_index) != holders.end()) {
        options.ps_index = partition;  // the rows that task owns
        PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<SparseShard> rows,
                                 SparseShard::Create(model, rules, options));
        task->AttachBackupRows(partition, std::move(rows));
      }
    }
  }
  task->links_ = replication.links;
  task->copies_ = replication.copies;
  for (size_t c = 0; c < layout.chunks.size(); ++c) {
    if (task->backup(static_cast<int>(c)) != nullptr) {
      task->owner_of_[static_cast<int>(c)] = layout.chunks[c].ps;
    }
  }
  task->own_backups_of_ = backups_of;
  task->own_row_backups_ = row_backups;
  if (replication.copies > 1) {
    absl::MutexLock lock(&task->roles_mu_);
    task->StartStreams(ps_index, /*epoch=*/1, backups_of, row_backups);
  }
  return task;
}

PsTask::PsTask(const PsIdentity& identity, std::vector<std::unique_ptr<ParameterShard>> shards,
               Env* env, std::vector<std::unique_ptr<ParameterShard>> backups)
    : identity_(identity),
      shards_(std::move(shards)),
      shard_ptrs_(Pointers(shards_)),
      backups_(std::move(backups)),
      env_(env),
      told_done_(shards_.front()->options().rule.total_replicas, false),
      input_ended_(told_done_.size(), false) {
  for (ParameterShard* shard : shard_ptrs_) barriers_.push_back(&shard->barrier());
  for (const auto& backup : backups_) barriers_.push_back(&backup->barrier());
}

PsTask::~PsTask() {
  // The streams go before the shards whose observers feed them.
  for (ParameterShard* shard : shard_ptrs_) shard->SetUpdateObserver(nullptr);
  for (const auto& backup : backups_) backup->SetUpdateObserver(nullptr);
  if (sparse_ != nullptr) sparse_->SetUpdateObserver(nullptr);
  for (auto& [partition, rows] : backup_rows_) rows->SetUpdateObserver(nullptr);
  // Destroyed outside roles_mu_: the answers they still hold are released,
  // and an answer calls back into this task.
  std::map<int, std::unique_ptr<UpdateStream<ChunkUpdate>>> streams;
  std::map<int, std::unique_ptr<UpdateStream<RowsUpdate>>> rows_streams;
  std::vector<std::unique_ptr<UpdateStream<ChunkUpdate>>> retired;
  std::vector<std::unique_ptr<UpdateStream<RowsUpdate>>> retired_rows;
  {
    absl::MutexLock lock(&roles_mu_);
    streams = std::move(streams_);
    rows_streams = std::move(rows_streams_);
    retired = std::move(retired_streams_);
    retired_rows = std::move(retired_rows_streams_);
  }
}

void PsTask::AttachSparse(std::unique_ptr<SparseShard> sparse, std::string optimizer) {
  sparse_ = std::move(sparse);
  embedding_optimizer_ = std::move(optimizer);
  barriers_.push_back(&sparse_->barrier());
}

void PsTask::AttachBackupRows(int partition, std::unique_ptr<SparseShard> rows) {
  barriers_.push_back(&rows->barrier());
  backup_rows_[partition] = std::move(rows);
}

absl::StatusOr<ParameterShard*> PsTask::FindOwnShard(int chunk) const {
  if (copies_ > 1 && OwnerOf(chunk) == identity_.ps_index) {
    absl::ReaderMutexLock lock(&roles_mu_);
    PSTRAIN_RETURN_IF_ERROR(FencedLocked());
  }
  for (const auto& b : backups_) {
    if (b->options().chunk != chunk) continue;
    if (serves(owner_of_.at(chunk))) return b.get();
    return absl::FailedPreconditionError(absl::StrCat("ps task ", identity_.ps_index,
                                                      " holds a backup of chunk ", chunk,
                                                      "; pushes and reads go to its primary"));
  }
  return FindShard(chunk);
}

absl::StatusOr<ParameterShard*> PsTask::FindShard(int chunk) const {
  for (ParameterShard* s : shard_ptrs_) {
    if (s->options().chunk == chunk) return s;
  }
  for (const auto& b : backups_) {
    if (b->options().chunk == chunk) return b.get();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "request for chunk ", chunk, " reached ps task ", identity_.ps_index, ", which holds chunks ",
      shard_ptrs_.front()->options().chunk, " to ", shard_ptrs_.back()->options().chunk,
      "; check that every process uses the same cluster and model"));
}

absl::Status PsTask::Initialize(int chunk, const std::string& model, int64_t num_params,
                                absl::Span<const float> params, absl::Span<const float> state,
                                int64_t global_step, int64_t generation) {
  PSTRAIN_ASSIGN_OR_RETURN(ParameterShard * shard, FindShard(chunk));
  if (model != identity_.model) {
    return absl::InvalidArgumentError(absl::StrCat(
        "initialization for model \"", model, "\" reached a ps serving \"", identity_.model, "\""));
  }
  if (num_params != identity_.num_params) {
    return absl::InvalidArgumentError(absl::StrCat("initialization for ", num_params,
                                                   " parameters reached a ps whose model has ",
                                                   identity_.num_params));
  }
  if (generation == 0 && copies_ > 1) {
    return absl::InvalidArgumentError(
        "a replicated ps needs the chief's generation with every initialization (0 was given): "
        "the primary and its backups must hold the same one");
  }
  PSTRAIN_RETURN_IF_ERROR(shard->Initialize(params, state, global_step, {}, 0, generation));
  if (chunk == shard_ptrs_.front()->options().chunk) {
    if (sparse_ != nullptr) sparse_->Reset(global_step, shard->generation());
    // The backups of other tasks' rows start alike (one generation: the
    // chief's, the same for every task).
    for (auto& [partition, rows] : backup_rows_) rows->Reset(global_step, shard->generation());
    // A replicated job initialized again (a rollback without a checkpoint):
    // the roles start over, as after a restore.
    if (copies_ > 1) ResetRoles();
    LOG(INFO) << "ps " << identity_.ps_index << " initialized at global step " << global_step;
  }
  return absl::OkStatus();
}

absl::StatusOr<PushResult> PsTask::Read(int chunk, std::string* params, std::string* state,
                                        bool bf16, int64_t have_generation, int64_t have_version,
                                        int64_t at_step, int replica) const {
  PSTRAIN_ASSIGN_OR_RETURN(ParameterShard * shard, FindOwnShard(chunk));
  return shard->Read(params, state, bf16, have_generation, have_version, at_step, replica);
}

namespace {

// Values whose exponent bits are all ones: Inf and NaN. Integer operations,
// so the loop vectorizes (a push of mnist_cnn is 3.2M values).
int64_t CountNonFinite(absl::Span<const float> values) {
  int64_t bad = 0;
  for (const float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    bad += (bits & 0x7f800000u) == 0x7f800000u;
  }
  return bad;
}

}  // namespace

void PsTask::Push(int chunk, int replica, int64_t step, int64_t generation,
                  absl::Span<const float> grads, absl::Span<const float> batch_stats,
                  const Progress& progress, ParameterShard::PushCallback done) {
  absl::StatusOr<ParameterShard*> shard = FindOwnShard(chunk);
  if (!shard.ok()) {
    done(shard.status(), {});
    return;
  }
  if (progress.loss_batches < 0 || progress.examples < 0 || !std::isfinite(progress.loss_sum)) {
    done(absl::InvalidArgumentError(
             absl::StrCat("push of chunk ", chunk, " from replica ", replica,
                          ": loss_batches = ", progress.loss_batches,
                          ", examples = ", progress.examples, ", loss_sum = ", progress.loss_sum,
                          "; counts cannot be negative and the loss must be finite")),
         {});
    return;
  }
  if (const int64_t bad = CountNonFinite(grads) + CountNonFinite(batch_stats); bad > 0) {
    LOG(WARNING) << "ps " << identity_.ps_index << ": refused a push of chunk " << chunk
                 << " from replica " << replica << " at step " << step << " with " << bad
                 << " non-finite values";
    done(
        absl::InvalidArgumentError(absl::StrCat(
            "push of chunk ", chunk, " from replica ", replica, " at step ", step, " carries ", bad,
            " non-finite values (NaN or Inf) among its gradients and batch statistics; not "
            "applied, the parameters would be lost. The training diverged: lower the learning "
            "rate, or resume from the last checkpoint")),
        {});
    return;
  }
  // The progress counts once the shard took the push (a refused one trained
  // nothing the job keeps). A replicated chunk answers once its backups
  // hold what the answer reports.
  UpdateStream<ChunkUpdate>* backups = nullptr;
  {
    absl::ReaderMutexLock lock(&roles_mu_);
    const auto stream = streams_.find(chunk);
    if (stream != streams_.end()) backups = stream->second.get();
  }
  if (backups != nullptr) {
    // A fenced primary takes nothing more: a failover moved the chunk.
    if (absl::Status fenced = backups->fenced(); !fenced.ok()) {
      done(fenced, {});
      return;
    }
  }
  (*shard)->Push(
      replica, step, grads, batch_stats,
      [this, progress, backups, done = std::move(done)](absl::Status s, PushResult r) mutable {
        if (s.ok() && (progress.loss_batches > 0 || progress.examples > 0)) {
          absl::MutexLock lock(&mu_);
          loss_sum_ += progress.loss_sum;
          loss_batches_ += progress.loss_batches;
          examples_ += progress.examples;
        }
        if (backups == nullptr) {
          done(s, r);
        } else {
          backups->WhenAcknowledged([s, r, done = std::move(done)](absl::Status fenced) {
            done(fenced.ok() ? s : fenced, r);
          });
        }
      },
      generation);
}

void PsTask::NoteDone(int replica, bool job_done) {
  absl::MutexLock lock(&mu_);
  // A replica that left (or was told) and pushes again is back in the job.
  if (replica >= 0 && replica < static_cast<int>(told_done_.size())) {
    told_done_[replica] = job_done;
    if (!job_done) input_ended_[replica] = false;
  }
}

int PsTask::replicas_told_done() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(std::count(told_done_.begin(), told_done_.end(), true));
}

PsStatus PsTask::Status() const {
  PsStatus status = StatusOf(identity_.ps_index, shard_ptrs_, sparse_.get());
  // A replicated task is ready once the copies it holds are too: no update
  // reaches a backup before its initialization.
  for (const auto& b : backups_) {
    status.initialized = status.initialized && b->GetStats().initialized;
  }
  absl::ReaderMutexLock roles(&roles_mu_);
  // Fenced (a failover moved its chunks while it did not answer): it holds
  // nothing in step, as a restarted task. A task that rejoined follows its
  // own chunks from their server instead: they are in step.
  if (copies_ > 1 && !follows_own_ && !FencedLocked().ok()) status.initialized = false;
  // The backups its streams dropped (answers wait until the chief confirms).
  status.backup_drops = retired_drops_;
  status.dropped_backups = retired_dropped_tasks_;
  for (const auto& [chunk, stream] : streams_) {
    status.backup_drops += stream->drops();
    for (int task : stream->dropped_tasks()) status.dropped_backups.push_back(task);
  }
  for (const auto& [partition, stream] : rows_streams_) {
    status.backup_drops += stream->drops();
    for (int task : stream->dropped_tasks()) status.dropped_backups.push_back(task);
  }
  std::sort(status.dropped_backups.begin(), status.dropped_backups.end());
  LogStalledAnswersLocked();
  for (int owner : promoted_) {
    status.serves.push_back(owner);
    status.serves_epochs.push_back(epochs_.at(owner));
  }
  // Its own chunks, handed back by a failover after a rejoin.
  if (const auto own = epochs_.find(identity_.ps_index);
      own != epochs_.end() && own->second > 1 && FencedLocked().ok()) {
    status.serves.push_back(identity_.ps_index);
    status.serves_epochs.push_back(own->second);
  }
  return status;
}

void PsTask::LogStalledAnswersLocked() const {
  // The chief asks for the status every so often: a step that stalls on an
  // answer held here says why (every 10 s while it lasts).
  constexpr absl::Duration kReportAfter = absl::Seconds(10);
  {
    absl::MutexLock lock(&stalls_mu_);
    if (absl::Now() - stalls_logged_ < kReportAfter) return;
    stalls_logged_ = absl::Now();
  }
  for (const auto& [chunk, stream] : streams_) {
    if (std::string held = stream->Stalled(kReportAfter); !held.empty()) LOG(WARNING) << held;
  }
  for (const auto& [partition, stream] : rows_streams_) {
    if (std::string held = stream->Stalled(kReportAfter); !held.empty()) LOG(WARNING) << held;
  }
}

absl::StatusOr<PsStatus> PsTask::StatusFor(int owner) const {
  if (owner == identity_.ps_index) {
    {
      absl::ReaderMutexLock lock(&roles_mu_);
      PSTRAIN_RETURN_IF_ERROR(FencedLocked());
    }
    return Status();
  }
  if (!serves(owner)) {
    return absl::FailedPreconditionError(absl::StrCat("ps ", identity_.ps_index,
                                                      " does not serve the chunks of ps ", owner,
                                                      " (no failover moved them here)"));
  }
  std::vector<ParameterShard*> shards;
  for (const auto& b : backups_) {
    if (owner_of_.at(b->options().chunk) == owner) shards.push_back(b.get());
  }
  return StatusOf(owner, shards, backup_rows(owner));
}

PsStatus PsTask::StatusOf(int owner, const std::vector<ParameterShard*>& shards,
                          const SparseShard* rows) const {
  // The task as a whole: the lowest step of its chunks (they step together
  // in sync mode; in async mode a push may have reached some chunks first),
  // initialized once every chunk is.
  const ParameterShard::Stats first = shards.front()->GetStats();
  PsStatus status;
  status.ps_task = owner;
  status.served_by = identity_.ps_index;
  status.epoch = epoch(owner);
  status.model = identity_.model;
  status.initialized = true;
  status.global_step = first.global_step;
  status.max_global_step = first.global_step;
  for (ParameterShard* shard : shards) {
    const ParameterShard::Stats stats = shard->GetStats();
    status.initialized = status.initialized && stats.initialized;
    status.stale_pushes += stats.stale_pushes;
    status.global_step = std::min(status.global_step, stats.global_step);
    status.max_global_step = std::max(status.max_global_step, stats.global_step);
    status.job_done = status.job_done || stats.job_done;
  }
  if (rows != nullptr && shards.front()->options().rule.sync) {
    // Sync: the rows step with the chunks, each once every replica pushed;
    // a replica that starts now begins at the lower of the two, which
    // still waits for its push.
    const int64_t rows_step = rows->step();
    status.global_step = std::min(status.global_step, rows_step);
    status.max_global_step = std::max(status.max_global_step, rows_step);
  }
  status.begin = shards.front()->options().begin;
  status.end = shards.back()->options().end;
  status.applied_updates = first.applied_updates;
  status.shutting_down = first.shutting_down;
  status.preempting = preempting_;
  status.departures = departures_;
  absl::MutexLock lock(&mu_);
  status.loss_sum = loss_sum_;
  status.loss_batches = loss_batches_;
  status.examples = examples_;
  status.inputs_ended =
      static_cast<int>(std::count(input_ended_.begin(), input_ended_.end(), true));
  status.unix_micros = absl::ToUnixMicros(absl::Now());
  return status;
}

void PsTask::Shutdown(const std::string& reason) {
  LOG(INFO) << "ps " << identity_.ps_index << ": shutdown requested (" << reason << ")";
  for (StepBarrier* barrier : barriers_) barrier->Shutdown();
  // A replicated task: no answer waits for its backups any more (a dropped
  // one's confirmation may never come: the chief is ending). Outside
  // roles_mu_: an answer calls back into the task.
  std::vector<UpdateStream<ChunkUpdate>*> chunks;
  std::vector<UpdateStream<RowsUpdate>*> rows;
  {
    absl::ReaderMutexLock lock(&roles_mu_);
    for (const auto& [chunk, stream] : streams_) chunks.push_back(stream.get());
    for (const auto& [partition, stream] : rows_streams_) rows.push_back(stream.get());
  }
  for (auto* stream : chunks) stream->EndOfJob();
  for (auto* stream : rows) stream->EndOfJob();
}

void PsTask::PullRows(int replica, int64_t step, int64_t generation, std::vector<RowsRef> parts,
                      SparseShard::PullDone done, int owner) {
  if (sparse_ == nullptr) {
    done(absl::FailedPreconditionError(absl::StrCat("ps ", identity_.ps_index, ": model ",
                                                    identity_.model, " has no embedding tables")));
    return;
  }
  if (replica < -1 || replica >= total_replicas()) {
    done(absl::InvalidArgumentError(
        absl::StrCat("replica ", replica, " is not in [-1, ", total_replicas(), ")")));
    return;
  }
  absl::StatusOr<SparseShard*> rows = owner >= 0 ? RowsOf(owner)
                                      : parts.empty()
                                          ? sparse_.get()
                                          : ServingRows(parts.front().ids, parts.front().table);
  if (!rows.ok()) {
    done(rows.status());
    return;
  }
  (*rows)->Pull(replica, step, std::move(parts), std::move(done), generation);
}

absl::StatusOr<SparseShard*> PsTask::RowsOf(int owner) const {
  if (owner == identity_.ps_index) {
    absl::ReaderMutexLock lock(&roles_mu_);
    PSTRAIN_RETURN_IF_ERROR(FencedLocked());
    return sparse_.get();
  }
  const auto it = backup_rows_.find(owner);
  if (it == backup_rows_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ps task ", identity_.ps_index, " holds no copy of the rows of ps ", owner));
  }
  if (!serves(owner)) {
    return absl::FailedPreconditionError(absl::StrCat("ps task ", identity_.ps_index,
                                                      " holds a backup of the rows of ps ", owner,
                                                      "; pulls and pushes go to their primary"));
  }
  return it->second.get();
}

absl::StatusOr<SparseShard*> PsTask::ServingRows(absl::Span<const int64_t> ids, int table) const {
  if (ids.empty() || table < 0 || table >= static_cast<int>(sparse_->layout().size())) {
    return sparse_.get();  // its own: they refuse what is wrong
  }
  const int owner = RowOwner(sparse_->layout()[table].key, ids.front(), identity_.num_ps);
  if (owner == identity_.ps_index) return RowsOf(owner);
  const auto it = backup_rows_.find(owner);
  if (it != backup_rows_.end() && serves(owner)) return it->second.get();
  if (it != backup_rows_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("ps task ", identity_.ps_index,
                                                      " holds a backup of the rows of ps ", owner,
                                                      "; pulls and pushes go to their primary"));
  }
  return sparse_.get();  // not its rows: refused there, naming the id
}

void PsTask::PushRows(int replica, int64_t step, int64_t generation,
                      absl::Span<const ConstRowsRef> parts, RowsPushDone done, int owner) {
  if (sparse_ == nullptr) {
    done(absl::FailedPreconditionError(absl::StrCat("ps ", identity_.ps_index, ": model ",
                                                    identity_.model, " has no embedding tables")));
    return;
  }
  absl::StatusOr<SparseShard*> rows = owner >= 0 ? RowsOf(owner)
                                      : parts.empty()
                                          ? sparse_.get()
                                          : ServingRows(parts.front().ids, parts.front().table);
  if (!rows.ok()) {
    done(rows.status());
    return;
  }
  UpdateStream<RowsUpdate>* backups = nullptr;
  {
    absl::ReaderMutexLock lock(&roles_mu_);
    for (auto& [partition, stream] : rows_streams_) {
      SparseShard* served =
          partition == identity_.ps_index ? sparse_.get() : backup_rows_.at(partition).get();
      if (served == *rows) backups = stream.get();
    }
  }
  if (backups != nullptr) {
    // A fenced primary takes nothing more: a failover moved the rows.
    if (absl::Status fenced = backups->fenced(); !fenced.ok()) {
      done(fenced);
      return;
    }
  }
  if (backups == nullptr) {
    done((*rows)->Push(replica, step, generation, parts));
    return;
  }
  // Answered once the backups hold it (or failed: this primary was fenced).
  // A sync push is in no update until its step is applied: it is answered
  // then, or a failover in between would lose a push its replica saw taken.
  (*rows)->Push(
      replica, step, generation, parts,
      [backups, done = std::move(done)](absl::StatusOr<PushResult> pushed) {
        if (!pushed.ok()) {
          done(pushed);
          return;
        }
        backups->WhenAcknowledged([pushed, done](absl::Status fenced) {
          if (fenced.ok()) {
            done(pushed);
          } else {
            done(fenced);
          }
        });
      },
      /*hold_until_applied=*/shard_ptrs_.front()->options().rule.sync);
}

absl::StatusOr<PushResult> PsTask::PushRows(int replica, int64_t step, int64_t generation,
                                            absl::Span<const ConstRowsRef> parts, int owner) {
  absl::Notification answered;
  absl::StatusOr<PushResult> result;
  PushRows(
      replica, step, generation, parts,
      [&](absl::StatusOr<PushResult> r) {
        result = std::move(r);
        answered.Notify();
      },
      owner);
  answered.WaitForNotification();
  return result;
}

absl::StatusOr<ShardSaved> PsTask::Save(int64_t step, int64_t global_step, absl::Duration wait) {
  if (step < 0 || wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Save needs a checkpoint step >= 0 and wait_ms >= 0, got step ", step,
                     " and wait_ms ", absl::ToInt64Milliseconds(wait), " (nothing was written)"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(const std::string path, CheckpointInJobDir(step, /*index=*/false));
  absl::ReaderMutexLock file_lock(&file_mu_);
  return Checkpoint().Save(path, step, global_step, wait);
}

absl::StatusOr<int64_t> PsTask::Restore(const std::string& model, int64_t num_params, int64_t step,
                                        int64_t generation) {
  if (model != identity_.model || num_params != identity_.num_params) {
    return absl::InvalidArgumentError(absl::StrCat(
        "restore of model \"", model, "\" with ", num_params, " parameters reached a ps serving \"",
        identity_.model, "\" with ", identity_.num_params));
  }
  if (step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Restore needs a checkpoint step >= 0, got ", step, " (nothing was read)"));
  }
  if (generation == 0 && copies_ > 1) {
    return absl::InvalidArgumentError(
        "a replicated ps needs the chief's generation with every restore (0 was given): the "
        "primary and its backups must hold the same one");
  }
  PSTRAIN_ASSIGN_OR_RETURN(const std::string path, CheckpointInJobDir(step, /*index=*/true));
  absl::MutexLock file_lock(&file_mu_);
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t restored, Checkpoint().Restore(path, generation, [this] {
    // Rolled back: every replica trains from the restored step again, or
    // says again that its input ended.
    absl::MutexLock lock(&mu_);
    std::fill(input_ended_.begin(), input_ended_.end(), false);
  }));
  if (!backups_.empty()) {
    // The backups as their primaries: the same values and generation.
    PSTRAIN_RETURN_IF_ERROR(
        RestoreShards(env_, identity_, Pointers(backups_), path, generation).status());
  }
  for (auto& [partition, rows] : backup_rows_) {
    PSTRAIN_RETURN_IF_ERROR(
        TaskCheckpoint(env_, identity_, shard_ptrs_, rows.get(), embedding_optimizer_)
            .RestoreRows(path, restored));
  }
  if (copies_ > 1) ResetRoles();
  return restored;
}

TaskCheckpoint PsTask::Checkpoint() const {
  return TaskCheckpoint(env_, identity_, shard_ptrs_, sparse_.get(), embedding_optimizer_);
}

absl::StatusOr<std::string> PsTask::CheckpointInJobDir(int64_t step, bool index) const {
  if (identity_.job_dir.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("ps ", identity_.ps_index,
                     " was started without a job dir, so it has no checkpoints to save or "
                     "restore: give every task the job's --job_dir (nothing was read or written)"));
  }
  const std::string prefix = CheckpointPrefix(step);
  return JoinPath(identity_.job_dir, index ? IndexFileName(prefix) : prefix);
}

absl::Status PsTask::Leave(int replica, const std::string& reason, bool input_ended) {
  const int total = total_replicas();
  if (replica < 0 || replica >= total) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica ", replica, " is outside [0, ", total, ")"));
  }
  LOG(INFO) << "ps " << identity_.ps_index << ": replica " << replica << " is leaving (" << reason
            << ")";
  for (StepBarrier* barrier : barriers_) barrier->ReplicaLeft(replica);
  // A replica that stops asks for a checkpoint (the job monitor counts
  // departures); one whose input ended leaves nothing to save.
  if (!input_ended) ++departures_;
  NoteDone(replica, /*job_done=*/true);  // No need to wait for it at the end.
  if (input_ended) {
    absl::MutexLock lock(&mu_);
    input_ended_[replica] = true;
  }
  return absl::OkStatus();
}

bool PsTask::WaitForShutdown(absl::Duration timeout) const {
  return shard_ptrs_.front()->WaitForShutdown(timeout);
}

int64_t PsTask::ChunkSize(int chunk) const {
  absl::StatusOr<ParameterShard*> shard = FindShard(chunk);
  return shard.ok() ? (*shard)->size() : -1;
}

StepStats PsTask::TotalStats() const {
  StepStats total = shard_ptrs_.front()->GetStats();
  total.stale_pushes = total.timed_out_steps = total.ssp_waits = 0;
  for (StepBarrier* barrier : barriers_) {
    const StepStats s = barrier->GetStats();
    total.stale_pushes += s.stale_pushes;
    total.timed_out_steps += s.timed_out_steps;
    total.ssp_waits += s.ssp_waits;
  }
  return total;
}

}  // namespace pstrain
