#ifndef PSTRAIN_RPC_PS_CLIENT_INTERNAL_H_
#define PSTRAIN_RPC_PS_CLIENT_INTERNAL_H_

// Internal to ps_client*.cc: one chunk's call, which ps_client.cc makes and
// cancels with the client and ps_client_push.cc sends and retries.

#include <cstdint>
#include <memory>

#include "absl/time/time.h"
#include "common/backoff.h"
#include "rpc/ps_client.h"

namespace pstrain {

// One chunk's PushPull of the current step.
struct PsClient::ChunkCall {
  PushRequest request;
  PushPullResponse response;
  std::unique_ptr<grpc::ClientContext> context;
  Backoff backoff = PsRetryBackoff();
  // A replicated job: the last attempt failed in a way a failover explains;
  // the retry asks where the chunk is served first.
  bool reroute = false;
  grpc::Status failure;
  bool warned = false;     // its failure was logged (once until it gets through)
  bool built = false;      // the request holds this push's gradients (a retry resends them)
  int64_t sent_us = 0;     // when the call started (tracing)
  absl::Time sent_at;      // the same, for a replicated job's check on calls that hang
  absl::Time checked_at;   // when that check last asked where the chunk is served
  absl::Time reported_at;  // when that check last logged the call as unanswered
  int sent_to = -1;        // the task the call went to
  int64_t sent_step = -1;  // the trace's step then: the answer is that step's
};

}  // namespace pstrain

#endif  // PSTRAIN_RPC_PS_CLIENT_INTERNAL_H_
