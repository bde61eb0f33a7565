#include "worker/ps_client.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/bf16.h"
#include "common/grpc_util.h"
#include "common/status_macros.h"
#include "common/termination.h"
#include "glog/logging.h"
#include "grpcpp/create_channel.h"

namespace pstrain {
namespace {

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

}  // namespace

// One chunk's PushPull of the current step.
struct PsClient::ChunkCall {
  PushRequest request;
  PushPullResponse response;
  std::unique_ptr<grpc::ClientContext> context;
  absl::Duration backoff = absl::Milliseconds(50);
};

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(const PsClientOptions& options) {
  if (options.ps_addresses.empty() || options.ps_addresses.size() != options.layout.ranges.size() ||
      options.layout.chunks.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the layout has ", options.layout.ranges.size(),
                                                   " ps ranges for ", options.ps_addresses.size(),
                                                   " ps addresses"));
  }
  return std::unique_ptr<PsClient>(new PsClient(options));
}

PsClient::PsClient(const PsClientOptions& options)
    : options_(options), params_(options.layout.num_params), state_(options.layout.num_state) {
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
  const size_t n = options_.layout.chunks.size();
  for (size_t c = 0; c < n; ++c) calls_.push_back(std::make_unique<ChunkCall>());
  absl::MutexLock lock(&mu_);
  sent_.assign(n, false);
  chunk_steps_.assign(n, 0);
  if (options_.replica >= 0) sender_ = std::thread([this] { SenderLoop(); });
}

PsClient::~PsClient() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // In-flight calls reference this client: cancel them and wait.
    pending_ -= static_cast<int>(queue_.size());  // Never to be sent.
    queue_.clear();
    for (auto& call : calls_) {
      if (call->context) call->context->TryCancel();
    }
    cv_.SignalAll();
    mu_.Await(absl::Condition(
        +[](int* pending) { return *pending == 0; }, &pending_));
  }
  if (sender_.joinable()) sender_.join();
}

