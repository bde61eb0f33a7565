// The chunked push pipeline of PsClient (ps_client.h): a step's gradients
// sent chunk by chunk as the backward pass finishes them, by the sender
// thread, each chunk's PushPull retried on its own, and the answers' tail
// that the next step's view waits for.
#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "ps_protocol/bf16.h"
#include "rpc/ps_client.h"
#include "rpc/ps_client_internal.h"

namespace pstrain {
namespace {

// A replicated job's call unanswered this long is logged (and again as long
// again later): a step that stalls says where.
constexpr absl::Duration kUnansweredReport = absl::Seconds(10);

}  // namespace

void PsClient::StartPush(int64_t step, const float* grads, const float* batch_stats) {
  absl::MutexLock lock(&mu_);
  if (tail_) {
    // The last push's answers are still arriving (the forward pass is about
    // to wait for them): begin this one when they are in.
    deferred_ = true;
    deferred_step_ = step;
    deferred_grads_ = grads;
    deferred_stats_ = batch_stats;
    return;
  }
  BeginPushLocked(step, grads, batch_stats);
}

void PsClient::BeginPushLocked(int64_t step, const float* grads, const float* batch_stats) {
  CHECK_EQ(pending_, 0) << "a push began while another is in flight";
  push_step_ = step;
  started_ = true;
  aligned_ = std::adjacent_find(chunk_steps_.begin(), chunk_steps_.end(), std::not_equal_to<>()) ==
             chunk_steps_.end();
  grads_ = grads;
  batch_stats_ = batch_stats;
  std::fill(sent_.begin(), sent_.end(), false);
  for (auto& call : calls_) call->built = false;
  stale_ = false;
  rolled_back_ = false;
  job_done_ = false;
  error_ = absl::OkStatus();
  step_give_up_ = absl::InfinitePast();
}

void PsClient::SettleTailLocked() {
  if (tail_) {
    mu_.Await(absl::Condition(
        +[](int* pending) { return *pending == 0; }, &pending_));
    tail_ = false;
    grads_ = nullptr;
    // The push was counted stale when Push returned if chunk 0 said so.
    tail_stale_ = stale_ && !counted_stale_;
    const int64_t claimed = provisional_step_;
    const int64_t lowest = LowestStepLocked();
    if (!error_.ok()) {
      discard_ = true;
      tail_error_ = error_;
    } else if (rolled_back_ || JobDoneLocked() || (options_.sync && lowest != claimed)) {
      // The view the next step was computed from is not one step's (a
      // rollback; sync, a chunk now behind chunk 0, whose step the view
      // claimed), or there is no next step: it must not be pushed.
      discard_ = true;
      if (rolled_back_) {
        LOG(WARNING) << "replica " << options_.replica << ": the push for step " << push_step_
                     << " was not applied everywhere (the job was rolled back to a "
                        "checkpoint); pulling again";
      }
    }
  }
  if (deferred_) {
    deferred_ = false;
    BeginPushLocked(deferred_step_, deferred_grads_, deferred_stats_);
  }
}

bool PsClient::MayReturnEarlyLocked() const {
  // Sync chunks that were apart (a replica killed between the pushes of its
  // chunks) are brought together by this push: no early view then.
  return options_.overlap_pull && !in_flight_[0] && error_.ok() && !rolled_back_ && !job_done_ &&
         !chunk_done_[0] && (!options_.sync || aligned_);
}

int64_t PsClient::LowestStepLocked() const {
  // A chunk still answering this push is at least one past its last step
  // (every push moves a chunk's step on, or answers stale past it).
  int64_t lowest = std::numeric_limits<int64_t>::max();
  for (size_t c = 0; c < chunk_steps_.size(); ++c) {
    lowest = std::min(lowest, chunk_steps_[c] + (in_flight_[c] ? 1 : 0));
  }
  return lowest;
}

bool PsClient::PushAnsweredLocked() const { return pending_ == 0 || MayReturnEarlyLocked(); }

bool PsClient::ParamsArrivedLocked() const {
  const auto& chunks = options_.layout.chunks;
  for (size_t c = 0; c < chunks.size() && chunks[c].begin < await_end_; ++c) {
    if (in_flight_[c]) return false;
  }
  return true;
}

void PsClient::AwaitParams(int64_t end) {
  absl::MutexLock lock(&mu_);
  if (!tail_) return;
  await_end_ = end;
  if (ParamsArrivedLocked()) return;
  const absl::Time start = absl::Now();
  {
    ScopedTraceEvent event(options_.trace, "comm", "wait for parameters");
    mu_.Await(absl::Condition(this, &PsClient::ParamsArrivedLocked));
  }
  awaited_millis_ += absl::ToDoubleMilliseconds(absl::Now() - start);
}

void PsClient::ChunkFinishedLocked(int chunk) {
  in_flight_[chunk] = 0;
  --pending_;
}

void PsClient::EnqueueLocked(int chunk) {
  sent_[chunk] = true;
  in_flight_[chunk] = 1;
  ++pending_;
  queue_.emplace_back(chunk, absl::InfinitePast());
  cv_.Signal();
}

void PsClient::GradientsReady(int64_t from) {
  absl::MutexLock lock(&mu_);
  SettleTailLocked();  // the forward pass has waited for it: at once
  if (!started_ || discard_) return;
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
        if (options_.copies > 1) CheckHangingCallsLocked();
        if (queue_.empty()) {
          if (options_.copies > 1) {
            cv_.WaitWithTimeout(&mu_, absl::Milliseconds(250));
          } else {
            cv_.Wait(&mu_);
          }
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
        cv_.WaitWithDeadline(
            &mu_, options_.copies > 1 ? std::min(due->second, absl::Now() + absl::Milliseconds(250))
                                      : due->second);
      }
      if (stopping_) return;
    }
    SendChunk(chunk);
  }
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
    step = options_.sync ? push_step_ : chunk_steps_[c];
    if (call.reroute) {
      call.reroute = false;
      if (!RerouteLocked(c)) return;
    }
    r.set_generation(chunk_generations_[c]);
    r.set_have_params_version(params_versions_[c]);
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
  r.set_chunk(c);
  r.set_replica(options_.replica);
  r.set_step(step);
  const int64_t n = chunk.end - chunk.begin;
  // Encoded once per push: a retry resends the request as built (top-k's
  // residual has already given up what it picked; and a retry of the tail
  // runs while the next step may be writing the gradient buffer).
  if (!call.built) {
    ScopedTraceEvent encode(options_.trace, "comm", trace_encode_[c]);
    if (!compressors_.empty()) {
      r.set_dtype(options_.bf16 ? BFLOAT16 : FLOAT32);
      compressors_[c]->Compress(grads + chunk.begin, options_.bf16, r.mutable_indices(),
                                r.mutable_gradients());
    } else if (options_.bf16) {
      r.set_dtype(BFLOAT16);
      r.mutable_gradients()->resize(n * sizeof(uint16_t));
      FloatsToBf16(grads + chunk.begin, n,
                   reinterpret_cast<uint16_t*>(r.mutable_gradients()->data()));
    } else {
      r.set_dtype(FLOAT32);
      r.set_gradients(reinterpret_cast<const char*>(grads + chunk.begin), n * sizeof(float));
    }
    if (chunk.state > 0) {
      r.set_batch_stats(reinterpret_cast<const char*>(stats), chunk.state * sizeof(float));
    } else {
      r.clear_batch_stats();
    }
    call.built = true;
  }
  call.response.Clear();
  {
    // The destructor cancels in-flight contexts under mu_: install it there,
    // and do not start a call once the client is stopping.
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      ChunkFinishedLocked(c);
      return;
    }
    call.context = std::make_unique<grpc::ClientContext>();
    call.sent_us = TraceRecorder::NowMicros();
    call.sent_to = connections_.Serving(chunk.ps);
    call.sent_at = absl::Now();
    call.checked_at = call.sent_at;
    call.reported_at = call.sent_at;
    if (options_.trace != nullptr) call.sent_step = options_.trace->step();
    call.context->set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
    connections_.Prepare(call.context.get());
  }
  connections_.stub(call.sent_to)
      ->async()
      ->PushPull(call.context.get(), &call.request, &call.response,
                 [this, c](grpc::Status s) { OnChunkDone(c, std::move(s)); });
}

