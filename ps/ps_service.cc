#include "ps/ps_service.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/bf16.h"
#include "common/grpc_util.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context, const absl::Status& s) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

}  // namespace

ParameterServerService::ParameterServerService(const PsIdentity& identity,
                                               std::vector<ParameterShard*> shards, Env* env)
    : identity_(identity),
      ps_index_(identity.ps_index),
      shards_(std::move(shards)),
      model_(identity.model),
      num_params_(identity.num_params),
      env_(env),
      told_done_(shards_.front()->options().total_replicas, false) {}

ParameterServerService::~ParameterServerService() {
  std::vector<Background> threads;
  {
    absl::MutexLock lock(&mu_);
    threads.swap(threads_);
  }
  for (Background& b : threads) b.thread.join();
}

void ParameterServerService::RunInBackground(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  // Join the ones that finished, so a long job does not pile them up.
  for (auto it = threads_.begin(); it != threads_.end();) {
    if (it->done->load()) {
      it->thread.join();
      it = threads_.erase(it);
    } else {
      ++it;
    }
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  threads_.push_back({std::thread([work = std::move(work), done] {
                        work();
                        done->store(true);
                      }),
                      done});
}

absl::StatusOr<ParameterShard*> ParameterServerService::FindShard(int shard) const {
  for (ParameterShard* s : shards_) {
    if (s->options().shard_index == shard) return s;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "request for shard ", shard, " reached ps task ", ps_index_, ", which holds shards ",
      shards_.front()->options().shard_index, " to ", shards_.back()->options().shard_index,
      "; check that every process uses the same cluster and model"));
}

grpc::ServerUnaryReactor* ParameterServerService::Initialize(grpc::CallbackServerContext* context,
                                                             const InitializeRequest* request,
                                                             InitializeResponse*) {
  absl::StatusOr<ParameterShard*> shard = FindShard(request->shard());
  absl::Status s = shard.status();
  if (s.ok() && request->model() != model_) {
    s = absl::InvalidArgumentError(absl::StrCat("initialization for model \"", request->model(),
                                                "\" reached a ps serving \"", model_, "\""));
  }
  if (s.ok() && request->num_params() != num_params_) {
    s = absl::InvalidArgumentError(absl::StrCat("initialization for ", request->num_params(),
                                                " parameters reached a ps whose model has ",
                                                num_params_));
  }
  std::vector<float> p_scratch, s_scratch;
  absl::Span<const float> params, state;
  if (s.ok()) s = FloatView(request->params(), "params", &p_scratch, &params);
  if (s.ok()) s = FloatView(request->state(), "state", &s_scratch, &state);
  if (s.ok()) s = (*shard)->Initialize(params, state, request->global_step());
  if (s.ok() && request->shard() == shards_.front()->options().shard_index) {
    LOG(INFO) << "ps " << ps_index_ << " initialized at global step " << request->global_step();
  }
  return Finish(context, s);
}

grpc::ServerUnaryReactor* ParameterServerService::Pull(grpc::CallbackServerContext* context,
                                                       const PullRequest* request,
                                                       PullResponse* response) {
  absl::StatusOr<ParameterShard*> shard = FindShard(request->shard());
  absl::Status s = shard.status();
  if (s.ok()) {
    absl::StatusOr<PushResult> r =
        (*shard)->Read(response->mutable_params(), response->mutable_state());
    s = r.status();
    if (s.ok()) {
      response->set_global_step(r->global_step);
      response->set_job_done(r->job_done);
    }
  }
  return Finish(context, s);
}

