#include "worker/distributed.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "input/job_input.h"
#include "input/replica_spec.h"
#include "io/checkpoint.h"
#include "models/model_options.h"
#include "rpc/job_clients.h"
#include "worker/replica.h"

namespace pstrain {
namespace {

void LogTraffic(int task, const ClientTraffic& traffic) {
  const int64_t steps = traffic.steps;
  LOG(INFO) << "worker " << task
            << " PushPull time not hidden behind the backward pass: " << traffic.latency_summary
            << "; bytes per step: " << (steps ? traffic.bytes_sent / steps : 0) << " sent, "
            << (steps ? traffic.bytes_received / steps : 0) << " received";
  if (traffic.unchanged_answers > 0) {
    LOG(INFO) << "worker " << task << " " << traffic.unchanged_answers
              << " chunk answers left out parameters that had not changed (frozen layers, or "
                 "SGD with all-zero gradients)";
  }
  if (steps > 0 && (traffic.rows_pulled > 0 || traffic.rows_pushed > 0)) {
    LOG(INFO) << "worker " << task << " embedding rows per step: " << traffic.rows_pulled / steps
              << " pulled, " << traffic.rows_pushed / steps
              << " pushed (distinct ids of its batch); "
              << "bytes per step: " << traffic.row_bytes_sent / steps << " sent, "
              << traffic.row_bytes_received / steps << " received";
  }
}

// Waits up to startup_timeout for the initialized parameter servers: true
// once they answer, false if the wait ends without training (a stop request,
// or the job completed meanwhile: this worker was started again while the
// chief was finishing the job, and its ps tasks are gone).
absl::StatusOr<bool> WaitForParameterServers(ParameterServers* servers, const TrainingSpec& t,
                                             const RoleContext& context) {
  const absl::Time deadline = absl::Now() + absl::Seconds(t.startup_timeout);
  while (true) {
    const absl::Duration slice = std::min(absl::Seconds(10), deadline - absl::Now());
    absl::Status s = servers->WaitReady(slice, /*initialized=*/true, context.termination);
    if (s.ok()) return true;
    if (context.termination->Received() != 0) {
      LOG(INFO) << s.message();
      return false;
    }
    if (JobAlreadyFinished(context.env, t.job_dir, t.train_steps)) return false;
    if (!absl::IsDeadlineExceeded(s) || absl::Now() >= deadline) {
      if (!absl::IsDeadlineExceeded(s)) return s;
      return absl::DeadlineExceededError(
          absl::StrCat("gave up waiting ", t.startup_timeout,
                       " s (startup_timeout) for the parameter servers: ", s.message()));
    }
  }
}

// After the replica's input ended at global step `input_end`: waits for the
// job to end (nullopt), or to be rolled back below `input_end` by a restore
// (the step to train from again), or a stop request (nullopt).
absl::StatusOr<std::optional<int64_t>> WaitAfterInputEnded(ParameterServers* servers,
                                                           const TrainingSpec& t, int replica,
                                                           int64_t input_end,
                                                           const RoleContext& context) {
  absl::Time last_answer = absl::Now();
  absl::Time last_said = absl::Now();  // the Leave that told the ps
  while (context.termination->Received() == 0) {
    absl::StatusOr<std::vector<PsStatus>> statuses = servers->Statuses();
    if (statuses.ok()) {
      last_answer = absl::Now();
      bool initialized = true;
      for (const PsStatus& s : *statuses) {
        if (s.job_done || s.shutting_down) return std::nullopt;
        initialized = initialized && s.initialized;
      }
      // Rolled back below where the input ended: train from there again.
      // (max_global_step: in sync the rows may lag the chunks by a step.)
      int64_t highest = 0;
      for (const PsStatus& s : *statuses) highest = std::max(highest, s.max_global_step);
      if (initialized && highest < input_end) return LowestStep(*statuses);
      if (initialized && InputEndLost(*statuses) && absl::Now() - last_said > absl::Seconds(5)) {
        // A restarted ps forgot it: said again (not more often than every
        // few seconds: the other replicas may be saying theirs).
        PSTRAIN_RETURN_IF_ERROR(servers->Leave(replica, "its input ended (said again)",
                                               /*input_ended=*/true, absl::Seconds(10)));
        last_said = absl::Now();
      }
    } else if (JobAlreadyFinished(context.env, t.job_dir, t.train_steps)) {
      return std::nullopt;
    } else if (absl::Now() - last_answer > absl::Seconds(t.startup_timeout)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the parameter servers have not answered for ", t.startup_timeout,
          " s (startup_timeout) while waiting for the job to end: ", statuses.status().message()));
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
  return std::nullopt;
}

}  // namespace

absl::Status RunWorker(const RoleConfig& role, const RoleContext& context) {
  const JobConfig& job = role.job;
  const TrainingSpec& t = job.training;
  const int task = role.task.task_index;
  if (JobAlreadyFinished(context.env, t.job_dir, t.train_steps)) return absl::OkStatus();
  const ReplicaSpec spec = ReplicaSpecOf(job, ReplicaId(job, role.task));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, BuildJobModel(t));
  const ShardLayout layout = ComputeShardLayout(*model, static_cast<int>(job.cluster.ps.size()));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ParameterServers> servers,
                           MakeParameterServers(job, layout));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ReplicaInput> input,
                           ReplicaInput::Open(context.env, t, *model, spec));
  LOG(INFO) << "worker " << task << " (replica " << spec.replica << " of " << spec.num_replicas
            << ") " << input->Describe() << "; waiting for the parameter servers";
  PSTRAIN_ASSIGN_OR_RETURN(const bool ready, WaitForParameterServers(servers.get(), t, context));
  if (!ready) return absl::OkStatus();
  RecordPsClockOffsets(servers.get(), context.trace);
  // A resumed job goes on with the examples an uninterrupted one would see
  // next.
  absl::StatusOr<std::vector<PsStatus>> statuses = servers->Statuses();
  const int64_t start_step = statuses.ok() ? LowestStep(*statuses) : 0;
  if (statuses.ok() && spec.sync) {
    int64_t highest = start_step;
    for (const PsStatus& s : *statuses) highest = std::max(highest, s.max_global_step);
    if (highest > start_step) {
      LOG(INFO) << "worker " << task << " rejoins in the middle of global step " << start_step
                << " (parts of the job are at " << highest
                << "): it computes the step again from the values of step " << start_step;
    }
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<BatchSource> batches, input->Start(start_step));
  if (input->streamed()) {
    LOG(INFO) << "worker " << task << " input starts at its batch "
              << (spec.sync ? start_step : start_step / spec.num_replicas) << " (global step "
              << start_step << ")";
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ParameterClient> client,
                           MakePsClient(job, layout, spec.replica, context.trace));
  TrainerOptions options = ReplicaTrainerOptions(spec);
  options.trace = context.trace;
  options.rewind = [&input](int64_t global_step) { return input->Start(global_step); };
  if (spec.sync) options.batches_from_step = start_step;
  if (input->streamed()) options.on_input = InputSummaries(context.env, t.job_dir, spec.replica);
  const std::unique_ptr<ProgressiveValidation> progressive = ProgressiveValidationOf(t, *model);
  if (progressive != nullptr) {
    options.progressive = progressive.get();
    options.on_progressive = ProgressiveSummaries(context.env, t.job_dir, spec.replica);
  }
  // Following new files: while it waits for them, a look that gives up
  // within a second or two (a stop request waits for it), through a handle
  // of its own.
  std::unique_ptr<ParameterServers> quick_servers;
  if (t.follow) {
    CallPatience quick;
    quick.retry_budget = absl::Seconds(1);
    quick.deadline = absl::Seconds(2);
    PSTRAIN_ASSIGN_OR_RETURN(quick_servers, MakeParameterServers(job, layout, quick));
  }
  if (quick_servers != nullptr) {
    options.job_over = [&quick_servers, &context] {
      if (context.termination->Received() != 0) return false;  // stopping anyway
      absl::StatusOr<std::vector<PsStatus>> now = quick_servers->Statuses();
      if (!now.ok()) return false;
      for (const PsStatus& s : *now) {
        if (s.job_done || s.shutting_down) return true;
      }
      return false;
    };
  }
  bool stop_requested = false;  // asked only while the job is not done
  options.should_stop = [&stop_requested, &context] {
    stop_requested = context.termination->Received() != 0;
    return stop_requested;
  };
  int64_t step = start_step;
  int64_t stale_pushes = 0;
  while (true) {
    Trainer trainer(model.get(), client.get(), batches.get(), options);
    PSTRAIN_ASSIGN_OR_RETURN(step, trainer.Run());
    LOG(INFO) << "worker " << task << " " << trainer.StepTimeSummary();
    stale_pushes += trainer.stale_pushes();
    if (!trainer.input_ended() || stop_requested) break;
    // Its input ended (num_epochs): the job goes on without it until every
    // replica's has; a rollback below this step has it train from there
    // again.
    const std::string reason =
        absl::StrCat("worker ", task, "'s input ended at global step ", step);
    PSTRAIN_RETURN_IF_ERROR(
        servers->Leave(spec.replica, reason, /*input_ended=*/true, absl::Seconds(10)));
    LOG(INFO) << reason << "; waiting for the other replicas";
    PSTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> again,
                             WaitAfterInputEnded(servers.get(), t, spec.replica, step, context));
    if (!again.has_value()) {
      LOG(INFO) << "worker " << task << " done at global step " << step;
      return absl::OkStatus();
    }
    LOG(WARNING) << "the job was rolled back to global step " << *again << ", below where worker "
                 << task << "'s input ended; training from there again";
    PSTRAIN_ASSIGN_OR_RETURN(batches, input->Start(*again));
    if (spec.sync) options.batches_from_step = *again;
  }
  if (stop_requested) {
    // Preempted: sync steps stop waiting for this replica at once, and the
    // chief saves a checkpoint; the job goes on without it (or ends, if the
    // whole cluster is stopping).
    const std::string reason =
        absl::StrCat("worker ", task, " got signal ", context.termination->Received());
    absl::Status left =
        servers->Leave(spec.replica, reason, /*input_ended=*/false, absl::Seconds(2));
    LOG(INFO) << "worker " << task << " stopping at global step " << step << " (" << reason << ")"
              << (left.ok() ? "" : absl::StrCat("; could not tell the ps: ", left.message()));
    return absl::OkStatus();
  }
  const ClientTraffic traffic = client->traffic();
  LOG(INFO) << "worker " << task << " done at global step " << step << " (" << stale_pushes
            << " stale pushes, " << traffic.bytes_sent / (1 << 20) << " MiB sent, "
            << traffic.bytes_received / (1 << 20) << " MiB received)";
  LogTraffic(task, traffic);
  return absl::OkStatus();
}

}  // namespace pstrain
