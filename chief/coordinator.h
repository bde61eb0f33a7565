#ifndef PSTRAIN_CHIEF_COORDINATOR_H_
#define PSTRAIN_CHIEF_COORDINATOR_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ps_protocol/parameter_client.h"
#include "ps_protocol/parameter_servers.h"
#include "ps_protocol/shard_layout.h"
#include "role/role_context.h"
#include "role/role_flags.h"

namespace pstrain {

// What the chief runs against: the files and stop request of its process,
// and how it reaches the parameter servers. RunChief wires gRPC; a test
// wires in-process parameter servers and a MemEnv. Everything must outlive
// the run.
struct ChiefDependencies {
  Env* env = nullptr;
  const TerminationNotice* termination = nullptr;
  TraceRecorder* trace = nullptr;  // --trace_steps; may be null
  // A new handle on every ps task, as patient as `patience` says; each of
  // the chief's threads gets its own.
  std::function<absl::StatusOr<std::unique_ptr<ParameterServers>>(const ShardLayout& layout,
                                                                  const CallPatience& patience)>
      connect;
  // The training client of replica `replica` (the chief trains as replica 0).
  std::function<absl::StatusOr<std::unique_ptr<ParameterClient>>(const ShardLayout& layout,
                                                                 int replica)>
      training_client;
};

// Runs the chief of `job` (`replica` is its training replica id, -1 if it
// does not train): waits for every ps (up to startup_timeout), restores the
// newest checkpoint or initializes the parameters (unless the ps already
// hold them), saves checkpoints and writes summaries on a thread of its own,
// trains as replica 0 or follows the global step, evaluates on the test set
// every eval_steps and at the end (the "Saving dict for global step N: ..."
// line), and once the global step reaches train_steps saves the final
// checkpoint, marks the job complete and shuts every ps down, which ends the
// job. A stop request saves a checkpoint and ends the job early (OK). A ps
// that comes back without its parameters (restarted), or no progress for
// watchdog_secs, rolls the job back to the last checkpoint. If the chief
// fails (bad data, a ps that fails), it logs why and tells the ps to shut
// down, best effort within about a second, so the whole job ends instead of
// waiting for a chief that is gone; except for Unavailable (a ps away past
// the retry budget): the job is left running for a restarted chief.
absl::Status RunChiefWith(const JobConfig& job, int replica, const ChiefDependencies& deps);

// RunChiefWith over gRPC, for the task in `role`.
absl::Status RunChief(const RoleConfig& role, const RoleContext& context);

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_COORDINATOR_H_
