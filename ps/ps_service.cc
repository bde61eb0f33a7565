#include "ps/ps_service.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
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

ParameterServerService::ParameterServerService(ParameterShard* shard, std::string model,
                                               int64_t num_params)
    : shard_(shard),
      model_(std::move(model)),
      num_params_(num_params),
      told_done_(shard->options().total_replicas, false) {}

absl::Status ParameterServerService::CheckShard(int shard) const {
  if (shard != shard_->options().shard_index) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request for shard ", shard, " reached ps task ", shard_->options().shard_index, " (of ",
        shard_->options().num_shards, "); check the cluster's ps addresses"));
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* ParameterServerService::Initialize(grpc::CallbackServerContext* context,
                                                             const InitializeRequest* request,
                                                             InitializeResponse*) {
  absl::Status s = CheckShard(request->shard());
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
  if (s.ok()) s = shard_->Initialize(params, state, request->global_step());
  if (s.ok()) {
    LOG(INFO) << "ps shard " << shard_->options().shard_index << " initialized at global step "
              << request->global_step() << " with " << params.size() << " parameters";
  }
  return Finish(context, s);
}

grpc::ServerUnaryReactor* ParameterServerService::Pull(grpc::CallbackServerContext* context,
                                                       const PullRequest* request,
                                                       PullResponse* response) {
  absl::Status s = CheckShard(request->shard());
  if (s.ok()) {
    absl::StatusOr<PushResult> r =
        shard_->Read(response->mutable_params(), response->mutable_state());
    s = r.status();
    if (s.ok()) {
      response->set_global_step(r->global_step);
      response->set_job_done(r->job_done);
    }
  }
  return Finish(context, s);
}

void ParameterServerService::DoPush(const PushRequest* request, ParameterShard::PushCallback done) {
  absl::Status s = CheckShard(request->shard());
  // The spans point into the request, which lives until the reactor finishes;
  // scratch copies (only for misaligned buffers) must live as long.
  auto scratch = std::make_shared<std::pair<std::vector<float>, std::vector<float>>>();
  absl::Span<const float> grads, stats;
  if (s.ok()) s = FloatView(request->gradients(), "gradients", &scratch->first, &grads);
  if (s.ok()) s = FloatView(request->batch_stats(), "batch_stats", &scratch->second, &stats);
  if (!s.ok()) {
    done(s, {});
    return;
  }
  shard_->Push(request->replica(), request->step(), grads, stats,
               [scratch, done = std::move(done)](absl::Status st, PushResult r) { done(st, r); });
}

void ParameterServerService::NoteDone(int replica, bool job_done) {
  if (!job_done) return;
  absl::MutexLock lock(&mu_);
  if (replica >= 0 && replica < static_cast<int>(told_done_.size())) told_done_[replica] = true;
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
  DoPush(request, [this, reactor, response, replica](absl::Status s, PushResult r) {
    if (s.ok()) {
      // Parameters as they are now: after this push's step in sync mode, the
      // latest in async mode.
      absl::StatusOr<PushResult> now =
          shard_->Read(response->mutable_params(), response->mutable_state());
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
  ParameterShard::Stats stats = shard_->GetStats();
  response->set_shard(shard_->options().shard_index);
  response->set_model(model_);
  response->set_initialized(stats.initialized);
  response->set_global_step(stats.global_step);
  response->set_begin(shard_->options().begin);
  response->set_end(shard_->options().end);
  response->set_applied_updates(stats.applied_updates);
  response->set_stale_pushes(stats.stale_pushes);
  response->set_shutting_down(stats.shutting_down);
  return Finish(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* ParameterServerService::Shutdown(grpc::CallbackServerContext* context,
                                                           const ShutdownRequest* request,
                                                           ShutdownResponse*) {
  LOG(INFO) << "ps shard " << shard_->options().shard_index << ": shutdown requested ("
            << request->reason() << ")";
  shard_->Shutdown();
  return Finish(context, absl::OkStatus());
}

}  // namespace pstrain
