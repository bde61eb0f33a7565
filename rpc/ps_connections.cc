#include "rpc/ps_connections.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "grpcpp/create_channel.h"
#include "rpc/grpc_util.h"

namespace pstrain {

bool Retryable(const grpc::Status& s) { return s.error_code() == grpc::StatusCode::UNAVAILABLE; }

absl::Status CallError(const char* what, const std::string& target, const grpc::Status& s,
                       absl::Duration budget) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(what, " to ", target, " failed: ", s.error_message(),
                                   Retryable(s) ? absl::StrCat(" (gave up after retrying for ",
                                                               absl::FormatDuration(budget),
                                                               "; is the ps running?)")
                                                : ""));
}

PsConnections::PsConnections(std::vector<std::string> addresses, absl::Duration rpc_timeout,
                             absl::Duration retry_budget, const WireSecurity& wire)
    : addresses_(std::move(addresses)),
      rpc_timeout_(rpc_timeout),
      retry_budget_(retry_budget),
      wire_(wire) {
  for (size_t i = 0; i < addresses_.size(); ++i) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    // Retry quickly while a ps is starting: the default backoff grows to 2 min.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    std::shared_ptr<grpc::ChannelCredentials> credentials =
        ChannelCredentialsFor(wire_, TaskCredentialName("ps", static_cast<int>(i)), &args);
    stubs_.push_back(
        ParameterServer::NewStub(grpc::CreateCustomChannel(addresses_[i], credentials, args)));
  }
}

std::string PsConnections::TaskName(int ps) const {
  return absl::StrCat("ps ", ps, " at ", addresses_[ps]);
}

std::vector<grpc::Status> PsConnections::CallOnce(const std::vector<int>& indices,
                                                  absl::Duration timeout, const Call& call) const {
  std::vector<grpc::Status> results(indices.size());
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  // A mutex rather than absl::BlockingCounter, whose lock-free decrements
  // the ThreadSanitizer build cannot see (the system's abseil is not
  // instrumented).
  absl::Mutex mu;
  int pending = static_cast<int>(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    Prepare(contexts.back().get());
    call(indices[k], contexts.back().get(), [&results, &mu, &pending, k](grpc::Status s) {
      absl::MutexLock lock(&mu);
      results[k] = std::move(s);
      --pending;
    });
  }
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(
      +[](int* left) { return *left == 0; }, &pending));
  return results;
}

absl::Status PsConnections::Broadcast(int n, const char* what,
                                      const std::function<std::string(int)>& target,
                                      const Call& call,
                                      std::optional<absl::Duration> budget) const {
  std::vector<int> pending(n);
  for (int i = 0; i < n; ++i) pending[i] = i;
  const absl::Duration retry_budget = budget.value_or(retry_budget_);
  const absl::Time give_up = absl::Now() + retry_budget;
  Backoff backoff = PsRetryBackoff();
  while (true) {
    const std::vector<grpc::Status> results = CallOnce(pending, rpc_timeout_, call);
    std::vector<int> retry;
    for (size_t k = 0; k < pending.size(); ++k) {
      if (results[k].ok()) continue;
      if (Retryable(results[k]) && backoff.FitsBefore(absl::Now(), give_up)) {
        retry.push_back(pending[k]);
        continue;
      }
      return CallError(what, target(pending[k]), results[k], retry_budget);
    }
    if (retry.empty()) return absl::OkStatus();
    absl::SleepFor(backoff.Next());
    pending = std::move(retry);
  }
}

absl::StatusOr<int64_t> PsConnections::PullChunks(
    const ShardLayout& layout, float* params, float* state, std::vector<int64_t>* chunk_steps,
    bool* job_done, std::vector<int64_t>* chunk_generations, std::vector<char>* chunk_done,
    std::optional<int64_t> at_step, int replica) const {
  const auto& chunks = layout.chunks;
  const int n = static_cast<int>(chunks.size());
  std::vector<PullRequest> requests(n);
  std::vector<PullResponse> responses(n);
  for (int c = 0; c < n; ++c) {
    requests[c].set_chunk(c);
    if (at_step.has_value()) {
      requests[c].set_at_step(*at_step);
      requests[c].set_replica(replica);
    }
  }
  PSTRAIN_RETURN_IF_ERROR(Broadcast(
      n, "Pull", [&](int c) { return absl::StrCat("ps ", chunks[c].ps, " (chunk ", c, ")"); },
      [&](int c, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) {
        stub(chunks[c].ps)->async()->Pull(ctx, &requests[c], &responses[c], std::move(done));
      }));
  *job_done = false;
  int64_t bytes = 0;
  chunk_steps->resize(n);
  if (chunk_generations != nullptr) chunk_generations->resize(n);
  if (chunk_done != nullptr) chunk_done->resize(n);
  for (int c = 0; c < n; ++c) {
    const PullResponse& r = responses[c];
    const size_t want = (chunks[c].end - chunks[c].begin) * sizeof(float);
    if (r.params().size() != want || r.state().size() != chunks[c].state * sizeof(float)) {
      return absl::DataLossError(absl::StrCat("ps ", chunks[c].ps, " sent ", r.params().size(),
                                              " bytes for chunk ", c, ", expected ", want));
    }
    std::memcpy(params + chunks[c].begin, r.params().data(), want);
    if (!r.state().empty()) std::memcpy(state, r.state().data(), r.state().size());
    (*chunk_steps)[c] = r.global_step();
    if (chunk_generations != nullptr) (*chunk_generations)[c] = r.generation();
    *job_done = *job_done || r.job_done();
    if (chunk_done != nullptr) (*chunk_done)[c] = r.job_done();
    bytes += static_cast<int64_t>(want + r.state().size());
  }
  return bytes;
}

}  // namespace pstrain
