#include "rpc/ps_connections.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "glog/logging.h"
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
                             absl::Duration retry_budget, const WireSecurity& wire, int copies,
                             absl::Duration failover_after)
    : addresses_(std::move(addresses)),
      rpc_timeout_(rpc_timeout),
      retry_budget_(retry_budget),
      wire_(wire),
      copies_(std::clamp(copies, 1, std::max<int>(1, addresses_.size()))),
      failover_after_(failover_after),
      routes_(new std::atomic<int>[addresses_.size()]),
      route_epochs_(new std::atomic<int64_t>[addresses_.size()]) {
  for (size_t i = 0; i < addresses_.size(); ++i) {
    routes_[i].store(static_cast<int>(i));
    route_epochs_[i].store(1);
  }
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

bool PsConnections::FailoverSuspect(const grpc::Status& s) const {
  if (copies_ <= 1) return false;
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::CANCELLED:  // hung on a task whose chunks moved (see CallOnce)
      return true;
    case grpc::StatusCode::ABORTED:
      return absl::StrContains(s.error_message(), "fenced");
    default:
      return false;
  }
}

Backoff PsConnections::RetryBackoff() const {
  return copies_ > 1 ? Backoff(absl::Milliseconds(50), absl::Milliseconds(250)) : PsRetryBackoff();
}

bool PsConnections::Reroute(int owner) const {
  if (copies_ <= 1) return false;
  const int before = Serving(owner);
  absl::MutexLock lock(&reroute_mu_);
  // Another thread moved the route while this one waited: take it.
  if (Serving(owner) != before) return true;
  const int64_t known = route_epochs_[owner].load(std::memory_order_acquire);
  const std::vector<int> copies = ReplicaTasks(owner, size(), copies_);
  const size_t n = copies.size();
  std::vector<StatusRequest> requests(n);
  std::vector<StatusResponse> responses(n);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<grpc::Status> results(n);
  absl::Mutex mu;
  size_t pending = n;
  // A copy serves them at a later epoch than the route's, or the route's
  // task still does: either way the answer is in.
  bool settled = false;
  for (size_t k = 0; k < n; ++k) {
    requests[k].set_owner(owner);
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(
        absl::ToChronoTime(absl::Now() + std::min(rpc_timeout_, absl::Seconds(1))));
    Prepare(contexts.back().get());
    stub(copies[k])->async()->Status(
        contexts.back().get(), &requests[k], &responses[k], [&, k](grpc::Status s) {
          absl::MutexLock l(&mu);
          if (s.ok() && responses[k].initialized() &&
              (responses[k].epoch() > known ||
               (copies[k] == before && responses[k].epoch() >= known))) {
            settled = true;
          }
          results[k] = std::move(s);
          --pending;
        });
  }
  {
    // A stopped task answers nothing: do not wait for it once the answer
    // is in.
    absl::MutexLock l(&mu);
    const auto done = [&]() { return pending == 0 || settled; };
    mu.Await(absl::Condition(&done));
    if (pending > 0) {
      for (auto& c : contexts) c->TryCancel();
    }
    const auto all = [&]() { return pending == 0; };
    mu.Await(absl::Condition(&all));
  }
  int best = -1;
  int64_t best_epoch = 0;
  for (size_t k = 0; k < n; ++k) {
    if (!results[k].ok() || !responses[k].initialized()) continue;
    if (responses[k].epoch() > best_epoch) {
      best = copies[k];
      best_epoch = responses[k].epoch();
    }
  }
  if (best < 0 || best == before) return false;
  routes_[owner].store(best, std::memory_order_release);
  route_epochs_[owner].store(best_epoch, std::memory_order_release);
  LOG(WARNING) << "the chunks and rows of ps " << owner << " are served by " << TaskName(best)
               << " (epoch " << best_epoch << "): a failover";
  return true;
}

std::string PsConnections::TaskName(int ps) const {
  return absl::StrCat("ps ", ps, " at ", addresses_[ps]);
}

