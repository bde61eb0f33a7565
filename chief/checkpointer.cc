#include "chief/checkpointer.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "chief/job_monitor.h"
#include "common/status_macros.h"
#include "config/model_spec.h"
#include "glog/logging.h"
#include "models/tensor.h"
#include "onnx/onnx_weights.h"

namespace pstrain {
namespace {

double Millis(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// A ps answered without parameters: it restarted. Unavailable, so a chief
// that meets it outside the checkpoint thread's rollback exits to be
// restarted and resumes from the last checkpoint.
absl::Status LostParameters(int ps_task) {
  return absl::UnavailableError(absl::StrCat(
      "ps ", ps_task,
      " holds no parameters (it restarted); the job resumes from its last checkpoint"));
}

}  // namespace

void AddModelVariables(const Model& model, CheckpointIndex* index) {
  for (const VariableInfo& v : model.variables()) {
    CheckpointVariable* out = index->add_variables();
    out->set_name(v.name);
    for (int64_t d : v.shape) out->add_shape(d);
    out->set_trainable(v.trainable);
    out->set_offset(v.offset);
    out->set_size(v.size);
  }
}

std::string SpecChange(const std::string& saved, const std::string& now) {
  if (saved.empty() || now.empty() || saved == now) return "";
  // The same spec in another writer's text is no change: floats were written
  // with 9 digits before their shortest text (alpha 0.300000012, now 0.3).
  absl::StatusOr<ModelSpec> was = ParseModelSpec(saved, "the checkpoint's spec");
  absl::StatusOr<ModelSpec> is = ParseModelSpec(now, "the spec");
  if (was.ok() && is.ok() && SameModelSpec(*was, *is)) return "";
  const std::vector<absl::string_view> a = absl::StrSplit(saved, '\n');
  const std::vector<absl::string_view> b = absl::StrSplit(now, '\n');
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const absl::string_view was = i < a.size() ? a[i] : "(nothing)";
    const absl::string_view is = i < b.size() ? b[i] : "(nothing)";
    if (was != is) {
      return absl::StrCat("\"", absl::StripAsciiWhitespace(was), "\" is now \"",
                          absl::StripAsciiWhitespace(is), "\"");
    }
  }
  return "";
}

absl::Status CheckCheckpointMatchesModel(const CheckpointIndex& index, const Model& model,
                                         const std::string& index_path) {
  std::map<std::string, const CheckpointVariable*> saved;
  for (const CheckpointVariable& v : index.variables()) saved[v.name()] = &v;
  for (const VariableInfo& v : model.variables()) {
    auto it = saved.find(v.name);
    if (it == saved.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, " has no variable ", v.name, " of model ", model.name(),
                       " (it holds a checkpoint of model ", index.model(),
                       "); use a new --job_dir for a different model"));
    }
    const Shape shape(it->second->shape().begin(), it->second->shape().end());
    if (shape != v.shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable ", v.name, " has shape ", ShapeToString(shape), " in ", index_path,
                       " but ", ShapeToString(v.shape), " in model ", model.name(),
                       "; the model changed since the checkpoint: use a new --job_dir"));
    }
    if (it->second->offset() != v.offset || it->second->trainable() != v.trainable) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable ", v.name, " is at another place in ", index_path, " (offset ",
          it->second->offset(), ", not ", v.offset, "; trainable ", it->second->trainable(),
          ", not ", v.trainable, "): the model changed since the checkpoint"));
    }
    saved.erase(it);
  }
  if (!saved.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, " holds variable ",
                                                   saved.begin()->first, ", which model ",
                                                   model.name(), " does not have"));
  }
  if (index.model() != model.name() || index.num_params() != model.num_params() ||
      index.num_state() != model.num_state()) {
    return absl::InvalidArgumentError(absl::StrCat(
        index_path, " is a checkpoint of model ", index.model(), " (", index.num_params(),
        " parameters, ", index.num_state(), " state values), not of ", model.name(), " (",
        model.num_params(), ", ", model.num_state(), ")"));
  }
  return absl::OkStatus();
}

