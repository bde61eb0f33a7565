#include "worker/ps_client.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/grpc_util.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "grpcpp/create_channel.h"

namespace pstrain {
namespace {

bool Retryable(const grpc::Status& s) { return s.error_code() == grpc::StatusCode::UNAVAILABLE; }

}  // namespace

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(const PsClientOptions& options) {
  if (options.ps_addresses.empty() || options.ps_addresses.size() != options.ranges.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("need one range per ps: ", options.ps_addresses.size(), " addresses, ",
                     options.ranges.size(), " ranges"));
  }
  return std::unique_ptr<PsClient>(new PsClient(options));
}

PsClient::PsClient(const PsClientOptions& options)
    : options_(options),
      params_(options.num_params),
      state_(options.num_state),
      shard_steps_(options.ps_addresses.size(), 0) {
  for (const std::string& address : options_.ps_addresses) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    // Retry quickly while a ps is starting: the default backoff grows to 2 min.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    stubs_.push_back(ParameterServer::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args)));
  }
}

template <typename CallFn>
absl::Status PsClient::ForEachPs(const char* what, CallFn call) {
  const int n = static_cast<int>(stubs_.size());
  std::vector<int> pending(n);
  for (int i = 0; i < n; ++i) pending[i] = i;
  const absl::Time give_up = absl::Now() + options_.retry_budget;
  absl::Duration backoff = absl::Milliseconds(50);
  while (true) {
    std::vector<grpc::Status> results(pending.size());
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
    absl::BlockingCounter counter(static_cast<int>(pending.size()));
    for (size_t k = 0; k < pending.size(); ++k) {
      contexts.push_back(std::make_unique<grpc::ClientContext>());
      contexts.back()->set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
      call(pending[k], contexts.back().get(), [&results, &counter, k](grpc::Status s) {
        results[k] = std::move(s);
        counter.DecrementCount();
      });
    }
    counter.Wait();
    std::vector<int> retry;
    for (size_t k = 0; k < pending.size(); ++k) {
      if (results[k].ok()) continue;
      const int ps = pending[k];
      if (Retryable(results[k]) && absl::Now() + backoff < give_up) {
        retry.push_back(ps);
        continue;
      }
      return absl::Status(
          static_cast<absl::StatusCode>(results[k].error_code()),
          absl::StrCat(what, " to ps ", ps, " at ", options_.ps_addresses[ps],
                       " failed: ", results[k].error_message(),
                       Retryable(results[k])
                           ? absl::StrCat(" (gave up after retrying for ",
                                          absl::FormatDuration(options_.retry_budget),
                                          "; is the ps running?)")
                           : ""));
    }
    if (retry.empty()) return absl::OkStatus();
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(2));
    pending = std::move(retry);
  }
}