std::vector<grpc::Status> PsConnections::CallOnce(const std::vector<int>& indices,
                                                  absl::Duration timeout, const Call& call,
                                                  const std::function<int(int)>& owner) const {
  std::vector<grpc::Status> results(indices.size());
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  // A mutex rather than absl::BlockingCounter, whose lock-free decrements
  // the ThreadSanitizer build cannot see (the system's abseil is not
  // instrumented).
  absl::Mutex mu;
  int pending = static_cast<int>(indices.size());
  std::vector<char> finished(indices.size(), 0);
  std::vector<int> sent_to(indices.size(), -1);
  const bool watch = owner != nullptr && copies_ > 1;
  const absl::Time sent = absl::Now();
  for (size_t k = 0; k < indices.size(); ++k) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    Prepare(contexts.back().get());
    if (watch) sent_to[k] = Serving(owner(indices[k]));
    call(indices[k], contexts.back().get(),
         [&results, &mu, &pending, &finished, k](grpc::Status s) {
           absl::MutexLock lock(&mu);
           results[k] = std::move(s);
           finished[k] = 1;
           --pending;
         });
  }
  absl::MutexLock lock(&mu);
  const auto all_in = [&pending]() { return pending == 0; };
  if (!watch) {
    mu.Await(absl::Condition(&all_in));
    return results;
  }
  absl::Time next_check = sent + failover_after_ / 2;
  while (!mu.AwaitWithDeadline(absl::Condition(&all_in), next_check)) {
    next_check = absl::Now() + absl::Seconds(1);
    std::vector<int> owners;  // of the calls still out where the route is, once each
    for (size_t k = 0; k < indices.size(); ++k) {
      const int o = owner(indices[k]);
      if (!finished[k] && Serving(o) == sent_to[k] &&
          std::find(owners.begin(), owners.end(), o) == owners.end()) {
        owners.push_back(o);
      }
    }
    mu.Unlock();
    for (int o : owners) Reroute(o);
    mu.Lock();
    for (size_t k = 0; k < indices.size(); ++k) {
      if (!finished[k] && Serving(owner(indices[k])) != sent_to[k]) contexts[k]->TryCancel();
    }
  }
  return results;
}

absl::Status PsConnections::Broadcast(int n, const char* what,
                                      const std::function<std::string(int)>& target,
                                      const Call& call, std::optional<absl::Duration> budget,
                                      const std::function<int(int)>& owner) const {
  std::vector<int> pending(n);
  for (int i = 0; i < n; ++i) pending[i] = i;
  const absl::Duration retry_budget = budget.value_or(retry_budget_);
  const absl::Time give_up = absl::Now() + retry_budget;
  Backoff backoff = RetryBackoff();
  while (true) {
    std::vector<int> sent_to(pending.size(), -1);
    if (owner != nullptr) {
      for (size_t k = 0; k < pending.size(); ++k) sent_to[k] = Serving(owner(pending[k]));
    }
    const std::vector<grpc::Status> results = CallOnce(pending, rpc_timeout_, call, owner);
    std::vector<int> retry;
    for (size_t k = 0; k < pending.size(); ++k) {
      if (results[k].ok()) continue;
      const bool fits = backoff.FitsBefore(absl::Now(), give_up);
      if (owner != nullptr && FailoverSuspect(results[k])) {
        // Moved since the call went out (another call found where), or ask.
        const int o = owner(pending[k]);
        const bool moved = Serving(o) != sent_to[k] || Reroute(o);
        const grpc::StatusCode code = results[k].error_code();
        // Unreachable, fenced, or a restarted copy before the failover (the
        // copy that serves it now is coming).
        if (fits &&
            (moved || code == grpc::StatusCode::UNAVAILABLE ||
             code == grpc::StatusCode::DEADLINE_EXCEEDED || code == grpc::StatusCode::CANCELLED ||
             code == grpc::StatusCode::ABORTED || code == grpc::StatusCode::FAILED_PRECONDITION)) {
          retry.push_back(pending[k]);
          continue;
        }
      }
      if (Retryable(results[k]) && fits) {
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
      n, "Pull",
      [&](int c) {
        const int at = Serving(chunks[c].ps);
        return at == chunks[c].ps
                   ? absl::StrCat("ps ", at, " (chunk ", c, ")")
                   : absl::StrCat("ps ", at, " (chunk ", c, ", ps ", chunks[c].ps, "'s)");
      },
      [&](int c, grpc::ClientContext* ctx, std::function<void(grpc::Status)> done) {
        stub(Serving(chunks[c].ps))
            ->async()
            ->Pull(ctx, &requests[c], &responses[c], std::move(done));
      },
      std::nullopt, [&](int c) { return chunks[c].ps; }));
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
