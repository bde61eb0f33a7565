#ifndef PSTRAIN_RPC_ROW_CLIENT_H_
#define PSTRAIN_RPC_ROW_CLIENT_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "models/sparse_input.h"
#include "ps_protocol/parameter_client.h"
#include "ps_protocol/shard_layout.h"
#include "rpc/ps_connections.h"

namespace pstrain {

// The rows of a model's embedding tables on the parameter servers, over
// gRPC. A step's distinct ids (Model::PrepareSparse) are grouped by the ps
// that owns them (RowOwner): one PullRows call per ps that owns any, and one
// PushRows call per ps, all in flight at once, retried within the
// connections' budget. Bytes on the wire grow with the batch's distinct ids
// times dim, never with the tables. Thread-compatible.
class RowClient : public RowReader {
 public:
  // `connections` must outlive the client; `replica` -1 for one that only reads.
  RowClient(const PsConnections* connections, std::vector<TableLayout> tables, int replica);

  // The training pull of the rows for `global_step` by a replica holding
  // parameters of `generation` (a sync ps answers once step - 1's pushes
  // were applied, or at once to another generation).
  absl::Status Pull(SparseStep* step, int64_t global_step, int64_t generation = 0);
  // An evaluation's read: never waits.
  absl::Status ReadRows(SparseStep* step) override;

  // Sends the gradient rows of `step` (computed at `global_step` from
  // parameters of `generation`) to the ps that own them; every ps gets a
  // push, empty or not, since a sync ps counts every replica. True if any ps
  // dropped it as stale; ABORTED if the rows were restored since.
  absl::StatusOr<bool> Push(const SparseStep& step, int64_t global_step, int64_t generation);

  struct Traffic {
    int64_t bytes_sent = 0;  // ids and gradient rows
    int64_t bytes_received = 0;
    int64_t rows_pulled = 0;
    int64_t rows_pushed = 0;
  };
  Traffic traffic() const;

 private:
  // Which ps owns each id of each table: owner[t][k] and, for the scatter
  // back, the position of id k in its ps's part.
  struct Placement {
    std::vector<std::vector<int32_t>> owner;
    std::vector<std::vector<int32_t>> position;
  };
  Placement Place(const SparseStep& step) const;
  absl::Status PullAs(int replica, SparseStep* step, int64_t global_step, int64_t generation);

  const PsConnections* const connections_;
  const std::vector<TableLayout> tables_;
  const int replica_;
  mutable absl::Mutex mu_;
  Traffic traffic_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain

#endif  // PSTRAIN_RPC_ROW_CLIENT_H_