template <typename CallFn, typename TargetFn>
absl::Status PsClient::CallAll(int n, const char* what, TargetFn target, CallFn call,
                               std::optional<absl::Duration> budget) {
  std::vector<int> pending(n);
  for (int i = 0; i < n; ++i) pending[i] = i;
  const absl::Duration retry_budget = budget.value_or(options_.retry_budget);
  const absl::Time give_up = absl::Now() + retry_budget;
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
      if (Retryable(results[k]) && absl::Now() + backoff < give_up) {
        retry.push_back(pending[k]);
        continue;
      }
      return CallError(what, target(pending[k]), results[k], retry_budget);
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
  static const StatusRequest kRequest;
  while (true) {
    std::vector<StatusResponse> responses(n);
    std::vector<grpc::Status> results(n);
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
    absl::BlockingCounter counter(n);
    for (int i = 0; i < n; ++i) {
      contexts.push_back(std::make_unique<grpc::ClientContext>());
      contexts.back()->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
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
    if (TerminationNotice::WaitFor(absl::Milliseconds(200))) {
      return absl::CancelledError("stop requested while waiting for the parameter servers");
    }
  }
}

absl::StatusOr<std::vector<StatusResponse>> PsClient::StatusAll() {
  const int n = static_cast<int>(stubs_.size());
  std::vector<StatusResponse> responses(n);
  static const StatusRequest kRequest;
  PSTRAIN_RETURN_IF_ERROR(CallAll(
      n, "Status", [&](int i) { return absl::StrCat("ps ", i, " at ", options_.ps_addresses[i]); },
      [&](int i, grpc::ClientContext* ctx, auto done) {
        stubs_[i]->async()->Status(ctx, &kRequest, &responses[i], std::move(done));
      }));
  return responses;
}

absl::Status PsClient::InitializeAll(const std::string& model, const float* params,
                                     const float* state, int64_t global_step) {
  const auto& chunks = options_.layout.chunks;
  const int n = static_cast<int>(chunks.size());
  std::vector<InitializeRequest> requests(n);
  std::vector<InitializeResponse> responses(n);
  for (int c = 0; c < n; ++c) {
    requests[c].set_shard(c);
    requests[c].set_model(model);
    requests[c].set_num_params(options_.layout.num_params);
    requests[c].set_params(reinterpret_cast<const char*>(params + chunks[c].begin),
                           (chunks[c].end - chunks[c].begin) * sizeof(float));
    if (chunks[c].state > 0) {
      requests[c].set_state(reinterpret_cast<const char*>(state), chunks[c].state * sizeof(float));
    }
    requests[c].set_global_step(global_step);
  }
  return CallAll(
      n, "Initialize", [&](int c) { return absl::StrCat("ps ", chunks[c].ps, " (shard ", c, ")"); },
      [&](int c, grpc::ClientContext* ctx, auto done) {
        stubs_[chunks[c].ps]->async()->Initialize(ctx, &requests[c], &responses[c],
                                                  std::move(done));
      });
}

absl::Status PsClient::ShutdownAll(const std::string& reason) {
  const int n = static_cast<int>(stubs_.size());
  std::vector<ShutdownRequest> requests(n);
  std::vector<ShutdownResponse> responses(n);
  for (auto& r : requests) r.set_reason(reason);
  return CallAll(
      n, "Shutdown",
      [&](int i) { return absl::StrCat("ps ", i, " at ", options_.ps_addresses[i]); },
      [&](int i, grpc::ClientContext* ctx, auto done) {
        stubs_[i]->async()->Shutdown(ctx, &requests[i], &responses[i], std::move(done));
      });
}

absl::StatusOr<std::vector<SaveResponse>> PsClient::SaveAll(const std::string& prefix, int64_t step,
                                                            int64_t global_step,
                                                            absl::Duration wait) {
  const int n = static_cast<int>(stubs_.size());
  std::vector<SaveRequest> requests(n);
  std::vector<SaveResponse> responses(n);
  for (auto& r : requests) {
    r.set_prefix(prefix);
    r.set_step(step);
    r.set_global_step(global_step);
    r.set_wait_ms(absl::ToInt64Milliseconds(wait));
  }
  PSTRAIN_RETURN_IF_ERROR(CallAll(
      n, "Save", [&](int i) { return absl::StrCat("ps ", i, " at ", options_.ps_addresses[i]); },
      [&](int i, grpc::ClientContext* ctx, auto done) {
        stubs_[i]->async()->Save(ctx, &requests[i], &responses[i], std::move(done));
      }));
  return responses;
}

absl::StatusOr<int64_t> PsClient::RestoreAll(const std::string& model,
                                             const std::string& index_path) {
  const int n = static_cast<int>(stubs_.size());
  std::vector<RestoreRequest> requests(n);
  std::vector<RestoreResponse> responses(n);
  for (auto& r : requests) {
    r.set_index_path(index_path);
    r.set_model(model);
    r.set_num_params(options_.layout.num_params);
  }
  PSTRAIN_RETURN_IF_ERROR(CallAll(
      n, "Restore", [&](int i) { return absl::StrCat("ps ", i, " at ", options_.ps_addresses[i]); },
      [&](int i, grpc::ClientContext* ctx, auto done) {
        stubs_[i]->async()->Restore(ctx, &requests[i], &responses[i], std::move(done));
      }));
  return responses[0].global_step();
}

absl::Status PsClient::LeaveAll(int replica, const std::string& reason,
                                absl::Duration retry_budget) {
  const int n = static_cast<int>(stubs_.size());
  std::vector<LeaveRequest> requests(n);
  std::vector<LeaveResponse> responses(n);
  for (auto& r : requests) {
    r.set_replica(replica);
    r.set_reason(reason);
  }
  return CallAll(
      n, "Leave", [&](int i) { return absl::StrCat("ps ", i, " at ", options_.ps_addresses[i]); },
      [&](int i, grpc::ClientContext* ctx, auto done) {
        stubs_[i]->async()->Leave(ctx, &requests[i], &responses[i], std::move(done));
      },
      retry_budget);
}

absl::StatusOr<ParameterView> PsClient::Pull() {
  const auto& chunks = options_.layout.chunks;
  if (!have_fresh_) {
    const int n = static_cast<int>(chunks.size());
    std::vector<PullRequest> requests(n);
    std::vector<PullResponse> responses(n);
    for (int c = 0; c < n; ++c) requests[c].set_shard(c);
    PSTRAIN_RETURN_IF_ERROR(CallAll(
        n, "Pull", [&](int c) { return absl::StrCat("ps ", chunks[c].ps, " (shard ", c, ")"); },
        [&](int c, grpc::ClientContext* ctx, auto done) {
          stubs_[chunks[c].ps]->async()->Pull(ctx, &requests[c], &responses[c], std::move(done));
        }));
    absl::MutexLock lock(&mu_);
    job_done_ = false;
    for (int c = 0; c < n; ++c) {
      const PullResponse& r = responses[c];
      const size_t want = (chunks[c].end - chunks[c].begin) * sizeof(float);
      if (r.params().size() != want || r.state().size() != chunks[c].state * sizeof(float)) {
        return absl::DataLossError(absl::StrCat("ps ", chunks[c].ps, " sent ", r.params().size(),
                                                " bytes for shard ", c, ", expected ", want));
      }
      std::memcpy(params_.data() + chunks[c].begin, r.params().data(), want);
      if (!r.state().empty()) std::memcpy(state_.data(), r.state().data(), r.state().size());
      chunk_steps_[c] = r.global_step();
      job_done_ = job_done_ || r.job_done();
      bytes_received_ += static_cast<int64_t>(want + r.state().size());
    }
  }
  have_fresh_ = false;
  absl::MutexLock lock(&mu_);
  ParameterView view;
  view.params = params_.data();
  view.state = state_.data();
  view.global_step = chunk_steps_[0];
  view.job_done = job_done_;
  return view;
}

void PsClient::StartPush(int64_t, const float* grads, const float* batch_stats) {
  absl::MutexLock lock(&mu_);
  CHECK_EQ(pending_, 0) << "StartPush while a push is in flight";
  grads_ = grads;
  batch_stats_ = batch_stats;
  std::fill(sent_.begin(), sent_.end(), false);
  stale_ = false;
  job_done_ = false;
  error_ = absl::OkStatus();
  step_give_up_ = absl::InfinitePast();
}

void PsClient::EnqueueLocked(int chunk) {
  sent_[chunk] = true;
  ++pending_;
  queue_.emplace_back(chunk, absl::InfinitePast());
  cv_.Signal();
}

void PsClient::GradientsReady(int64_t from) {
  absl::MutexLock lock(&mu_);
  if (grads_ == nullptr) return;
  const auto& chunks = options_.layout.chunks;
  // Chunks are in flat order and the backward pass finishes a suffix of the
  // vector at a time: send the newly finished ones, last first.
  for (int c = static_cast<int>(chunks.size()) - 1; c >= 0 && chunks[c].begin >= from; --c) {
    if (!sent_[c]) EnqueueLocked(c);
  }
}

void PsClient::SenderLoop() {
  while (true) {
    int chunk;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_) {
        if (queue_.empty()) {
          cv_.Wait(&mu_);
          continue;
        }
        // The first item that is due; otherwise wait for the earliest.
        auto due = std::min_element(queue_.begin(), queue_.end(), [](const auto& a, const auto& b) {
          return a.second < b.second;
        });
        if (due->second <= absl::Now()) {
          chunk = due->first;
          queue_.erase(due);
          break;
        }
        cv_.WaitWithDeadline(&mu_, due->second);
      }
      if (stopping_) return;
    }
    SendChunk(chunk);
  }
}