absl::Status PsClient::WaitForPs(absl::Duration timeout, bool initialized) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Time next_log = absl::Now() + absl::Seconds(5);
  const int n = static_cast<int>(stubs_.size());
  while (true) {
    std::vector<StatusResponse> responses(n);
    std::vector<grpc::Status> results(n);
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
    absl::BlockingCounter counter(n);
    for (int i = 0; i < n; ++i) {
      contexts.push_back(std::make_unique<grpc::ClientContext>());
      contexts.back()->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
      static const StatusRequest kRequest;
      stubs_[i]->async()->Status(contexts.back().get(), &kRequest, &responses[i],
                                 [&results, &counter, i](grpc::Status s) {
                                   results[i] = std::move(s);
                                   counter.DecrementCount();
                                 });
    }
    counter.Wait();
    std::vector<std::string> missing;
    for (int i = 0; i < n; ++i) {
      if (!results[i].ok()) {
        missing.push_back(absl::StrCat("ps ", i, " at ", options_.ps_addresses[i], " (",
                                       results[i].error_message(), ")"));
      } else if (responses[i].shard() != i) {
        return absl::FailedPreconditionError(
            absl::StrCat("the ps at ", options_.ps_addresses[i], " is task ", responses[i].shard(),
                         ", expected task ", i, "; check the order of the cluster's ps addresses"));
      } else if (initialized && !responses[i].initialized()) {
        missing.push_back(absl::StrCat("ps ", i, " (not initialized yet)"));
      }
    }
    if (missing.empty()) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("gave up waiting ", absl::FormatDuration(timeout),
                       " for the parameter servers: ", absl::StrJoin(missing, "; ")));
    }
    if (absl::Now() >= next_log) {
      LOG(INFO) << "waiting for " << absl::StrJoin(missing, "; ");
      next_log = absl::Now() + absl::Seconds(10);
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

absl::StatusOr<std::vector<StatusResponse>> PsClient::StatusAll() {
  std::vector<StatusResponse> responses(stubs_.size());
  static const StatusRequest kRequest;
  PSTRAIN_RETURN_IF_ERROR(ForEachPs("Status", [&](int i, grpc::ClientContext* ctx, auto done) {
    stubs_[i]->async()->Status(ctx, &kRequest, &responses[i], std::move(done));
  }));
  return responses;
}

absl::Status PsClient::InitializeAll(const std::string& model, const float* params,
                                     const float* state, int64_t global_step) {
  const int n = static_cast<int>(stubs_.size());
  std::vector<InitializeRequest> requests(n);
  std::vector<InitializeResponse> responses(n);
  for (int i = 0; i < n; ++i) {
    const auto [begin, end] = options_.ranges[i];
    requests[i].set_shard(i);
    requests[i].set_model(model);
    requests[i].set_num_params(options_.num_params);
    requests[i].set_params(reinterpret_cast<const char*>(params + begin),
                           (end - begin) * sizeof(float));
    if (i == 0 && options_.num_state > 0) {
      requests[i].set_state(reinterpret_cast<const char*>(state),
                            options_.num_state * sizeof(float));
    }
    requests[i].set_global_step(global_step);
  }
  return ForEachPs("Initialize", [&](int i, grpc::ClientContext* ctx, auto done) {
    stubs_[i]->async()->Initialize(ctx, &requests[i], &responses[i], std::move(done));
  });
}

absl::Status PsClient::ShutdownAll(const std::string& reason) {
  const int n = static_cast<int>(stubs_.size());
  std::vector<ShutdownRequest> requests(n);
  std::vector<ShutdownResponse> responses(n);
  for (auto& r : requests) r.set_reason(reason);
  return ForEachPs("Shutdown", [&](int i, grpc::ClientContext* ctx, auto done) {
    stubs_[i]->async()->Shutdown(ctx, &requests[i], &responses[i], std::move(done));
  });
}

absl::StatusOr<ParameterView> PsClient::Pull() {
  if (!have_fresh_) {
    const int n = static_cast<int>(stubs_.size());
    std::vector<PullRequest> requests(n);
    std::vector<PullResponse> responses(n);
    for (int i = 0; i < n; ++i) requests[i].set_shard(i);
    PSTRAIN_RETURN_IF_ERROR(ForEachPs("Pull", [&](int i, grpc::ClientContext* ctx, auto done) {
      stubs_[i]->async()->Pull(ctx, &requests[i], &responses[i], std::move(done));
    }));
    job_done_ = false;
    for (int i = 0; i < n; ++i) {
      const auto [begin, end] = options_.ranges[i];
      const PullResponse& r = responses[i];
      if (r.params().size() != static_cast<size_t>(end - begin) * sizeof(float) ||
          r.state().size() != (i == 0 ? options_.num_state * sizeof(float) : 0)) {
        return absl::DataLossError(absl::StrCat("ps ", i, " sent ", r.params().size(),
                                                " parameter bytes, expected ",
                                                (end - begin) * sizeof(float)));
      }
      std::memcpy(params_.data() + begin, r.params().data(), r.params().size());
      if (!r.state().empty()) std::memcpy(state_.data(), r.state().data(), r.state().size());
      shard_steps_[i] = r.global_step();
      job_done_ = job_done_ || r.job_done();
      bytes_received_ += static_cast<int64_t>(r.params().size() + r.state().size());
    }
  }
  have_fresh_ = false;
  ParameterView view;
  view.params = params_.data();
  view.state = state_.data();
  view.global_step = shard_steps_[0];
  view.job_done = job_done_;
  return view;
}

absl::StatusOr<PushOutcome> PsClient::Push(int64_t, const float* grads, const float* batch_stats) {
  const int n = static_cast<int>(stubs_.size());
  std::vector<PushRequest> requests(n);
  std::vector<PushPullResponse> responses(n);
  for (int i = 0; i < n; ++i) {
    const auto [begin, end] = options_.ranges[i];
    PushRequest& r = requests[i];
    r.set_shard(i);
    r.set_replica(options_.replica);
    r.set_step(shard_steps_[i]);
    r.set_gradients(reinterpret_cast<const char*>(grads + begin), (end - begin) * sizeof(float));
    if (i == 0 && options_.num_state > 0) {
      r.set_batch_stats(reinterpret_cast<const char*>(batch_stats),
                        options_.num_state * sizeof(float));
    }
    bytes_sent_ += static_cast<int64_t>(r.gradients().size() + r.batch_stats().size());
  }
  const absl::Time start = absl::Now();
  PSTRAIN_RETURN_IF_ERROR(ForEachPs("PushPull", [&](int i, grpc::ClientContext* ctx, auto done) {
    stubs_[i]->async()->PushPull(ctx, &requests[i], &responses[i], std::move(done));
  }));
  push_pull_millis_.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
  PushOutcome outcome;
  for (int i = 0; i < n; ++i) {
    const auto [begin, end] = options_.ranges[i];
    const PushPullResponse& r = responses[i];
    if (r.params().size() != static_cast<size_t>(end - begin) * sizeof(float) ||
        r.state().size() != (i == 0 ? options_.num_state * sizeof(float) : 0)) {
      return absl::DataLossError(absl::StrCat("ps ", i, " answered a push with ", r.params().size(),
                                              " parameter bytes, expected ",
                                              (end - begin) * sizeof(float)));
    }
    std::memcpy(params_.data() + begin, r.params().data(), r.params().size());
    if (!r.state().empty()) std::memcpy(state_.data(), r.state().data(), r.state().size());
    shard_steps_[i] = r.global_step();
    outcome.stale = outcome.stale || r.stale();
    outcome.job_done = outcome.job_done || r.job_done();
    bytes_received_ += static_cast<int64_t>(r.params().size() + r.state().size());
  }
  outcome.global_step = shard_steps_[0];
  job_done_ = outcome.job_done;
  have_fresh_ = true;
  return outcome;
}

std::string PsClient::LatencySummary() const {
  if (push_pull_millis_.empty()) return "no steps";
  std::vector<double> v = push_pull_millis_;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))]; };
  return absl::StrFormat("p50 %.1f ms, p90 %.1f ms, p99 %.1f ms over %d steps", at(0.5), at(0.9),
                         at(0.99), v.size());
}

}  // namespace pstrain