void ParameterServerService::DoPush(const PushRequest* request, ParameterShard::PushCallback done) {
  absl::StatusOr<ParameterShard*> shard = FindShard(request->shard());
  absl::Status s = shard.status();
  // The spans point into the request, which lives until the reactor finishes;
  // scratch copies (only for misaligned buffers) must live as long.
  auto scratch = std::make_shared<std::pair<std::vector<float>, std::vector<float>>>();
  absl::Span<const float> grads, stats;
  if (s.ok() && request->dtype() == BFLOAT16) {
    if (request->gradients().size() % sizeof(uint16_t) != 0) {
      s = absl::InvalidArgumentError(absl::StrCat("bfloat16 gradients have ",
                                                  request->gradients().size(),
                                                  " bytes, not a whole number of values"));
    } else {
      const int64_t n = static_cast<int64_t>(request->gradients().size() / sizeof(uint16_t));
      std::vector<uint16_t> packed(n);
      std::memcpy(packed.data(), request->gradients().data(), request->gradients().size());
      scratch->first.resize(n);
      Bf16ToFloats(packed.data(), n, scratch->first.data());
      grads = absl::Span<const float>(scratch->first.data(), n);
    }
  } else if (s.ok() && request->dtype() != FLOAT32) {
    s = absl::InvalidArgumentError(absl::StrCat("unknown gradient dtype ", request->dtype()));
  } else if (s.ok()) {
    s = FloatView(request->gradients(), "gradients", &scratch->first, &grads);
  }
  if (s.ok()) s = FloatView(request->batch_stats(), "batch_stats", &scratch->second, &stats);
  if (!s.ok()) {
    done(s, {});
    return;
  }
  if (request->loss_batches() > 0 || request->examples() > 0) {
    absl::MutexLock lock(&mu_);
    loss_sum_ += request->loss_sum();
    loss_batches_ += request->loss_batches();
    examples_ += request->examples();
  }
  (*shard)->Push(request->replica(), request->step(), grads, stats,
                 [scratch, done = std::move(done)](absl::Status st, PushResult r) { done(st, r); });
}

void ParameterServerService::NoteDone(int replica, bool job_done) {
  absl::MutexLock lock(&mu_);
  // A replica that left (or was told) and pushes again is back in the job.
  if (replica >= 0 && replica < static_cast<int>(told_done_.size())) told_done_[replica] = job_done;
}

int ParameterServerService::replicas_told_done() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(std::count(told_done_.begin(), told_done_.end(), true));
}