void PsClient::OnChunkDone(int c, grpc::Status status) {
  const Chunk& chunk = options_.layout.chunks[c];
  ChunkCall& call = *calls_[c];
  if (options_.trace != nullptr) {
    options_.trace->CompleteOnTrack(trace_tracks_[c], "comm",
                                    status.ok() ? "PushPull" : "PushPull failed", call.sent_us,
                                    TraceRecorder::NowMicros(), call.sent_step);
  }
  const PushPullResponse& r = call.response;
  const int64_t n = chunk.end - chunk.begin;
  // An unchanged chunk's answer has no parameters: params_ holds them.
  const size_t want =
      r.params_unchanged() ? 0 : n * (options_.bf16 ? sizeof(uint16_t) : sizeof(float));
  if (status.ok() && r.params_unchanged() && call.request.have_params_version() == 0) {
    status = grpc::Status(grpc::StatusCode::DATA_LOSS,
                          "answer without parameters to a client that holds none");
  }
  if (status.ok() && (r.params().size() != want || r.dtype() != call.request.dtype() ||
                      r.state().size() != chunk.state * sizeof(float))) {
    status =
        grpc::Status(grpc::StatusCode::DATA_LOSS,
                     absl::StrCat("answer with ", r.params().size(), " bytes, expected ", want));
  }
  if (status.ok() && r.params_unchanged()) {
    if (!r.state().empty()) std::memcpy(state_.data(), r.state().data(), r.state().size());
  } else if (status.ok()) {
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
  const bool suspect = !status.ok() && connections_.FailoverSuspect(status);
  if (!status.ok() && (Retryable(status) || suspect) && !stopping_) {
    if (step_give_up_ == absl::InfinitePast()) {
      step_give_up_ = absl::Now() + options_.retry_budget;
    }
    if (call.backoff.FitsBefore(absl::Now(), step_give_up_)) {
      // Retry from the sender thread after a pause; the ps counts a retried
      // (replica, step) once, a promoted copy too (it holds what its
      // primary counted).
      if (suspect && !call.warned) {
        call.warned = true;  // once until it gets through
        LOG(WARNING) << "replica " << options_.replica << ": chunk " << c << "'s PushPull to "
                     << connections_.TaskName(call.sent_to) << " failed (" << status.error_message()
                     << "); retrying where the chunk is served";
      }
      call.reroute = suspect;
      call.failure = status;
      queue_.emplace_back(c, absl::Now() + call.backoff.Next());
      cv_.Signal();
      return;
    }
  }
  if (status.error_code() == grpc::StatusCode::ABORTED) {
    // Rolled back under this push: nothing applied, nothing to retry.
    call.backoff.Reset();
    rolled_back_ = true;
  } else if (status.ok()) {
    call.backoff.Reset();
    call.warned = false;
    chunk_steps_[c] = r.global_step();
    chunk_generations_[c] = r.generation();
    params_versions_[c] = r.params_version();
    if (r.params_unchanged()) ++unchanged_answers_;
    stale_ = stale_ || r.stale();
    job_done_ = job_done_ || r.job_done();
    chunk_done_[c] = r.job_done();
    bytes_sent_ +=
        static_cast<int64_t>(call.request.gradients().size() + call.request.indices().size() +
                             call.request.batch_stats().size());
    bytes_received_ += static_cast<int64_t>(want + r.state().size());
  } else if (error_.ok()) {
    error_ = CallError(
        "PushPull",
        absl::StrCat(connections_.TaskName(connections_.Serving(chunk.ps)), " (chunk ", c, ")"),
        status, options_.retry_budget);
  }
  ChunkFinishedLocked(c);
}

void PsClient::CheckHangingCallsLocked() {
  const absl::Time now = absl::Now();
  std::vector<int> owners;
  for (size_t c = 0; c < calls_.size(); ++c) {
    ChunkCall& call = *calls_[c];
    if (!in_flight_[c] || call.context == nullptr || call.reroute) continue;
    if (now - call.reported_at >= kUnansweredReport) {
      // Said every so often while it lasts: what a stalled step waits for.
      call.reported_at = now;
      LOG(WARNING) << "replica " << options_.replica << ": chunk " << c << "'s PushPull for step "
                   << call.request.step() << " to " << connections_.TaskName(call.sent_to)
                   << " unanswered for "
                   << absl::FormatDuration(absl::Trunc(now - call.sent_at, absl::Seconds(1)))
                   << " (the ps holds it: see its log)";
    }
    if (now - call.sent_at < options_.failover_after / 2 ||
        now - call.checked_at < absl::Seconds(1)) {
      continue;
    }
    call.checked_at = now;
    const int owner = options_.layout.chunks[c].ps;
    if (call.sent_to != connections_.Serving(owner)) {
      call.context->TryCancel();  // it moved already
      continue;
    }
    if (std::find(owners.begin(), owners.end(), owner) == owners.end()) owners.push_back(owner);
  }
  for (int owner : owners) {
    mu_.Unlock();
    const bool moved = connections_.Reroute(owner);
    mu_.Lock();
    if (!moved) continue;
    for (size_t c = 0; c < calls_.size(); ++c) {
      ChunkCall& call = *calls_[c];
      // Its answer comes as CANCELLED, and the retry goes where the chunk is.
      if (in_flight_[c] && call.context != nullptr && options_.layout.chunks[c].ps == owner &&
          call.sent_to != connections_.Serving(owner)) {
        call.context->TryCancel();
      }
    }
  }
}

bool PsClient::RerouteLocked(int c) {
  const Chunk& chunk = options_.layout.chunks[c];
  ChunkCall& call = *calls_[c];
  // Moved since the call went out (another chunk's retry found where):
  // nothing to ask.
  bool moved = call.sent_to != connections_.Serving(chunk.ps);
  if (!moved) {
    // Reroute asks the chunk's copies (up to a second): not under mu_.
    mu_.Unlock();
    moved = connections_.Reroute(chunk.ps);
    mu_.Lock();
  }
  // The copy that serves it now numbers its versions for itself: ask for
  // the parameters whole.
  if (moved) params_versions_[c] = 0;
  const grpc::StatusCode code = call.failure.error_code();
  if (moved || stopping_ || code == grpc::StatusCode::UNAVAILABLE ||
      code == grpc::StatusCode::DEADLINE_EXCEEDED ||
      code == grpc::StatusCode::CANCELLED ||  // hung where the chunk no longer is
      code == grpc::StatusCode::ABORTED ||    // fenced: the copy that serves it comes
      // A restarted ps that holds a copy of the chunk, before the failover
      // that moves it: the copy that serves it comes (within the budget).
      code == grpc::StatusCode::FAILED_PRECONDITION) {
    return true;  // (a client stopping finishes the chunk where it sends)
  }
  // Not a failover after all: the failure stands.
  if (error_.ok()) {
    error_ = CallError(
        "PushPull",
        absl::StrCat(connections_.TaskName(connections_.Serving(chunk.ps)), " (chunk ", c, ")"),
        call.failure, options_.retry_budget);
  }
  ChunkFinishedLocked(c);
  return false;
}

absl::StatusOr<PushOutcome> PsClient::Push(int64_t step, const float* grads,
                                           const float* batch_stats) {
  CHECK_GE(options_.replica, 0) << "this client does not train";
  const absl::Time start = absl::Now();
  PushOutcome outcome;
  {
    absl::MutexLock lock(&mu_);
    SettleTailLocked();
    if (discard_) {
      // The parameters of this step were not one step's: send nothing.
      discard_ = false;
      started_ = false;
      grads_ = nullptr;
      have_fresh_ = false;
      sparse_ = nullptr;
      absl::Status error = std::exchange(tail_error_, absl::OkStatus());
      if (!error.ok()) return error;
      outcome.discarded = true;
      outcome.global_step = *std::min_element(chunk_steps_.begin(), chunk_steps_.end());
      return outcome;
    }
    // Without StartPush for this step, everything goes now.
    if (!started_) BeginPushLocked(step, grads, batch_stats);
    for (int c = static_cast<int>(sent_.size()) - 1; c >= 0; --c) {
      if (!sent_[c]) EnqueueLocked(c);
    }
  }
  // The gradient rows go while the dense chunks are on the wire.
  absl::StatusOr<bool> rows_stale = false;
  if (sparse_ != nullptr) {
    rows_stale = rows_->Push(*sparse_, step, view_generation_);
    sparse_ = nullptr;
  }
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &PsClient::PushAnsweredLocked));
    started_ = false;
    tail_ = pending_ > 0;
    provisional_step_ = LowestStepLocked();
    if (!tail_) grads_ = nullptr;
    if (!error_.ok()) return error_;
    // Rows restored under this push (a rollback): like an aborted chunk,
    // the next Pull reads everything again.
    const bool rows_rolled_back = absl::IsAborted(rows_stale.status());
    if (!rows_stale.ok() && !rows_rolled_back) return rows_stale.status();
    if (rows_rolled_back) rolled_back_ = true;
    if (tail_ && rolled_back_) {
      // Not to be trained on: wait for the rest and read everything again.
      SettleTailLocked();
      discard_ = false;
      tail_error_ = absl::OkStatus();
    }
    // After a rollback, the chunks that answered are of the old run: claim no
    // more than the lowest step (the aborted chunks' is the one pushed), and
    // not the end of the job. With a tail, chunk 0's step (it said the job
    // goes on; the tail's answers are taken in before the next push).
    outcome.global_step = LowestStepLocked();
    outcome.stale = stale_ || rolled_back_ || (rows_stale.ok() && *rows_stale) || tail_stale_;
    counted_stale_ = outcome.stale;  // a tail that says so too is not counted again
    tail_stale_ = false;
    outcome.job_done = !tail_ && JobDoneLocked() && !rolled_back_;
    // After a rollback the answers are not one step's: read everything again.
    have_fresh_ = !rolled_back_;
    if (rolled_back_) {
      LOG(WARNING) << "replica " << options_.replica << ": the push for step " << step
                   << " was not applied (the job was rolled back to a checkpoint); pulling again";
    }
  }
  exposed_millis_.push_back(absl::ToDoubleMilliseconds(absl::Now() - start) + awaited_millis_);
  awaited_millis_ = 0;
  return outcome;
}

}  // namespace pstrain