void PsClient::ReportProgress(double loss, int64_t examples) {
  absl::MutexLock lock(&mu_);
  loss_sum_ += loss;
  ++loss_batches_;
  examples_ += examples;
}

void PsClient::SendChunk(int c) {
  const Chunk& chunk = options_.layout.chunks[c];
  ChunkCall& call = *calls_[c];
  const float* grads;
  const float* stats;
  int64_t step;
  PushRequest& r = call.request;
  {
    absl::MutexLock lock(&mu_);
    grads = grads_;
    stats = batch_stats_;
    step = chunk_steps_[c];
    // Progress rides on chunk 0's push (once: a retry does not repeat it).
    r.set_loss_sum(c == 0 ? loss_sum_ : 0);
    r.set_loss_batches(c == 0 ? loss_batches_ : 0);
    r.set_examples(c == 0 ? examples_ : 0);
    if (c == 0) {
      loss_sum_ = 0;
      loss_batches_ = 0;
      examples_ = 0;
    }
  }
  r.set_shard(c);
  r.set_replica(options_.replica);
  r.set_step(step);
  const int64_t n = chunk.end - chunk.begin;
  if (options_.bf16) {
    r.set_dtype(BFLOAT16);
    r.mutable_gradients()->resize(n * sizeof(uint16_t));
    FloatsToBf16(grads + chunk.begin, n,
                 reinterpret_cast<uint16_t*>(r.mutable_gradients()->data()));
  } else {
    r.set_gradients(reinterpret_cast<const char*>(grads + chunk.begin), n * sizeof(float));
  }
  if (chunk.state > 0) {
    r.set_batch_stats(reinterpret_cast<const char*>(stats), chunk.state * sizeof(float));
  } else {
    r.clear_batch_stats();
  }
  call.response.Clear();
  {
    // The destructor cancels in-flight contexts under mu_: install it there,
    // and do not start a call once the client is stopping.
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      --pending_;
      return;
    }
    call.context = std::make_unique<grpc::ClientContext>();
    call.context->set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  }
  stubs_[chunk.ps]->async()->PushPull(call.context.get(), &call.request, &call.response,
                                      [this, c](grpc::Status s) { OnChunkDone(c, std::move(s)); });
}

