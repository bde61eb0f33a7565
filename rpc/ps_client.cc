#include "rpc/ps_client.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "ps_protocol/bf16.h"
#include "rpc/ps_client_internal.h"

namespace pstrain {

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
    : options_(options),
      connections_(options.ps_addresses, options.rpc_timeout, options.retry_budget, options.wire,
                   options.copies, options.failover_after),
      params_(options.layout.num_params),
      state_(options.layout.num_state) {
  const size_t n = options_.layout.chunks.size();
  for (size_t c = 0; c < n; ++c) {
    calls_.push_back(std::make_unique<ChunkCall>());
    calls_.back()->backoff = connections_.RetryBackoff();
    const Chunk& chunk = options_.layout.chunks[c];
    if (options_.compression_ratio > 0) {
      compressors_.push_back(
          std::make_unique<TopKCompressor>(chunk.end - chunk.begin, options_.compression_ratio));
    }
    trace_tracks_.push_back(absl::StrCat("chunk ", c, " PushPull (ps ", chunk.ps, ")"));
    trace_encode_.push_back(absl::StrCat("encode chunk ", c));
  }
  absl::MutexLock lock(&mu_);
  sent_.assign(n, false);
  in_flight_.assign(n, 0);
  chunk_steps_.assign(n, 0);
  chunk_done_.assign(n, 0);
  chunk_generations_.assign(n, 0);
  params_versions_.assign(n, 0);
  if (options_.replica >= 0) sender_ = std::thread([this] { SenderLoop(); });
  if (!options_.layout.tables.empty()) {
    rows_ = std::make_unique<RowClient>(&connections_, options_.layout.tables, options_.replica);
  }
}

PsClient::~PsClient() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // In-flight calls reference this client: cancel them and wait.
    for (const auto& [chunk, due] : queue_) ChunkFinishedLocked(chunk);  // Never to be sent.
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

absl::StatusOr<ParameterView> PsClient::Pull() { return PullView(/*overlapped=*/false); }

absl::StatusOr<ParameterView> PsClient::PullOverlapped() { return PullView(/*overlapped=*/true); }

absl::StatusOr<ParameterView> PsClient::PullAt(int64_t step) {
  have_fresh_ = false;
  return PullView(/*overlapped=*/false, step);
}

absl::StatusOr<ParameterView> PsClient::PullView(bool overlapped, std::optional<int64_t> at_step) {
  if (!overlapped || !have_fresh_) {
    // The answers still out write params_: let them land, and take in what
    // they say (a pull from the ps if they cannot be trained on).
    absl::MutexLock lock(&mu_);
    SettleTailLocked();
    if (discard_) have_fresh_ = false;
    discard_ = false;
    absl::Status error = std::exchange(tail_error_, absl::OkStatus());
    if (!error.ok()) {
      have_fresh_ = false;
      return error;
    }
  }
  if (!have_fresh_) {
    std::vector<int64_t> steps, generations;
    std::vector<char> done;
    bool job_done = false;
    int64_t bytes = 0;
    const absl::Time give_up = absl::Now() + options_.consistent_pull_wait;
    while (true) {
      PSTRAIN_ASSIGN_OR_RETURN(
          int64_t pulled,
          connections_.PullChunks(options_.layout, params_.data(), state_.data(), &steps, &job_done,
                                  &generations, &done, at_step, options_.replica));
      bytes += pulled;
      if (options_.bf16) {
        // A pull carries float32; the answers to pushes carry bf16. Rounded
        // as those are, a replica that pulls (a restart, a rollback) trains
        // on the very values one that went on from its push answers does.
        for (float& p : params_) p = Bf16ToFloat(FloatToBf16(p));
      }
      const bool apart = std::adjacent_find(generations.begin(), generations.end(),
                                            std::not_equal_to<>()) != generations.end();
      // Chunks of two generations: a rollback is restoring the ps one after
      // another. A sync replica training on such a view would set the
      // chunks' steps apart for the rest of the job.
      if (!options_.sync || !apart || job_done) break;
      if (absl::Now() > give_up) {
        LOG(WARNING) << "replica " << options_.replica
                     << ": the chunks still hold parameters of different generations (a "
                        "rollback not finished?) after "
                     << absl::FormatDuration(options_.consistent_pull_wait) << "; going on";
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    absl::MutexLock lock(&mu_);
    chunk_steps_ = std::move(steps);
    chunk_generations_ = std::move(generations);
    std::fill(params_versions_.begin(), params_versions_.end(), 0);
    chunk_done_ = std::move(done);
    job_done_ = job_done;
    bytes_received_ += bytes;
  }
  have_fresh_ = false;
  absl::MutexLock lock(&mu_);
  ParameterView view;
  // Pull settled the tail; PullOverlapped may leave it out.
  view.params = params_.data();
  view.state = state_.data();
  // The lowest chunk step. Chunks apart (a replica killed after pushing some
  // chunks of a step and not others) are brought together: sync, by
  // pushing every chunk at the lowest (the chunks already past it answer
  // stale, the one behind completes its step); async, by pushing until
  // every chunk says the job is done (a done chunk applies nothing more).
  // With answers still out, chunk 0's (Push returned on it, and it said the
  // job goes on).
  view.global_step = LowestStepLocked();
  view.job_done = !tail_ && JobDoneLocked();
  view.rows = rows_.get();
  if (tail_) view.await_params = [this](int64_t end) { AwaitParams(end); };
  view_step_ = view.global_step;
  view_generation_ = chunk_generations_.empty() ? 0 : chunk_generations_[0];
  return view;
}

bool PsClient::JobDoneLocked() const {
  // Sync: any chunk (they end at one step: a sync step is applied on every
  // chunk or on none). Async: every chunk.
  if (options_.sync) return job_done_;
  return std::all_of(chunk_done_.begin(), chunk_done_.end(), [](char d) { return d != 0; });
}

absl::Status PsClient::PullRows(SparseStep* step) {
  if (rows_ == nullptr) return ParameterClient::PullRows(step);
  PSTRAIN_RETURN_IF_ERROR(rows_->Pull(step, view_step_, view_generation_));
  sparse_ = step;
  return absl::OkStatus();
}

RowClient::Traffic PsClient::row_traffic() const {
  return rows_ == nullptr ? RowClient::Traffic() : rows_->traffic();
}

void PsClient::ReportProgress(double loss, int64_t examples) {
  absl::MutexLock lock(&mu_);
  loss_sum_ += loss;
  ++loss_batches_;
  examples_ += examples;
}

int64_t PsClient::bytes_sent() const {
  absl::MutexLock lock(&mu_);
  return bytes_sent_;
}

int64_t PsClient::bytes_received() const {
  absl::MutexLock lock(&mu_);
  return bytes_received_;
}

int64_t PsClient::unchanged_answers() const {
  absl::MutexLock lock(&mu_);
  return unchanged_answers_;
}

ClientTraffic PsClient::traffic() const {
  ClientTraffic t;
  t.steps = static_cast<int64_t>(exposed_millis_.size());
  t.bytes_sent = bytes_sent();
  t.bytes_received = bytes_received();
  t.unchanged_answers = unchanged_answers();
  t.latency_summary = LatencySummary();
  const RowClient::Traffic rows = row_traffic();
  t.row_bytes_sent = rows.bytes_sent;
  t.row_bytes_received = rows.bytes_received;
  t.rows_pulled = rows.rows_pulled;
  t.rows_pushed = rows.rows_pushed;
  return t;
}

std::string PsClient::LatencySummary() const {
  if (exposed_millis_.empty()) return "no steps";
  std::vector<double> v = exposed_millis_;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))]; };
  return absl::StrFormat("p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms over %d steps",
                         at(0.5), at(0.9), at(0.99), v.back(), v.size());
}

}  // namespace pstrain