Checkpointer::Checkpointer(Env* env, const JobConfig& job, const Model* model,
                           std::unique_ptr<ParameterServers> servers, const TerminationNotice* stop)
    : env_(env), job_(job), model_(model), servers_(std::move(servers)), stop_(stop) {}

Checkpointer::~Checkpointer() { Stop(); }

absl::StatusOr<int64_t> Checkpointer::RestoreOrInitialize() {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<PsStatus> statuses, servers_->Statuses());
  bool all = true, any = false;
  for (const PsStatus& s : statuses) {
    all = all && s.initialized;
    any = any || s.initialized;
  }
  if (all) {
    // A restarted chief joins the job the ps are still running.
    LOG(INFO) << "parameter servers already initialized at global step " << LowestStep(statuses)
              << "; continuing";
    return LowestStep(statuses);
  }
  if (any) LOG(WARNING) << "some ps were initialized and some not; restoring all";
  return RestoreNewest();
}

absl::StatusOr<int64_t> Checkpointer::RollBack(const std::string& why, int64_t from_step) {
  LOG(ERROR) << why << "; rolling the job back from global step " << from_step
             << " to its last checkpoint";
  const absl::Time start = absl::Now();
  // Under listener_mu_: a listener cleared (its watch about to go) is never
  // called after.
  const auto tell = [this](bool done) {
    absl::MutexLock lock(&listener_mu_);
    if (rollback_listener_) rollback_listener_(done);
  };
  tell(false);
  absl::StatusOr<int64_t> restored = RestoreNewest();
  tell(true);
  PSTRAIN_ASSIGN_OR_RETURN(int64_t step, std::move(restored));
  LOG(INFO) << "rolled back from global step " << from_step << " to " << step << " in "
            << absl::StrFormat("%.0f", Millis(absl::Now() - start))
            << " ms; the replicas pull the restored parameters and go on";
  return step;
}

absl::StatusOr<int64_t> Checkpointer::RestoreNewest() {
  const TrainingSpec& t = job_.training;
  // Temp files of saves a crash interrupted: no save runs before this one.
  if (absl::StatusOr<std::vector<int64_t>> cleaned =
          DeleteCheckpointsBefore(env_, t.job_dir, 0, INT64_MAX);
      !cleaned.ok()) {
    LOG(WARNING) << "could not delete temp files of interrupted saves: " << cleaned.status();
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> steps, ListCheckpointSteps(env_, t.job_dir));
  for (int64_t step : steps) {
    const std::string index_path = JoinPath(t.job_dir, IndexFileName(CheckpointPrefix(step)));
    absl::StatusOr<CheckpointIndex> index = ReadCheckpointIndex(env_, index_path);
    if (!index.ok()) {
      LOG(WARNING) << "skipping checkpoint " << index_path << ": " << index.status().message();
      continue;
    }
    PSTRAIN_RETURN_IF_ERROR(CheckCheckpointMatchesModel(*index, *model_, index_path));
    if (const std::string change = SpecChange(index->model_spec(), model_->spec_yaml());
        !change.empty()) {
      // The variables fit (as TensorFlow restores by name), so it goes on.
      LOG(WARNING) << "the model spec changed since " << index_path << ": " << change
                   << "; restoring its variables into the model as it is now";
    }
    const absl::Time start = absl::Now();
    // The ps is told the checkpoint's name; it reads only from its job dir.
    absl::StatusOr<int64_t> restored = servers_->Restore(t.model, step);
    if (absl::IsDataLoss(restored.status()) || absl::IsNotFound(restored.status())) {
      LOG(WARNING) << "skipping damaged checkpoint " << CheckpointPrefix(step) << ": "
                   << restored.status().message();
      continue;
    }
    PSTRAIN_RETURN_IF_ERROR(restored.status());
    LOG(INFO) << "Restoring parameters from " << JoinPath(t.job_dir, CheckpointPrefix(step))
              << ": global step " << *restored << " (written by " << index->shards_size()
              << " ps, restored on " << job_.cluster.ps.size() << ", "
              << absl::StrFormat("%.0f", Millis(absl::Now() - start))
              << " ms); training resumes at step " << *restored + 1;
    absl::MutexLock lock(&save_mu_);
    last_saved_ = *restored;
    return *restored;
  }
  std::vector<float> params(model_->num_params()), state(model_->num_state());
  PSTRAIN_RETURN_IF_ERROR(
      InitializeModelVariables(env_, *model_, t.seed, params.data(), state.data()));
  PSTRAIN_RETURN_IF_ERROR(servers_->Initialize(t.model, params.data(), state.data(), 0));
  (steps.empty() ? LOG(INFO) : LOG(WARNING))
      << (steps.empty() ? "no checkpoint in " : "no usable checkpoint in ") << t.job_dir
      << "; initialized " << model_->num_params() << " parameters on " << job_.cluster.ps.size()
      << " ps (seed " << t.seed << ")";
  return 0;
}

