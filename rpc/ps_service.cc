#include "rpc/ps_service.h"

#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps_protocol/bf16.h"
#include "ps_protocol/row_wire.h"
#include "ps_protocol/sparse_gradients.h"
#include "rpc/copy_proto.h"
#include "rpc/grpc_security.h"
#include "rpc/grpc_util.h"
#include "rpc/ps_proto.h"

namespace pstrain {
namespace {

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context, const absl::Status& s) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

// `bytes` as float32 values, decoding bfloat16 into `scratch`.
absl::Status GradientView(const std::string& bytes, Dtype dtype, std::vector<float>* scratch,
                          absl::Span<const float>* out) {
  if (dtype == FLOAT32) return FloatView(bytes, "gradients", scratch, out);
  if (dtype != BFLOAT16) {
    return absl::InvalidArgumentError(absl::StrCat("unknown gradient dtype ", dtype));
  }
  if (bytes.size() % sizeof(uint16_t) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("bfloat16 gradients have ", bytes.size(),
                                                   " bytes, not a whole number of values"));
  }
  const int64_t n = static_cast<int64_t>(bytes.size() / sizeof(uint16_t));
  std::vector<uint16_t> packed(n);
  // An empty vector's data() may be null, which memcpy must never get.
  if (n > 0) std::memcpy(packed.data(), bytes.data(), bytes.size());
  scratch->resize(n);
  Bf16ToFloats(packed.data(), n, scratch->data());
  *out = absl::Span<const float>(scratch->data(), n);
  return absl::OkStatus();
}

// A Save or Restore request names its checkpoint by step alone. One that
// carries fields this ps does not know (an older client still sending a path
// in field 1) is refused rather than half-read: saving model.ckpt-0 where the
// client meant a path would be wrong.
absl::Status NoUnknownFields(const google::protobuf::Message& request, const std::string& job_dir) {
  const google::protobuf::UnknownFieldSet& unknown =
      request.GetReflection()->GetUnknownFields(request);
  if (unknown.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      request.GetDescriptor()->name(), " carries field ", unknown.field(0).number(),
      ", which this ps does not read (older clients sent a checkpoint path in it); a ps "
      "saves and restores only model.ckpt-<step> in its job dir ",
      job_dir.empty() ? "(none was given to it)" : job_dir,
      ", named by the request's step: update the client (nothing was read or written)"));
}

// A request's TableRows decoded: ids, and room for (or the received) values.
struct DecodedRows {
  std::vector<int> tables;
  std::vector<std::vector<int64_t>> ids;
  std::vector<std::vector<float>> values;
};

// Decodes `rows` for `sparse`'s tables; with `with_values` the values must
// be ids x dim floats, else room for them is made.
absl::Status DecodeRows(const google::protobuf::RepeatedPtrField<TableRows>& rows,
                        const SparseShard& sparse, bool with_values, DecodedRows* out) {
  const std::vector<TableLayout>& layout = sparse.layout();
  for (const TableRows& t : rows) {
    if (t.table() < 0 || t.table() >= static_cast<int>(layout.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table ", t.table(), " is not one of the model's ", layout.size(), " embedding tables"));
    }
    out->tables.push_back(t.table());
    out->ids.emplace_back();
    PSTRAIN_RETURN_IF_ERROR(DecodeIds(t.ids(), "ids", &out->ids.back()));
    const size_t n = out->ids.back().size() * static_cast<size_t>(layout[t.table()].dim);
    if (n > static_cast<size_t>(kMaxMessageBytes) / sizeof(float)) {
      return absl::InvalidArgumentError(absl::StrCat("table ", layout[t.table()].name, ": ",
                                                     out->ids.back().size(),
                                                     " rows do not fit in one message"));
    }
    out->values.emplace_back();
    if (with_values) {
      PSTRAIN_RETURN_IF_ERROR(
          DecodeFloats(t.values(), n, layout[t.table()].name.c_str(), &out->values.back()));
    } else {
      out->values.back().resize(n);
    }
  }
  return absl::OkStatus();
}

absl::Status NoTables(const PsTask& task) {
  return absl::FailedPreconditionError(absl::StrCat("ps ", task.identity().ps_index, ": model ",
                                                    task.identity().model,
                                                    " has no embedding tables"));
}

}  // namespace

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

