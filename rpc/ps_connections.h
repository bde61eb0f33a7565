#ifndef PSTRAIN_RPC_PS_CONNECTIONS_H_
#define PSTRAIN_RPC_PS_CONNECTIONS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/backoff.h"
#include "proto/parameter_server.grpc.pb.h"
#include "ps_protocol/shard_layout.h"
#include "rpc/grpc_security.h"

namespace pstrain {

// The gRPC channels to every ps task of a job and the one way calls go out
// to many of them: shared by the training data path (ps_client.h) and the
// admin broadcasts (grpc_parameter_servers.h). Thread-safe.
class PsConnections {
 public:
  // `rpc_timeout`: the deadline of every call. `retry_budget`: how long
  // UNAVAILABLE calls are retried (with backoff) before giving up, which
  // covers ps tasks that are still starting or restarting. `wire`: mutual
  // TLS (each ps must present the certificate the job's CA signed for
  // "ps-<i>") and the job token every call carries; plaintext by default.
  // `copies`: the job's ps_replication (issue 55); above 1, calls for a
  // task's chunks and rows go where they are served now (Serving), which
  // moves with a failover.
  // A call for a task's chunks unanswered for half of `failover_after`
  // asks where they are served (every second), and is cancelled and sent
  // there if they moved: a stopped primary never fails its calls.
  PsConnections(std::vector<std::string> addresses, absl::Duration rpc_timeout,
                absl::Duration retry_budget, const WireSecurity& wire = WireSecurity(),
                int copies = 1, absl::Duration failover_after = absl::Seconds(2));

  int size() const { return static_cast<int>(stubs_.size()); }
  ParameterServer::Stub* stub(int ps) const { return stubs_[ps].get(); }
  const std::string& address(int ps) const { return addresses_[ps]; }
  absl::Duration rpc_timeout() const { return rpc_timeout_; }
  absl::Duration retry_budget() const { return retry_budget_; }
  // "ps 1 at host:port", for messages.
  std::string TaskName(int ps) const;
  // A replicated job: the copies of every chunk, and the task that serves
  // task `owner`'s chunks and rows now (`owner` itself unless a failover
  // moved them).
  int copies() const { return copies_; }
  int Serving(int owner) const { return routes_[owner].load(std::memory_order_acquire); }
  // After a call for `owner`'s chunks failed in a way a failover explains
  // (FailoverSuspect): asks `owner`'s copies who serves them now (Status,
  // the highest epoch among the initialized answers) and routes there.
  // True if the route changed. Blocks for at most a second; calls from many
  // threads at once ask once.
  bool Reroute(int owner) const;
  // A failed call for a task's chunks a failover may explain: the task is
  // unreachable (UNAVAILABLE, DEADLINE_EXCEEDED), no longer serves them
  // (FAILED_PRECONDITION), or was fenced (ABORTED "fenced"). False when the
  // job is not replicated.
  bool FailoverSuspect(const grpc::Status& s) const;
  // The waits between retries of a call: PsRetryBackoff, or at most 250 ms
  // apart in a replicated job (a failover takes failover_secs).
  Backoff RetryBackoff() const;

  // Puts what every call carries (the job token) on `context`.
  void Prepare(grpc::ClientContext* context) const { AttachJobToken(wire_, context); }

  // Starts call number i on `context`; `done` gets its status.
  using Call = std::function<void(int i, grpc::ClientContext* context,
                                  std::function<void(grpc::Status)> done)>;

  // Runs call(i) for every i in `indices` in parallel, each with a deadline
  // `timeout` from now, and waits for all; the statuses in `indices` order.
  // With `owner` (a replicated job, call i for task owner(i)'s chunks, sent
  // where Serving says), a call that hangs where the chunks no longer are is
  // cancelled (CANCELLED).
  std::vector<grpc::Status> CallOnce(const std::vector<int>& indices, absl::Duration timeout,
                                     const Call& call,
                                     const std::function<int(int)>& owner = nullptr) const;

  // Runs call(i) for every i in [0, n) in parallel and waits; retries the
  // UNAVAILABLE ones with exponential backoff within `budget` (the retry
  // budget if unset). The first other failure, or an UNAVAILABLE one past the
  // budget, is the error, named by `what` and `target(i)`.
  //
  // With `owner` (a replicated job): call i is for task owner(i)'s chunks
  // or rows, and goes where they are served (call(i) reads Serving); a
  // failure a failover explains is rerouted and retried within the budget
  // (UNAVAILABLE and DEADLINE_EXCEEDED always, others if the route changed).
  absl::Status Broadcast(int n, const char* what, const std::function<std::string(int)>& target,
                         const Call& call, std::optional<absl::Duration> budget = std::nullopt,
                         const std::function<int(int)>& owner = nullptr) const;

  // Pulls every chunk of `layout` into `params` and `state` (the model's
  // flat vectors); each chunk's step goes to (*chunk_steps)[c], and its
  // generation to (*chunk_generations)[c] if that is not null; `job_done`
  // if any chunk says so, and whether each does to (*chunk_done)[c] if that
  // is not null. `at_step`: PullRequest.at_step, for `replica`. Returns the
  // payload bytes received.
  absl::StatusOr<int64_t> PullChunks(const ShardLayout& layout, float* params, float* state,
                                     std::vector<int64_t>* chunk_steps, bool* job_done,
                                     std::vector<int64_t>* chunk_generations = nullptr,
                                     std::vector<char>* chunk_done = nullptr,
                                     std::optional<int64_t> at_step = std::nullopt,
                                     int replica = -1) const;

 private:
  const std::vector<std::string> addresses_;
  const absl::Duration rpc_timeout_;
  const absl::Duration retry_budget_;
  const WireSecurity wire_;
  const int copies_;
  const absl::Duration failover_after_;
  std::vector<std::unique_ptr<ParameterServer::Stub>> stubs_;
  // Owner -> the task serving its chunks (copies_ > 1).
  std::unique_ptr<std::atomic<int>[]> routes_;
  std::unique_ptr<std::atomic<int64_t>[]> route_epochs_;  // the epoch each route was found at
  mutable absl::Mutex reroute_mu_;                        // one Reroute at a time
};

// UNAVAILABLE: a ps that is starting, restarting or briefly unreachable.
bool Retryable(const grpc::Status& s);

// The waits between retries of a Retryable call to a ps: 50 ms, doubling up to 2 s.
inline Backoff PsRetryBackoff() { return Backoff(absl::Milliseconds(50), absl::Seconds(2)); }

// The error of call `what` to `target`, with the server's message and, if it
// was retried until `budget` ran out, a hint.
absl::Status CallError(const char* what, const std::string& target, const grpc::Status& s,
                       absl::Duration budget);

}  // namespace pstrain

#endif  // PSTRAIN_RPC_PS_CONNECTIONS_H_