absl::StatusOr<std::string> Checkpointer::SaveNow(absl::Duration wait) {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<PsStatus> statuses, servers_->Statuses());
  int64_t step = statuses[0].global_step;
  for (const PsStatus& s : statuses) {
    if (!s.initialized) return LostParameters(s.ps_task);
    step = std::min(step, s.global_step);
  }
  return SaveAt(step, wait, "final", /*exact=*/false);
}

absl::StatusOr<std::string> Checkpointer::SaveAt(int64_t step, absl::Duration wait,
                                                 const std::string& why, bool exact) {
  absl::MutexLock lock(&save_mu_);
  const std::string prefix = JoinPath(job_.training.job_dir, CheckpointPrefix(step));
  // Never rewrite a committed checkpoint (a restarted chief may get to a step
  // saved before): replacing its files would break it until the new index is
  // written.
  if (step == last_saved_ || env_->FileExists(IndexFileName(prefix))) return prefix;
  const int64_t trace_begin = TraceRecorder::NowMicros();
  const absl::Time start = absl::Now();
  // The ps is told the checkpoint's name; it writes only into its job dir.
  absl::StatusOr<std::vector<ShardSaved>> shards = servers_->Save(step, step, wait);
  if (absl::IsFailedPrecondition(shards.status())) {
    // A ps with nothing to save: it restarted since the last poll.
    return absl::UnavailableError(absl::StrCat(shards.status().message(),
                                               " (a parameter server restarted and lost its "
                                               "parameters; the job resumes from its last "
                                               "checkpoint)"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<ShardSaved> saved, std::move(shards));
  const absl::Time shards_done = absl::Now();
  absl::Duration copy, locked, write;
  int64_t bytes = 0, lo = INT64_MAX, hi = INT64_MIN;
  for (const ShardSaved& r : saved) {
    copy = std::max(copy, r.snapshot_time);
    locked = std::max(locked, r.longest_copy);
    write = std::max(write, r.write_time);
    bytes += static_cast<int64_t>(r.size_bytes);
    lo = std::min(lo, r.min_step);
    hi = std::max(hi, r.max_step);
    if (!r.rows_file.empty()) {  // the embedding rows are copied at a step too
      lo = std::min(lo, r.rows_step);
      hi = std::max(hi, r.rows_step);
    }
  }
  // Sync shards are copied at one step; if one did not get there in time (a
  // step waiting for a dead replica) or was already past it, the files do not
  // hold step `step` and are not committed (the previous checkpoint stays the
  // newest). Async shards step independently: a checkpoint holds each as it
  // was, restored at the lowest step.
  const bool sync = job_.training.update == UpdateMode::kSync;
  if (sync && (lo != step || hi != step)) {
    if (exact) {
      return absl::AbortedError(absl::StrCat("the shards were copied at steps ", lo, " to ", hi,
                                             ", not all at step ", step, "; not committed"));
    }
    LOG(WARNING) << "checkpoint " << step << " holds shards at steps " << lo << " to " << hi
                 << "; it restores at step " << step;
  }
  const int64_t index_begin = TraceRecorder::NowMicros();
  PSTRAIN_RETURN_IF_ERROR(Commit(step, saved));
  last_saved_ = step;
  if (trace_ != nullptr) {
    trace_->Complete("checkpoint", "ps save shards", trace_begin, index_begin, step);
    trace_->Complete("checkpoint", "write checkpoint index", index_begin,
                     TraceRecorder::NowMicros(), step);
  }
  LOG(INFO) << "Saving checkpoints for " << step << " into " << prefix << " (" << why << "; "
            << absl::StrFormat(
                   "%.1f MiB in %.0f ms: ps copy %.1f ms (a shard locked at most %.1f ms), "
                   "ps write %.0f ms, index %.0f ms",
                   bytes / 1048576.0, Millis(absl::Now() - start), Millis(copy), Millis(locked),
                   Millis(write), Millis(absl::Now() - shards_done))
            << ")";
  return prefix;
}

absl::Status Checkpointer::Commit(int64_t step, const std::vector<ShardSaved>& saved) {
  const TrainingSpec& t = job_.training;
  CheckpointIndex index;
  index.set_model(t.model);
  index.set_global_step(step);
  index.set_num_params(model_->num_params());
  index.set_num_state(model_->num_state());
  AddModelVariables(*model_, &index);
  index.set_optimizer(saved.front().optimizer);
  for (const std::string& name : saved.front().slot_names) index.add_slot_names(name);
  for (const ShardSaved& r : saved) {
    CheckpointShardFile* shard = index.add_shards();
    shard->set_file(r.file);
    shard->set_begin(r.begin);
    shard->set_end(r.end);
    shard->set_num_state(r.num_state);
    shard->set_size_bytes(r.size_bytes);
    shard->set_crc32c(r.crc32c);
    shard->set_rows_file(r.rows_file);
    shard->set_rows_size_bytes(r.rows_size_bytes);
    shard->set_rows_crc32c(r.rows_crc32c);
    for (int64_t n : r.table_rows) shard->add_table_rows(n);
    for (double v : r.table_sum_squares) shard->add_table_sum_squares(v);
  }
  for (const SparseTableInfo& table : model_->sparse_tables()) {
    CheckpointTable* t = index.add_tables();
    t->set_name(table.name);
    t->set_dim(table.dim);
    t->set_buckets(table.buckets);
    if (table.cross.empty()) t->set_feature(model_->sparse_features()[table.feature]);
  }
  if (model_->has_sparse()) index.set_table_optimizer(t.embedding_optimizer);
  index.set_hparams_yaml(JobConfigToYaml(job_));
  index.set_model_spec(model_->spec_yaml());
  index.set_unix_time(absl::ToUnixSeconds(absl::Now()));
  const std::string prefix = CheckpointPrefix(step);
  PSTRAIN_RETURN_IF_ERROR(
      WriteCheckpointIndex(env_, JoinPath(t.job_dir, IndexFileName(prefix)), index));
  // The checkpoint exists now. Newer ones on disk (damaged ones skipped at
  // restore) are left alone; they are overwritten when training gets there.
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> steps, ListCheckpointSteps(env_, t.job_dir));
  std::vector<int64_t> kept;
  for (int64_t s : steps) {
    if (s <= step &&
        (t.keep_checkpoint_max == 0 || kept.size() < static_cast<size_t>(t.keep_checkpoint_max))) {
      kept.push_back(s);
    }
  }
  CheckpointState state;
  state.model_checkpoint_path = prefix;
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
    state.all_model_checkpoint_paths.push_back(CheckpointPrefix(*it));
  }
  PSTRAIN_RETURN_IF_ERROR(
      env_->WriteFileAtomic(JoinPath(t.job_dir, "checkpoint"), FormatCheckpointState(state)));
  if (t.keep_checkpoint_max > 0 && !kept.empty()) {
    absl::StatusOr<std::vector<int64_t>> deleted =
        DeleteCheckpointsBefore(env_, t.job_dir, kept.back(), step);
    if (!deleted.ok()) {
      LOG(WARNING) << "could not delete old checkpoints: " << deleted.status();
    }
  }
  return absl::OkStatus();
}

