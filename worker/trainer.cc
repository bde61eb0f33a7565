#include "worker/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "data/augment.h"
#include "glog/logging.h"
#include "models/random.h"

namespace pstrain {
namespace {

// StepTimeSummary's buckets: from 0.01 ms up, each 1% wider than the last
// (2000 of them reach 73 minutes; a slower step counts in the last).
constexpr int kStepBuckets = 2000;
constexpr double kStepBucketBase = 0.01;
constexpr double kStepBucketRatio = 1.01;

int StepBucket(double millis) {
  if (!(millis > kStepBucketBase)) return 0;
  const int b = static_cast<int>(std::log(millis / kStepBucketBase) / std::log(kStepBucketRatio));
  return std::clamp(b, 0, kStepBuckets - 1);
}

}  // namespace

std::string FormatInputRates(const InputRates& r) {
  const InputProgress& p = r.progress;
  return absl::StrFormat(
             "input: epoch %d%s, file %d of %d, %.0f%%, %.1f MB/s, %.0f examples/sec, %.1f ms "
             "waited per "
             "step",
             p.epoch + 1, p.num_epochs > 0 ? absl::StrCat(" of ", p.num_epochs) : std::string(),
             std::clamp<int64_t>(p.files_done + p.files_open, 1, std::max<int64_t>(p.files, 1)),
             p.files, 100 * p.fraction, r.mb_per_sec, r.examples_per_sec, r.wait_ms_per_step) +
         (p.bad_records > 0 ? absl::StrCat(", ", p.bad_records, " bad records skipped")
                            : std::string());
}

Trainer::Trainer(Model* model, ParameterClient* client, BatchSource* batches,
                 const TrainerOptions& options)
    : model_(model), client_(client), batches_(batches), options_(options) {}

absl::StatusOr<int64_t> Trainer::Run() {
  using Clock = std::chrono::steady_clock;
  const int64_t batch = batches_->batch_size();
  images_.resize(static_cast<size_t>(batch) * NumElements(model_->input_shape()));
  labels_.resize(static_cast<size_t>(batch) * model_->num_labels());
  grads_.resize(model_->num_params());
  batch_stats_.resize(model_->num_state());
  const bool sparse = model_->has_sparse();

  TraceRecorder* const trace = options_.trace;
  if (trace != nullptr) {
    model_->set_trace(trace);
    trace->NameThread("training loop");
  }
  // A sync replica reads at the step its batches start at: rejoining in the
  // middle of a step it had pushed in part, it computes that step again
  // from the values it computed it from.
  PSTRAIN_ASSIGN_OR_RETURN(ParameterView view, options_.batches_from_step >= 0
                                                   ? client_->PullAt(options_.batches_from_step)
                                                   : client_->Pull());
  int64_t step = view.global_step;
  if (options_.batches_from_step >= 0 && view.global_step != options_.batches_from_step &&
      options_.rewind) {
    // The job moved on (or back) between the step the batches were started
    // at and this first pull: a sync step's batch is the one of its number.
    LOG(INFO) << "the batches began at global step " << options_.batches_from_step
              << ", the job is at " << view.global_step << "; reading them from there";
    PSTRAIN_ASSIGN_OR_RETURN(rewound_, options_.rewind(view.global_step));
    batches_ = rewound_.get();
  }
  // However the loop ends, no answer of its last push stays on the wire: the
  // client and the gradient buffer may go away after Run returns.
  absl::Cleanup last_answers = [&view] { view.AwaitParams(); };
  // The pull after a step: the last push's answers (or, when they cannot be
  // trained on, the parameter servers'), rewinding the batches if the job
  // was rolled back under it.
  auto pull = [&]() -> absl::Status {
    const int64_t computed = view.global_step;  // the step the last batch was for
    {
      ScopedTraceEvent event(trace, "comm", "pull");
      PSTRAIN_ASSIGN_OR_RETURN(view, client_->PullOverlapped());
    }
    // A step at or below the one just computed: the job was rolled back (a
    // push always moves the step past it otherwise).
    if (view.global_step <= computed && options_.rewind) {
      LOG(WARNING) << "the job was rolled back to global step " << view.global_step
                   << " (this replica had computed step " << computed
                   << "); reading the batches from there again";
      PSTRAIN_ASSIGN_OR_RETURN(rewound_, options_.rewind(view.global_step));
      batches_ = rewound_.get();
    }
    step = view.global_step;
    if (options_.on_pull) PSTRAIN_RETURN_IF_ERROR(options_.on_pull(view));
    return absl::OkStatus();
  };
  // Before each layer's forward pass, its parameters if they may still be
  // arriving (a client that overlaps the pull with the next step).
  const std::function<void(int64_t)> params_ready = [&view](int64_t end) { view.AwaitParams(end); };
  double window_loss = 0.0;
  double window_wait = 0.0;  // Seconds waited for batches in this logging window.
  int64_t window_steps = 0;  // Local steps in this logging window.
  // Streamed input: its progress at the window's start, and when its last
  // line was logged.
  std::optional<InputProgress> last_input = batches_->progress();
  Clock::time_point last_input_line{};
  bool input_logged = false;
  // At a progress line (the window's `secs`; `force`: the loop's last): the
  // input's rates to on_input, and its line when it is due.
  // The loop's input from its start (or its last rewind), for the rates of
  // its last line.
  std::optional<InputProgress> first_input = last_input;
  auto input_start = Clock::now();
  double input_wait = 0;
  int64_t input_steps = 0;
  // The input's rates since `from`, `secs` ago, over `steps` steps that
  // waited `wait` s for their batches, go to on_input, and are logged when
  // due (`force`: now).
  const auto report_input = [&](const std::optional<InputProgress>& from, double secs, double wait,
                                int64_t steps, bool force) {
    const std::optional<InputProgress> now = batches_->progress();
    if (!now.has_value()) return;
    InputRates rates;
    rates.progress = *now;
    // None after a rewind (a new stream counts from 0).
    if (from.has_value() && now->examples >= from->examples &&
        now->file_bytes >= from->file_bytes && secs > 0) {
      rates.examples_per_sec = (now->examples - from->examples) / secs;
      rates.mb_per_sec = (now->file_bytes - from->file_bytes) / secs / 1e6;
    }
    if (steps > 0) rates.wait_ms_per_step = 1000 * wait / steps;
    if (options_.on_input) options_.on_input(step, rates);
    const auto line_now = Clock::now();
    if (!input_logged || force ||
        std::chrono::duration<double>(line_now - last_input_line).count() >=
            options_.input_log_secs) {
      LOG(INFO) << FormatInputRates(rates);
      input_logged = true;
      last_input_line = line_now;
    }
    last_input = now;
  };
  int64_t window_start_step = step;  // Global step at the window's start.
  auto window_start = Clock::now();
  // A pull that found the job rolled back to a checkpoint (a global step
  // below the window's start) restarts the window there: the steps counted
  // from before the rollback were undone, and counting across it would give
  // a negative global_step/sec.
  const auto restart_window_if_rolled_back = [&] {
    if (step >= window_start_step) return;
    window_loss = 0.0;
    window_wait = 0.0;
    window_steps = 0;
    window_start_step = step;
    window_start = Clock::now();
    last_input = first_input = batches_->progress();
    input_start = Clock::now();
    input_wait = 0;
    input_steps = 0;
  };
  auto last_job_look = Clock::now();  // job_over's last answer
  auto last_step_end = Clock::now();  // StepTimeSummary's
  step_buckets_.assign(kStepBuckets, 0);
  steps_timed_ = 0;
  slowest_millis_ = 0;
  while (step < options_.train_steps && !view.job_done) {
    if (options_.should_stop && options_.should_stop()) break;
    if (trace != nullptr) trace->SetStep(view.global_step);
    {
      ScopedTraceEvent event(trace, "input", "next batch");
      const auto read_start = Clock::now();
      absl::Status read =
          batches_->NextBatch(images_.data(), labels_.data(), sparse ? &sparse_batch_ : nullptr);
      const double waited = std::chrono::duration<double>(Clock::now() - read_start).count();
      window_wait += waited;
      input_wait += waited;
      // Following new files and none yet: asked again (after a look at
      // whether to stop, and now and then at whether the job is over).
      if (IsWaitingForInput(read)) {
        if (options_.job_over && Clock::now() - last_job_look >= std::chrono::seconds(1)) {
          last_job_look = Clock::now();
          if (options_.job_over()) {
            LOG(INFO) << "the job is over while this replica waits for new files";
            break;
          }
        }
        continue;
      }
      if (absl::IsOutOfRange(read)) {
        input_ended_ = true;
        // The rates of the whole run.
        report_input(first_input, std::chrono::duration<double>(Clock::now() - input_start).count(),
                     input_wait, input_steps, /*force=*/true);
        break;
      }
      PSTRAIN_RETURN_IF_ERROR(read);
    }
    if (sparse) {
      PSTRAIN_RETURN_IF_ERROR(model_->PrepareSparse(sparse_batch_, batch, &sparse_step_));
      ScopedTraceEvent event(trace, "comm", "pull rows");
      PSTRAIN_RETURN_IF_ERROR(client_->PullRows(&sparse_step_));
    }
    client_->StartPush(view.global_step, grads_.data(), batch_stats_.data());
    LossResult r;
    {
      ScopedTraceEvent event(trace, "compute", "train step");
      r = model_->TrainStep(
          view.params, view.state, images_.data(), labels_.data(), batch,
          MixSeeds(options_.seed, view.global_step), grads_.data(), batch_stats_.data(),
          [this](int64_t from) { client_->GradientsReady(from); }, sparse ? &sparse_step_ : nullptr,
          view.await_params ? params_ready : nullptr);
    }
    absl::StatusOr<PushOutcome> pushed;
    {
      ScopedTraceEvent event(trace, "comm", "wait for push answers");
      pushed = client_->Push(view.global_step, grads_.data(), batch_stats_.data());
    }
    PSTRAIN_ASSIGN_OR_RETURN(PushOutcome outcome, std::move(pushed));
    if (outcome.discarded) {
      // Computed from parameters that were not one step's (the last push's
      // final answers found the job rolled back, or done): nothing was
      // sent; pull and compute the step anew.
      PSTRAIN_RETURN_IF_ERROR(pull());
      restart_window_if_rolled_back();
      continue;
    }
    step = outcome.global_step;
    {
      const auto now = Clock::now();
      const double millis = std::chrono::duration<double, std::milli>(now - last_step_end).count();
      last_step_end = now;
      ++step_buckets_[StepBucket(millis)];
      ++steps_timed_;
      if (millis > slowest_millis_) {
        slowest_millis_ = millis;
        slowest_to_step_ = step;
      }
    }
    if (outcome.stale) ++stale_pushes_;
    if (options_.progressive != nullptr) {
      // The logits of this step's forward pass: the model before the update.
      options_.progressive->Add(model_->logits().data(), labels_.data(), batch);
    }
    client_->ReportProgress(r.loss_sum / batch, batch);
    window_loss += r.loss_sum / batch;
    ++window_steps;
    ++input_steps;
    const bool finished = outcome.job_done || step >= options_.train_steps;
    const bool log_now =
        options_.log_every_n_steps > 0 &&
        (step / options_.log_every_n_steps != window_start_step / options_.log_every_n_steps ||
         finished);
    if (log_now) {
      const double secs = std::chrono::duration<double>(Clock::now() - window_start).count();
      last_loss_ = window_loss / window_steps;
      LOG(INFO) << absl::StrFormat(
          "step = %d, loss = %.4f, examples/sec = %.1f, global_step/sec = %.2f (epoch %d)", step,
          last_loss_, window_steps * batch / secs, (step - window_start_step) / secs,
          batches_->epoch());
      report_input(last_input, secs, window_wait, window_steps, finished);
      if (options_.progressive != nullptr) {
        const ProgressiveMetrics m = options_.progressive->Compute();
        LOG(INFO) << FormatProgressive(m);
        if (options_.on_progressive) options_.on_progressive(step, m);
      }
      window_loss = 0.0;
      window_wait = 0.0;
      window_steps = 0;
      window_start_step = step;
      window_start = Clock::now();
    }
    if (finished) break;
    PSTRAIN_RETURN_IF_ERROR(pull());
    restart_window_if_rolled_back();
  }
  if (window_steps > 0) last_loss_ = window_loss / window_steps;
  return step;
}

std::string Trainer::StepTimeSummary() const {
  if (steps_timed_ == 0) return "no steps";
  // The median to within 1%: the middle of the bucket the middle step is in.
  int64_t seen = 0;
  int bucket = 0;
  for (; bucket < kStepBuckets; ++bucket) {
    seen += step_buckets_[bucket];
    if (2 * seen >= steps_timed_) break;
  }
  const double median =
      std::min(slowest_millis_, kStepBucketBase * std::pow(kStepBucketRatio, bucket + 0.5));
  return absl::StrFormat(
      "steps took: median %.1f ms, slowest %.1f ms (to global step %d) over %d "
      "steps",
      median, slowest_millis_, slowest_to_step_, steps_timed_);
}

}  // namespace pstrain