grpc::ServerUnaryReactor* ParameterServerService::Initialize(grpc::CallbackServerContext* context,
                                                             const InitializeRequest* request,
                                                             InitializeResponse*) {
  if (absl::Status a = CheckJobToken(token_, *context); !a.ok()) return Finish(context, a);
  std::vector<float> p_scratch, s_scratch;
  absl::Span<const float> params, state;
  absl::Status s = FloatView(request->params(), "params", &p_scratch, &params);
  if (s.ok()) s = FloatView(request->state(), "state", &s_scratch, &state);
  if (s.ok()) {
    s = task_->Initialize(request->chunk(), request->model(), request->num_params(), params, state,
                          request->global_step(), request->generation());
  }
  return Finish(context, s);
}

grpc::ServerUnaryReactor* ParameterServerService::Pull(grpc::CallbackServerContext* context,
                                                       const PullRequest* request,
                                                       PullResponse* response) {
  if (absl::Status a = CheckJobToken(token_, *context); !a.ok()) return Finish(context, a);
  absl::StatusOr<PushResult> r = task_->Read(
      request->chunk(), response->mutable_params(), response->mutable_state(), /*bf16=*/false,
      /*have_generation=*/0, /*have_version=*/0, request->has_at_step() ? request->at_step() : -1,
      request->replica());
  if (r.ok()) {
    response->set_global_step(r->global_step);
    response->set_job_done(r->job_done);
    response->set_generation(r->generation);
  }
  return Finish(context, r.status());
}

void ParameterServerService::DoPush(const PushRequest* request, ParameterShard::PushCallback done) {
  // The spans point into the request, which lives until the reactor finishes;
  // scratch copies (decoded or misaligned buffers) must live as long.
  auto scratch = std::make_shared<std::pair<std::vector<float>, std::vector<float>>>();
  absl::Span<const float> grads, stats;
  absl::Status s = GradientView(request->gradients(), request->dtype(), &scratch->first, &grads);
  if (s.ok() && !request->indices().empty()) {
    // A sparse (top-k) push: the values at the offsets, zero elsewhere.
    std::vector<float> dense;
    const int64_t size = task_->ChunkSize(request->chunk());
    s = size < 0 ? absl::InvalidArgumentError(
                       absl::StrCat("no chunk ", request->chunk(), " on this parameter server"))
                 : ScatterSparse(request->indices(), grads, size, &dense);
    scratch->first = std::move(dense);
    grads = scratch->first;
  }
  if (s.ok()) s = FloatView(request->batch_stats(), "batch_stats", &scratch->second, &stats);
  if (!s.ok()) {
    done(s, {});
    return;
  }
  PsTask::Progress progress;
  progress.loss_sum = request->loss_sum();
  progress.loss_batches = request->loss_batches();
  progress.examples = request->examples();
  task_->Push(request->chunk(), request->replica(), request->step(), request->generation(), grads,
              stats, progress,
              [scratch, done = std::move(done)](absl::Status st, PushResult r) { done(st, r); });
}