void Checkpointer::Start(int64_t start_step) {
  thread_ = std::thread([this, start_step] { Loop(start_step); });
}

void Checkpointer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_requested_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status Checkpointer::background_status() const {
  absl::MutexLock lock(&mu_);
  return background_status_;
}

void Checkpointer::RequestRollBack(std::string why, std::function<void()> restored) {
  absl::MutexLock lock(&mu_);
  rollback_why_ = std::move(why);
  rollback_done_ = std::move(restored);
}

void Checkpointer::Loop(int64_t start_step) {
  auto monitor = std::make_unique<JobMonitor>(job_.training, start_step, stop_, absl::Now());
  int64_t highest = start_step;  // the highest step seen, for a requested rollback's log line
  while (true) {
    std::string rollback_why;
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_requested_), absl::Milliseconds(100))) return;
      rollback_why = rollback_why_;
    }
    if (!rollback_why.empty()) {
      absl::StatusOr<int64_t> step = RollBack(rollback_why, highest);
      if (!step.ok()) {
        LOG(ERROR) << "the rollback failed (tried again at the next poll): "
                   << step.status().message();
        continue;
      }
      monitor = std::make_unique<JobMonitor>(job_.training, *step, stop_, absl::Now());
      std::function<void()> done;
      {
        absl::MutexLock lock(&mu_);
        rollback_why_.clear();
        done = std::exchange(rollback_done_, nullptr);
      }
      if (done) done();
      continue;
    }
    absl::StatusOr<std::vector<PsStatus>> statuses = servers_->Statuses();
    if (!statuses.ok()) continue;  // The main loop reports a ps that is gone.
    if (observer_) observer_(*statuses);
    const JobObservation o = monitor->Observe(*statuses, absl::Now());
    highest = std::max(highest, o.highest_step);
    switch (o.event) {
      case JobEvent::kNothing:
        break;
      case JobEvent::kRollBack: {
        // Tried again at the next poll if it fails (a ps still away).
        absl::StatusOr<int64_t> step = RollBack(o.why, o.highest_step);
        if (!step.ok()) {
          LOG(ERROR) << "the rollback failed: " << step.status().message();
          break;
        }
        monitor = std::make_unique<JobMonitor>(job_.training, *step, stop_, absl::Now());
        break;
      }
      case JobEvent::kJobEnded:
        return;  // The final checkpoint is the main loop's.
      case JobEvent::kStopRequested:
        SaveAndEndJob(o);
        return;
      case JobEvent::kReplicaLeft:
      case JobEvent::kCheckpointDue: {
        absl::StatusOr<std::string> saved = SaveAt(o.save_step, o.wait, o.why, /*exact=*/true);
        if (!saved.ok()) {
          // Tried again at the next poll, at the step the chunks have reached by then.
          LOG(WARNING) << "checkpoint at global step " << o.save_step << ": "
                       << saved.status().message();
        } else {
          if (o.event == JobEvent::kCheckpointDue) monitor->PeriodicSaved(o, absl::Now());
          if (saved_observer_) saved_observer_(o.save_step, *saved);
        }
        break;
      }
    }
  }
}