void PsClient::OnChunkDone(int c, grpc::Status status) {
  const Chunk& chunk = options_.layout.chunks[c];
  ChunkCall& call = *calls_[c];
  const PushPullResponse& r = call.response;
  const int64_t n = chunk.end - chunk.begin;
  const size_t want = n * (options_.bf16 ? sizeof(uint16_t) : sizeof(float));
  if (status.ok() && (r.params().size() != want || r.dtype() != call.request.dtype() ||
                      r.state().size() != chunk.state * sizeof(float))) {
    status =
        grpc::Status(grpc::StatusCode::DATA_LOSS,
                     absl::StrCat("answer with ", r.params().size(), " bytes, expected ", want));
  }
  if (status.ok()) {
    // Disjoint from what the compute thread reads: see the class comment.
    if (options_.bf16) {
      Bf16ToFloats(reinterpret_cast<const uint16_t*>(r.params().data()), n,
                   params_.data() + chunk.begin);
    } else {
      std::memcpy(params_.data() + chunk.begin, r.params().data(), want);
    }
    if (!r.state().empty()) std::memcpy(state_.data(), r.state().data(), r.state().size());
  }
  absl::MutexLock lock(&mu_);
  if (!status.ok() && Retryable(status) && !stopping_) {
    if (step_give_up_ == absl::InfinitePast()) {
      step_give_up_ = absl::Now() + options_.retry_budget;
    }
    if (absl::Now() + call.backoff < step_give_up_) {
      // Retry from the sender thread after a pause; the ps counts a retried
      // (replica, step) once.
      queue_.emplace_back(c, absl::Now() + call.backoff);
      call.backoff = std::min(call.backoff * 2, absl::Seconds(2));
      cv_.Signal();
      return;
    }
  }
  if (status.ok()) {
    call.backoff = absl::Milliseconds(50);
    chunk_steps_[c] = r.global_step();
    stale_ = stale_ || r.stale();
    job_done_ = job_done_ || r.job_done();
    bytes_sent_ +=
        static_cast<int64_t>(call.request.gradients().size() + call.request.batch_stats().size());
    bytes_received_ += static_cast<int64_t>(want + r.state().size());
  } else if (error_.ok()) {
    error_ = CallError(
        "PushPull",
        absl::StrCat("ps ", chunk.ps, " at ", options_.ps_addresses[chunk.ps], " (shard ", c, ")"),
        status, options_.retry_budget);
  }
  --pending_;
}

absl::StatusOr<PushOutcome> PsClient::Push(int64_t step, const float* grads,
                                           const float* batch_stats) {
  CHECK_GE(options_.replica, 0) << "this client does not train";
  const absl::Time start = absl::Now();
  PushOutcome outcome;
  bool started;
  {
    absl::MutexLock lock(&mu_);
    started = grads_ == grads;
  }
  // Without StartPush for this step, everything goes now.
  if (!started) StartPush(step, grads, batch_stats);
  {
    absl::MutexLock lock(&mu_);
    for (int c = static_cast<int>(sent_.size()) - 1; c >= 0; --c) {
      if (!sent_[c]) EnqueueLocked(c);
    }
    mu_.Await(absl::Condition(
        +[](int* pending) { return *pending == 0; }, &pending_));
    grads_ = nullptr;
    if (!error_.ok()) return error_;
    outcome.global_step = chunk_steps_[0];
    outcome.stale = stale_;
    outcome.job_done = job_done_;
  }
  exposed_millis_.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
  have_fresh_ = true;
  return outcome;
}

int64_t PsClient::bytes_sent() const {
  absl::MutexLock lock(&mu_);
  return bytes_sent_;
}

int64_t PsClient::bytes_received() const {
  absl::MutexLock lock(&mu_);
  return bytes_received_;
}

std::string PsClient::LatencySummary() const {
  if (exposed_millis_.empty()) return "no steps";
  std::vector<double> v = exposed_millis_;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))]; };
  return absl::StrFormat("p50 %.1f ms, p90 %.1f ms, p99 %.1f ms over %d steps", at(0.5), at(0.9),
                         at(0.99), v.size());
}

}  // namespace pstrain
