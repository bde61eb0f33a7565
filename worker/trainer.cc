#include "worker/trainer.h"

#include <algorithm>
#include <chrono>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "data/augment.h"
#include "glog/logging.h"
#include "models/random.h"

namespace pstrain {

Trainer::Trainer(Model* model, ParameterClient* client, BatchSource* batches,
                 const TrainerOptions& options)
    : model_(model), client_(client), batches_(batches), options_(options) {}

absl::StatusOr<int64_t> Trainer::Run() {
  using Clock = std::chrono::steady_clock;
  const int64_t batch = batches_->batch_size();
  images_.resize(static_cast<size_t>(batch) * NumElements(model_->input_shape()));
  labels_.resize(batch);
  grads_.resize(model_->num_params());
  batch_stats_.resize(model_->num_state());
  const bool sparse = model_->has_sparse();

  TraceRecorder* const trace = options_.trace;
  if (trace != nullptr) {
    model_->set_trace(trace);
    trace->NameThread("training loop");
  }
  PSTRAIN_ASSIGN_OR_RETURN(ParameterView view, client_->Pull());
  int64_t step = view.global_step;
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
  int64_t window_steps = 0;          // Local steps in this logging window.
  int64_t window_start_step = step;  // Global step at the window's start.
  auto window_start = Clock::now();
  // A pull that found the job rolled back to a checkpoint (a global step
  // below the window's start) restarts the window there: the steps counted
  // from before the rollback were undone, and counting across it would give
  // a negative global_step/sec.
  const auto restart_window_if_rolled_back = [&] {
    if (step >= window_start_step) return;
    window_loss = 0.0;
    window_steps = 0;
    window_start_step = step;
    window_start = Clock::now();
  };
  while (step < options_.train_steps && !view.job_done) {
    if (options_.should_stop && options_.should_stop()) break;
    if (trace != nullptr) trace->SetStep(view.global_step);
    {
      ScopedTraceEvent event(trace, "input", "next batch");
      absl::Status read =
          batches_->NextBatch(images_.data(), labels_.data(), sparse ? &sparse_batch_ : nullptr);
      if (absl::IsOutOfRange(read)) {
        input_ended_ = true;
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
    if (outcome.stale) ++stale_pushes_;
    client_->ReportProgress(r.loss_sum / batch, batch);
    window_loss += r.loss_sum / batch;
    ++window_steps;
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
      window_loss = 0.0;
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

}  // namespace pstrain