void Checkpointer::SaveAndEndJob(const JobObservation& o) {
  const bool sync = job_.training.update == UpdateMode::kSync;
  absl::StatusOr<std::string> saved = SaveAt(o.save_step, o.wait, o.why, /*exact=*/true);
  if (!saved.ok() && sync) {
    LOG(WARNING) << "checkpoint at global step " << o.save_step << ": " << saved.status().message()
                 << "; saving at step " << o.lowest_step << " instead";
    saved = SaveAt(o.lowest_step, absl::ZeroDuration(), o.why, /*exact=*/false);
  }
  const int64_t step = saved.ok()
                           ? CheckpointStepOfName(saved->substr(saved->find_last_of('/') + 1))
                                 .value_or(o.lowest_step)
                           : o.lowest_step;
  const std::string reason =
      saved.ok() ? absl::StrCat(o.why, "; checkpoint saved at global step ", step)
                 : absl::StrCat(o.why, "; the checkpoint failed: ", saved.status().message());
  LOG(INFO) << "stopping the job: " << reason;
  stopped_early_ = true;
  absl::Status s = servers_->Shutdown(reason);
  absl::MutexLock lock(&mu_);
  if (!saved.ok()) background_status_ = saved.status();
  if (!s.ok() && background_status_.ok()) background_status_ = s;
}

}  // namespace pstrain
