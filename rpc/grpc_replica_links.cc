#include "rpc/grpc_replica_links.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps_protocol/row_wire.h"
#include "rpc/copy_proto.h"
#include "rpc/grpc_util.h"
#include "rpc/replica_links.h"

namespace pstrain {
namespace {

void ToProto(const AppliedPushes& a, UpdateApplied* p) {
  p->set_sequence(a.sequence);
  p->set_generation(a.generation);
  p->set_step_before(a.step_before);
  p->set_step_after(a.step_after);
  for (const auto& [replica, step] : a.pushes) {
    p->add_replicas(replica);
    p->add_replica_steps(step);
  }
}

}  // namespace

GrpcReplicaLinks::GrpcReplicaLinks(std::vector<std::string> addresses, absl::Duration deadline,
                                   const WireSecurity& wire)
    : connections_(std::move(addresses), deadline, /*retry_budget=*/absl::ZeroDuration(), wire),
      down_(new std::atomic<bool>[connections_.size()]) {
  Reset();
}

void GrpcReplicaLinks::Reset() {
  for (int i = 0; i < connections_.size(); ++i) down_[i].store(false);
}

absl::Status GrpcReplicaLinks::SendChunkUpdate(int task, int chunk, int64_t epoch,
                                               const ChunkUpdate& update) {
  ReplicateRequest request;
  request.set_epoch(epoch);
  ToProto(update.applied, request.mutable_applied());
  request.set_chunk(chunk);
  EncodeFloats(update.grads, request.mutable_grads());
  EncodeFloats(update.stats, request.mutable_stats());
  return Send(task, request);
}

absl::Status GrpcReplicaLinks::SendRowsUpdate(int task, int partition, int64_t epoch,
                                              const RowsUpdate& update) {
  ReplicateRequest request;
  request.set_epoch(epoch);
  ToProto(update.applied, request.mutable_applied());
  request.set_chunk(-1);
  request.set_partition(partition);
  request.set_apply_step(update.apply_step);
  for (const RowsUpdate::Table& t : update.tables) {
    TableRows* rows = request.add_tables();
    rows->set_table(t.table);
    EncodeIds(t.ids, rows->mutable_ids());
    EncodeFloats(t.grads, rows->mutable_values());
  }
  return Send(task, request);
}

absl::Status GrpcReplicaLinks::SendChunkCopy(int task, int chunk, int64_t epoch,
                                             const ParameterShard::BackupCopy& copy,
                                             absl::Time deadline) {
  InstallCopyRequest request;
  request.set_chunk(chunk);
  request.set_epoch(epoch);
  request.set_last(true);
  ToProto(copy, &request);
  return SendCopy(task, request, deadline);
}

absl::Status GrpcReplicaLinks::SendRowsCopy(int task, int partition, int64_t epoch,
                                            const SparseShard::BackupCopy& copy,
                                            absl::Time deadline) {
  const std::vector<SparseShard::BackupCopy> pieces = RowsCopyPieces(copy, kRowsPerPiece);
  for (size_t k = 0; k < pieces.size(); ++k) {
    InstallCopyRequest request;
    request.set_chunk(-1);
    request.set_partition(partition);
    request.set_epoch(epoch);
    request.set_piece(static_cast<int>(k));
    request.set_last(k + 1 == pieces.size());
    ToProto(pieces[k], &request);
    PSTRAIN_RETURN_IF_ERROR(SendCopy(task, request, deadline));
  }
  return absl::OkStatus();
}

absl::Status GrpcReplicaLinks::SendCopy(int task, const InstallCopyRequest& request,
                                        absl::Time deadline) {
  if (task < 0 || task >= connections_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("no ps task ", task));
  }
  grpc::ClientContext context;
  connections_.Prepare(&context);
  context.set_deadline(absl::ToChronoTime(deadline));
  // The task just restarted: its channel may still be waiting to reconnect.
  context.set_wait_for_ready(true);
  InstallCopyResponse response;
  const grpc::Status s = connections_.stub(task)->InstallCopy(&context, request, &response);
  if (!s.ok()) {
    const absl::Status status = FromGrpcStatus(s);
    return absl::Status(status.code(), absl::StrCat("copying to ", connections_.TaskName(task),
                                                    ": ", status.message()));
  }
  // It holds the copy: its updates are sent again.
  down_[task].store(false, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status GrpcReplicaLinks::Send(int task, const ReplicateRequest& request) {
  if (task < 0 || task >= connections_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("no ps task ", task));
  }
  if (down_[task].load(std::memory_order_acquire)) {
    return absl::UnavailableError(
        absl::StrCat("replicating to ", connections_.TaskName(task),
                     ": it did not answer an update before (every stream drops it at once)"));
  }
  grpc::ClientContext context;
  connections_.Prepare(&context);
  context.set_deadline(absl::ToChronoTime(absl::Now() + connections_.rpc_timeout()));
  ReplicateResponse response;
  const grpc::Status s = connections_.stub(task)->Replicate(&context, request, &response);
  if (s.ok()) return absl::OkStatus();
  const absl::Status status = FromGrpcStatus(s);
  if (absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status)) {
    down_[task].store(true, std::memory_order_release);
  }
  return absl::Status(status.code(), absl::StrCat("replicating to ", connections_.TaskName(task),
                                                  ": ", status.message()));
}

std::unique_ptr<ReplicaLinks> MakeGrpcReplicaLinks(std::vector<std::string> addresses,
                                                   absl::Duration deadline,
                                                   const WireSecurity& wire) {
  return std::make_unique<GrpcReplicaLinks>(std::move(addresses), deadline, wire);
}

}  // namespace pstrain
