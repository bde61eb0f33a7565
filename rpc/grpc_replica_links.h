#ifndef PSTRAIN_RPC_GRPC_REPLICA_LINKS_H_
#define PSTRAIN_RPC_GRPC_REPLICA_LINKS_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "config/wire_security.h"
#include "ps/ps_task.h"
#include "rpc/ps_connections.h"

namespace pstrain {

// A replicated ps (issue 55): a primary task's updates to the tasks that
// hold its backups, over gRPC (ParameterServer.Replicate), each call with
// the job's credentials and token and a deadline of `deadline`: a backup
// that does not answer in time leaves the primary's stream (it rejoins with
// a fresh copy), so the primary's answers never wait longer than that; and
// once a task missed one (unreachable, or past the deadline), every later
// update to it fails at once, so each of a primary's streams does not wait
// the deadline again for it (until Reset).
// Thread-safe.
class GrpcReplicaLinks final : public ReplicaLinks {
 public:
  // `addresses`: every ps task's, in task order.
  GrpcReplicaLinks(std::vector<std::string> addresses, absl::Duration deadline,
                   const WireSecurity& wire = WireSecurity());

  absl::Status SendChunkUpdate(int task, int chunk, int64_t epoch,
                               const ChunkUpdate& update) override;
  absl::Status SendRowsUpdate(int task, int partition, int64_t epoch,
                              const RowsUpdate& update) override;
  // A copy is sent even to a task that missed an update (it rejoins), in
  // pieces of at most kRowsPerPiece rows, all by `deadline`.
  absl::Status SendChunkCopy(int task, int chunk, int64_t epoch,
                             const ParameterShard::BackupCopy& copy, absl::Time deadline) override;
  absl::Status SendRowsCopy(int task, int partition, int64_t epoch,
                            const SparseShard::BackupCopy& copy, absl::Time deadline) override;
  void Reset() override;

  static constexpr size_t kRowsPerPiece = 1 << 16;

 private:
  absl::Status Send(int task, const ReplicateRequest& request);
  absl::Status SendCopy(int task, const InstallCopyRequest& request, absl::Time deadline);

  PsConnections connections_;
  std::unique_ptr<std::atomic<bool>[]> down_;  // per task: missed an update
};

}  // namespace pstrain

#endif  // PSTRAIN_RPC_GRPC_REPLICA_LINKS_H_
