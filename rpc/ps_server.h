#ifndef PSTRAIN_RPC_PS_SERVER_H_
#define PSTRAIN_RPC_PS_SERVER_H_

// A ps task served over gRPC: what pstrain-ps runs, with no gRPC in its
// header so the role's logic (ps_server/) sees none.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "config/wire_security.h"
#include "models/model.h"
#include "ps/ps_task.h"

namespace pstrain {

// Serves `task` (ps `index` of the job, holding `model`'s parameters) on
// `address` with `wire`'s credentials and job token, from Start until
// Shutdown or destruction. Requests larger than a push of all of the task's
// range need can not be sent (RESOURCE_EXHAUSTED before they are read).
// `task` must outlive the server. Thread-safe.
class GrpcPsServer {
 public:
  // Unavailable when `address` cannot be listened on (in use, or not an
  // address of this host).
  static absl::StatusOr<std::unique_ptr<GrpcPsServer>> Start(PsTask* task, const Model& model,
                                                             int index, const std::string& address,
                                                             const WireSecurity& wire);
  // Shuts down at once if Shutdown was not called.
  ~GrpcPsServer();

  GrpcPsServer(const GrpcPsServer&) = delete;
  GrpcPsServer& operator=(const GrpcPsServer&) = delete;

  // Stops taking calls; the ones in flight have `grace` to finish. Once.
  void Shutdown(absl::Duration grace);

 private:
  struct Impl;
  explicit GrpcPsServer(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace pstrain

#endif  // PSTRAIN_RPC_PS_SERVER_H_
