#ifndef PSTRAIN_WORKER_PS_CLIENT_H_
#define PSTRAIN_WORKER_PS_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/parameter_server.grpc.pb.h"
#include "worker/parameter_client.h"

namespace pstrain {

struct PsClientOptions {
  std::vector<std::string> ps_addresses;            // ps task i at [i]
  std::vector<std::pair<int64_t, int64_t>> ranges;  // ps task i's [begin, end)
  int64_t num_params = 0;
  int64_t num_state = 0;  // Held by ps 0.
  int replica = 0;        // This trainer's replica id; -1 for a non-training client.
  absl::Duration rpc_timeout = absl::Seconds(60);  // Deadline of every call.
  // How long UNAVAILABLE calls are retried (with backoff) before giving up:
  // covers ps that are still starting or restarting.
  absl::Duration retry_budget = absl::Seconds(60);
};

// The parameters on the parameter servers, over gRPC. Every step is one
// PushPull round trip to every ps, issued in parallel; each ps answers with
// its slice after the update, so the next Pull needs no call. Every call has
// a deadline; UNAVAILABLE is retried with exponential backoff within the
// retry budget (a retried push counts once on the ps). Not thread-safe.
class PsClient : public ParameterClient {
 public:
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(const PsClientOptions& options);

  // Waits until every ps answers Status (and, if `initialized`, has been
  // initialized), up to `timeout`, logging who is still missing now and then.
  absl::Status WaitForPs(absl::Duration timeout, bool initialized);

  // Status of every ps, in task order.
  absl::StatusOr<std::vector<StatusResponse>> StatusAll();

  // Sends each ps its slice of `params` (num_params) and ps 0 the `state`.
  absl::Status InitializeAll(const std::string& model, const float* params, const float* state,
                             int64_t global_step);

  // Tells every ps the job is over; best effort, returns the first error.
  absl::Status ShutdownAll(const std::string& reason);

  absl::StatusOr<ParameterView> Pull() override;
  absl::StatusOr<PushOutcome> Push(int64_t step, const float* grads,
                                   const float* batch_stats) override;

  // Bytes sent and received in parameter and gradient payloads so far.
  int64_t bytes_sent() const { return bytes_sent_; }
  int64_t bytes_received() const { return bytes_received_; }
  // Round-trip times of the PushPull steps so far, in milliseconds.
  const std::vector<double>& push_pull_millis() const { return push_pull_millis_; }
  // "p50 X ms, p90 Y ms, p99 Z ms" over push_pull_millis().
  std::string LatencySummary() const;

 private:
  explicit PsClient(const PsClientOptions& options);

  // Runs call(i) for every ps i in `which` in parallel, each an async unary
  // call completing via the callback it is given; retries UNAVAILABLE.
  template <typename CallFn>
  absl::Status ForEachPs(const char* what, CallFn call);

  const PsClientOptions options_;
  std::vector<std::unique_ptr<ParameterServer::Stub>> stubs_;
  std::vector<float> params_;
  std::vector<float> state_;
  std::vector<int64_t> shard_steps_;  // Each ps's step at the last pull.
  bool have_fresh_ = false;           // params_ hold the last PushPull's answer.
  bool job_done_ = false;
  int64_t bytes_sent_ = 0;
  int64_t bytes_received_ = 0;
  std::vector<double> push_pull_millis_;
};

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_PS_CLIENT_H_