grpc::ServerUnaryReactor* ParameterServerService::Push(grpc::CallbackServerContext* context,
                                                       const PushRequest* request,
                                                       PushResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const int replica = request->replica();
  DoPush(request, [this, reactor, response, replica](absl::Status s, PushResult r) {
    if (s.ok()) {
      response->set_global_step(r.global_step);
      response->set_stale(r.stale);
      response->set_job_done(r.job_done);
      NoteDone(replica, r.job_done);
    }
    reactor->Finish(ToGrpcStatus(s));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::PushPull(grpc::CallbackServerContext* context,
                                                           const PushRequest* request,
                                                           PushPullResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const int replica = request->replica();
  DoPush(request, [this, reactor, request, response, replica](absl::Status s, PushResult r) {
    if (s.ok()) {
      // Parameters as they are now: after this push's step in sync mode, the
      // latest in async mode.
      absl::StatusOr<PushResult> now =
          (*FindShard(request->shard()))
              ->Read(response->mutable_params(), response->mutable_state(),
                     request->dtype() == BFLOAT16);
      response->set_dtype(request->dtype());
      s = now.status();
      if (s.ok()) {
        response->set_global_step(now->global_step);
        response->set_stale(r.stale);
        response->set_job_done(r.job_done || now->job_done);
        NoteDone(replica, response->job_done());
      }
    }
    reactor->Finish(ToGrpcStatus(s));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Status(grpc::CallbackServerContext* context,
                                                         const StatusRequest*,
                                                         StatusResponse* response) {
  // The ps as a whole: the lowest step of its shards (they step together in
  // sync mode; in async mode a push may have reached some shards first),
  // initialized once every shard is.
  const ParameterShard::Stats first = shards_.front()->GetStats();
  bool initialized = true;
  int64_t stale = 0;
  int64_t step = first.global_step;
  int64_t max_step = first.global_step;
  bool job_done = false;
  for (ParameterShard* shard : shards_) {
    const ParameterShard::Stats stats = shard->GetStats();
    initialized = initialized && stats.initialized;
    stale += stats.stale_pushes;
    step = std::min(step, stats.global_step);
    max_step = std::max(max_step, stats.global_step);
    job_done = job_done || stats.job_done;
  }
  response->set_max_global_step(max_step);
  response->set_preempting(preempting_);
  response->set_departures(departures_);
  {
    absl::MutexLock lock(&mu_);
    response->set_loss_sum(loss_sum_);
    response->set_loss_batches(loss_batches_);
    response->set_examples(examples_);
  }
  response->set_job_done(job_done);
  response->set_shard(ps_index_);
  response->set_model(model_);
  response->set_initialized(initialized);
  response->set_global_step(step);
  response->set_begin(shards_.front()->options().begin);
  response->set_end(shards_.back()->options().end);
  response->set_applied_updates(first.applied_updates);
  response->set_stale_pushes(stale);
  response->set_shutting_down(first.shutting_down);
  return Finish(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* ParameterServerService::Shutdown(grpc::CallbackServerContext* context,
                                                           const ShutdownRequest* request,
                                                           ShutdownResponse*) {
  LOG(INFO) << "ps " << ps_index_ << ": shutdown requested (" << request->reason() << ")";
  for (ParameterShard* shard : shards_) shard->Shutdown();
  return Finish(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* ParameterServerService::Save(grpc::CallbackServerContext* context,
                                                       const SaveRequest* request,
                                                       SaveResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (request->prefix().empty() || request->step() < 0 || request->wait_ms() < 0) {
    reactor->Finish(ToGrpcStatus(absl::InvalidArgumentError(
        "Save needs a checkpoint prefix, a step >= 0 and wait_ms >= 0")));
    return reactor;
  }
  RunInBackground([this, reactor, request, response] {
    absl::MutexLock file_lock(&file_mu_);
    absl::StatusOr<ShardSaveResult> r =
        SaveShards(env_, identity_, shards_, request->prefix(), request->global_step(),
                   request->step(), absl::Milliseconds(request->wait_ms()));
    if (r.ok()) {
      const std::string& path = r->written.path;
      response->set_file(path.substr(path.find_last_of('/') + 1));
      response->set_begin(r->begin);
      response->set_end(r->end);
      response->set_num_state(r->num_state);
      response->set_size_bytes(r->written.size_bytes);
      response->set_crc32c(r->written.crc32c);
      response->set_min_step(r->min_step);
      response->set_max_step(r->max_step);
      for (const std::string& name : r->slot_names) response->add_slot_names(name);
      response->set_optimizer(r->optimizer);
      response->set_snapshot_micros(absl::ToInt64Microseconds(r->snapshot_time));
      response->set_write_micros(absl::ToInt64Microseconds(r->write_time));
      response->set_longest_copy_micros(absl::ToInt64Microseconds(r->longest_copy));
    } else {
      LOG(WARNING) << "ps " << ps_index_ << ": save to " << request->prefix()
                   << " failed: " << r.status();
    }
    reactor->Finish(ToGrpcStatus(r.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Restore(grpc::CallbackServerContext* context,
                                                          const RestoreRequest* request,
                                                          RestoreResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (request->model() != model_ || request->num_params() != num_params_) {
    reactor->Finish(ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("restore of model \"", request->model(), "\" with ", request->num_params(),
                     " parameters reached a ps serving \"", model_, "\" with ", num_params_))));
    return reactor;
  }
  RunInBackground([this, reactor, request, response] {
    absl::MutexLock file_lock(&file_mu_);
    absl::StatusOr<int64_t> step = RestoreShards(env_, identity_, shards_, request->index_path());
    if (step.ok()) {
      response->set_global_step(*step);
      LOG(INFO) << "ps " << ps_index_ << " restored from " << request->index_path()
                << " at global step " << *step;
    }
    reactor->Finish(ToGrpcStatus(step.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Leave(grpc::CallbackServerContext* context,
                                                        const LeaveRequest* request,
                                                        LeaveResponse*) {
  const int total = shards_.front()->options().total_replicas;
  if (request->replica() < 0 || request->replica() >= total) {
    return Finish(context, absl::InvalidArgumentError(absl::StrCat(
                               "replica ", request->replica(), " is outside [0, ", total, ")")));
  }
  LOG(INFO) << "ps " << ps_index_ << ": replica " << request->replica() << " is leaving ("
            << request->reason() << ")";
  for (ParameterShard* shard : shards_) shard->ReplicaLeft(request->replica());
  ++departures_;
  NoteDone(request->replica(), /*job_done=*/true);  // No need to wait for it at the end.
  return Finish(context, absl::OkStatus());
}

}  // namespace pstrain
