#ifndef PSTRAIN_RPC_PS_CONNECTIONS_H_
#define PSTRAIN_RPC_PS_CONNECTIONS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
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
  PsConnections(std::vector<std::string> addresses, absl::Duration rpc_timeout,
                absl::Duration retry_budget, const WireSecurity& wire = WireSecurity());

  int size() const { return static_cast<int>(stubs_.size()); }
  ParameterServer::Stub* stub(int ps) const { return stubs_[ps].get(); }
  const std::string& address(int ps) const { return addresses_[ps]; }
  absl::Duration rpc_timeout() const { return rpc_timeout_; }
  absl::Duration retry_budget() const { return retry_budget_; }
  // "ps 1 at host:port", for messages.
  std::string TaskName(int ps) const;
  // Puts what every call carries (the job token) on `context`.
  void Prepare(grpc::ClientContext* context) const { AttachJobToken(wire_, context); }

  // Starts call number i on `context`; `done` gets its status.
  using Call = std::function<void(int i, grpc::ClientContext* context,
                                  std::function<void(grpc::Status)> done)>;

  // Runs call(i) for every i in `indices` in parallel, each with a deadline
  // `timeout` from now, and waits for all; the statuses in `indices` order.
  std::vector<grpc::Status> CallOnce(const std::vector<int>& indices, absl::Duration timeout,
                                     const Call& call) const;

  // Runs call(i) for every i in [0, n) in parallel and waits; retries the
  // UNAVAILABLE ones with exponential backoff within `budget` (the retry
  // budget if unset). The first other failure, or an UNAVAILABLE one past the
  // budget, is the error, named by `what` and `target(i)`.
  absl::Status Broadcast(int n, const char* what, const std::function<std::string(int)>& target,
                         const Call& call,
                         std::optional<absl::Duration> budget = std::nullopt) const;

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
  std::vector<std::unique_ptr<ParameterServer::Stub>> stubs_;
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