grpc::ServerUnaryReactor* ParameterServerService::Push(grpc::CallbackServerContext* context,
                                                       const PushRequest* request,
                                                       PushResponse* response) {
  if (absl::Status a = CheckJobToken(token_, *context); !a.ok()) return Finish(context, a);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const int replica = request->replica();
  DoPush(request, [this, reactor, response, replica](absl::Status s, PushResult r) {
    if (s.ok()) {
      response->set_global_step(r.global_step);
      response->set_stale(r.stale);
      response->set_job_done(r.job_done);
      response->set_generation(r.generation);
      task_->NoteDone(replica, r.job_done);
    }
    reactor->Finish(ToGrpcStatus(s));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::PushPull(grpc::CallbackServerContext* context,
                                                           const PushRequest* request,
                                                           PushPullResponse* response) {
  if (absl::Status a = CheckJobToken(token_, *context); !a.ok()) return Finish(context, a);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  DoPush(request, [this, reactor, request, response](absl::Status s, PushResult r) {
    if (s.ok()) {
      // Parameters as they are now: after this push's step in sync mode, the
      // latest in async mode.
      // Left out if the client holds them already (have_params_version).
      absl::StatusOr<PushResult> now = task_->Read(
          request->chunk(), response->mutable_params(), response->mutable_state(),
          request->dtype() == BFLOAT16, request->generation(), request->have_params_version());
      response->set_dtype(request->dtype());
      s = now.status();
      if (s.ok()) {
        response->set_global_step(now->global_step);
        response->set_generation(now->generation);
        response->set_params_version(now->params_version);
        response->set_params_unchanged(now->params_unchanged);
        response->set_stale(r.stale);
        response->set_job_done(r.job_done || now->job_done);
        task_->NoteDone(request->replica(), response->job_done());
      }
    }
    reactor->Finish(ToGrpcStatus(s));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Status(grpc::CallbackServerContext* context,
                                                         const StatusRequest* request,
                                                         StatusResponse* response) {
  if (absl::Status a = CheckJobToken(token_, *context); !a.ok()) return Finish(context, a);
  if (request->confirm_drops() > 0) task_->ConfirmDrops(request->confirm_drops());
  if (!request->has_owner()) {
    ToProto(task_->Status(), response);
    return Finish(context, absl::OkStatus());
  }
  absl::StatusOr<PsStatus> status = task_->StatusFor(request->owner());
  if (status.ok()) ToProto(*status, response);
  return Finish(context, status.status());
}

grpc::ServerUnaryReactor* ParameterServerService::Shutdown(grpc::CallbackServerContext* context,
                                                           const ShutdownRequest* request,
                                                           ShutdownResponse*) {
  if (absl::Status a = CheckJobToken(token_, *context); !a.ok()) return Finish(context, a);
  task_->Shutdown(request->reason());
  return Finish(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* ParameterServerService::Save(grpc::CallbackServerContext* context,
                                                       const SaveRequest* request,
                                                       SaveResponse* response) {
  if (absl::Status a = CheckJobToken(token_, *context); !a.ok()) return Finish(context, a);
  if (absl::Status s = NoUnknownFields(*request, task_->job_dir()); !s.ok()) {
    return Finish(context, s);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  RunInBackground([this, reactor, request, response] {
    const absl::Duration wait = absl::Milliseconds(request->wait_ms());
    absl::StatusOr<ShardSaved> saved =
        request->has_owner()
            ? task_->SaveFor(request->owner(), request->step(), request->global_step(), wait)
            : task_->Save(request->step(), request->global_step(), wait);
    if (saved.ok()) ToProto(*saved, response);
    reactor->Finish(ToGrpcStatus(saved.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Restore(grpc::CallbackServerContext* context,
                                                          const RestoreRequest* request,
                                                          RestoreResponse* response) {
  if (absl::Status a = CheckJobToken(token_, *context); !a.ok()) return Finish(context, a);
  if (absl::Status s = NoUnknownFields(*request, task_->job_dir()); !s.ok()) {
    return Finish(context, s);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  RunInBackground([this, reactor, request, response] {
    absl::StatusOr<int64_t> step = task_->Restore(request->model(), request->num_params(),
                                                  request->step(), request->generation());
    if (step.ok()) response->set_global_step(*step);
    reactor->Finish(ToGrpcStatus(step.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Leave(grpc::CallbackServerContext* context,
                                                        const LeaveRequest* request,
                                                        LeaveResponse*) {
  if (absl::Status a = CheckJobToken(token_, *context); !a.ok()) return Finish(context, a);
  return Finish(context,
                task_->Leave(request->replica(), request->reason(), request->input_ended()));
}

grpc::ServerUnaryReactor* ParameterServerService::PullRows(grpc::CallbackServerContext* context,
                                                           const PullRowsRequest* request,
                                                           PullRowsResponse* response) {
  if (absl::Status a = CheckJobToken(token_, *context); !a.ok()) return Finish(context, a);
  SparseShard* sparse = task_->sparse();
  if (sparse == nullptr) return Finish(context, NoTables(*task_));
  auto rows = std::make_shared<DecodedRows>();
  if (absl::Status s = DecodeRows(request->tables(), *sparse, false, rows.get()); !s.ok()) {
    return Finish(context, s);
  }
  std::vector<RowsRef> parts;
  for (size_t i = 0; i < rows->tables.size(); ++i) {
    parts.push_back({rows->tables[i], rows->ids[i], absl::MakeSpan(rows->values[i])});
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  task_->PullRows(
      request->replica(), request->step(), request->generation(), std::move(parts),
      [reactor, rows, request, response, sparse](absl::Status s) {
        if (s.ok()) {
          for (size_t i = 0; i < rows->tables.size(); ++i) {
            TableRows* out = response->add_tables();
            out->set_table(rows->tables[i]);
            out->set_ids(request->tables(static_cast<int>(i)).ids());
            EncodeFloats(rows->values[i], out->mutable_values());
          }
          response->set_step(sparse->step());
        }
        reactor->Finish(ToGrpcStatus(s));
      },
      request->has_owner() ? request->owner() : -1);
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::PushRows(grpc::CallbackServerContext* context,
                                                           const PushRowsRequest* request,
                                                           PushRowsResponse* response) {
  if (absl::Status a = CheckJobToken(token_, *context); !a.ok()) return Finish(context, a);
  SparseShard* sparse = task_->sparse();
  if (sparse == nullptr) return Finish(context, NoTables(*task_));
  DecodedRows rows;
  if (absl::Status s = DecodeRows(request->tables(), *sparse, true, &rows); !s.ok()) {
    return Finish(context, s);
  }
  std::vector<ConstRowsRef> parts;
  for (size_t i = 0; i < rows.tables.size(); ++i) {
    parts.push_back({rows.tables[i], rows.ids[i], rows.values[i]});
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Applied before PushRows returns (the parts are not kept); answered
  // once a replicated ps's backups hold it.
  task_->PushRows(
      request->replica(), request->step(), request->generation(), parts,
      [reactor, response](absl::StatusOr<PushResult> pushed) {
        if (pushed.ok()) {
          response->set_stale(pushed->stale);
          response->set_step(pushed->global_step);
        }
        reactor->Finish(ToGrpcStatus(pushed.status()));
      },
      request->has_owner() ? request->owner() : -1);
  return reactor;
}

namespace {

// A replicated update's floats: any whole number of them.
absl::StatusOr<AppliedPushes> FromProto(const UpdateApplied& p) {
  if (p.replicas_size() != p.replica_steps_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an update names ", p.replicas_size(), " replicas and ", p.replica_steps_size(), " steps"));
  }
  AppliedPushes a;
  a.sequence = p.sequence();
  a.generation = p.generation();
  a.step_before = p.step_before();
  a.step_after = p.step_after();
  for (int i = 0; i < p.replicas_size(); ++i) {
    a.pushes.emplace_back(p.replicas(i), p.replica_steps(i));
  }
  return a;
}

}  // namespace

grpc::ServerUnaryReactor* ParameterServerService::Replicate(grpc::CallbackServerContext* context,
                                                            const ReplicateRequest* request,
                                                            ReplicateResponse* /*response*/) {
  if (absl::Status a = CheckJobToken(token_, *context); !a.ok()) return Finish(context, a);
  absl::StatusOr<AppliedPushes> applied = FromProto(request->applied());
  if (!applied.ok()) return Finish(context, applied.status());
  if (request->chunk() >= 0) {
    ChunkUpdate update;
    update.applied = *std::move(applied);
    absl::Status s = DecodeAllFloats(request->grads(), "grads", &update.grads);
    if (s.ok()) s = DecodeAllFloats(request->stats(), "stats", &update.stats);
    if (s.ok()) s = task_->FollowChunk(request->chunk(), update, request->epoch());
    return Finish(context, s);
  }
  // A backup's rows, or its own after a rejoin (it follows them then).
  SparseShard* rows = request->partition() == task_->identity().ps_index
                          ? task_->sparse()
                          : task_->backup_rows(request->partition());
  if (rows == nullptr) {
    return Finish(context, task_->FollowRows(request->partition(), RowsUpdate(), request->epoch()));
  }
  DecodedRows decoded;
  if (absl::Status s = DecodeRows(request->tables(), *rows, true, &decoded); !s.ok()) {
    return Finish(context, s);
  }
  RowsUpdate update;
  update.applied = *std::move(applied);
  update.apply_step = request->apply_step();
  for (size_t i = 0; i < decoded.tables.size(); ++i) {
    update.tables.push_back(
        {decoded.tables[i], std::move(decoded.ids[i]), std::move(decoded.values[i])});
  }
  return Finish(context, task_->FollowRows(request->partition(), update, request->epoch()));
}

grpc::ServerUnaryReactor* ParameterServerService::Promote(grpc::CallbackServerContext* context,
                                                          const PromoteRequest* request,
                                                          PromoteResponse* /*response*/) {
  if (absl::Status a = CheckJobToken(token_, *context); !a.ok()) return Finish(context, a);
  if (request->fence()) {
    if (request->owner() != task_->identity().ps_index) {
      return Finish(context, absl::InvalidArgumentError(
                                 absl::StrCat("a fence for ps ", request->owner(), " reached ps ",
                                              task_->identity().ps_index)));
    }
    return Finish(context, task_->Fence(request->epoch()));
  }
  const std::vector<int> backups(request->backups().begin(), request->backups().end());
  return Finish(context, task_->Promote(request->owner(), request->epoch(), backups));
}

grpc::ServerUnaryReactor* ParameterServerService::AddBackup(grpc::CallbackServerContext* context,
                                                            const AddBackupRequest* request,
                                                            AddBackupResponse* /*response*/) {
  if (absl::Status a = CheckJobToken(token_, *context); !a.ok()) return Finish(context, a);
  if (request->timeout_ms() <= 0) {
    return Finish(context, absl::InvalidArgumentError(absl::StrCat(
                               "AddBackup needs timeout_ms > 0, got ", request->timeout_ms())));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  RunInBackground([this, reactor, request] {
    reactor->Finish(ToGrpcStatus(task_->AddBackup(request->owner(), request->task(),
                                                  absl::Milliseconds(request->timeout_ms()))));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::InstallCopy(grpc::CallbackServerContext* context,
                                                              const InstallCopyRequest* request,
                                                              InstallCopyResponse* /*response*/) {
  if (absl::Status a = CheckJobToken(token_, *context); !a.ok()) return Finish(context, a);
  if (request->chunk() >= 0) {
    ParameterShard::BackupCopy copy;
    absl::Status s = FromProto(*request, &copy);
    if (s.ok()) s = task_->InstallChunkCopy(request->chunk(), request->epoch(), copy);
    return Finish(context, s);
  }
  SparseShard::BackupCopy piece;
  absl::Status s = FromProto(*request, &piece);
  if (s.ok()) {
    s = task_->InstallRowsCopy(request->partition(), request->epoch(), std::move(piece),
                               request->piece(), request->last());
  }
  return Finish(context, s);
}

}  // namespace pstrain
