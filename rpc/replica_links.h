#ifndef PSTRAIN_RPC_REPLICA_LINKS_H_
#define PSTRAIN_RPC_REPLICA_LINKS_H_

// A replicated ps's links to its backups over gRPC (grpc_replica_links.h),
// with no gRPC in this header so the role's logic (ps_server/) sees none.

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "config/wire_security.h"
#include "ps/ps_task.h"

namespace pstrain {

// GrpcReplicaLinks to the ps tasks at `addresses` (task order), each update
// within `deadline`.
std::unique_ptr<ReplicaLinks> MakeGrpcReplicaLinks(std::vector<std::string> addresses,
                                                   absl::Duration deadline,
                                                   const WireSecurity& wire);

}  // namespace pstrain

#endif  // PSTRAIN_RPC_REPLICA_LINKS_H_
