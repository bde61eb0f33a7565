#include "ps/in_process_parameter_servers.h"

#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {

InProcessParameterServers::InProcessParameterServers(std::vector<PsTask*> tasks,
                                                     const ShardLayout& layout)
    : tasks_(std::move(tasks)),
      layout_(layout),
      params_(layout.num_params),
      state_(layout.num_state) {}

absl::Status InProcessParameterServers::WaitReady(absl::Duration timeout, bool initialized,
                                                  const TerminationNotice* stop) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int missing = -1;
    for (PsTask* task : tasks_) {
      if (initialized && !task->Status().initialized) {
        missing = task->identity().ps_index;
        break;
      }
    }
    if (missing < 0) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("gave up waiting ", absl::FormatDuration(timeout),
                       " for the parameter servers: ps ", missing, " (not initialized yet)"));
    }
    if (stop != nullptr ? stop->WaitFor(absl::Milliseconds(20))
                        : (absl::SleepFor(absl::Milliseconds(20)), false)) {
      return absl::CancelledError("stop requested while waiting for the parameter servers");
    }
  }
}

absl::StatusOr<std::vector<PsStatus>> InProcessParameterServers::Statuses() {
  std::vector<PsStatus> statuses;
  for (PsTask* task : tasks_) statuses.push_back(task->Status());
  return statuses;
}

absl::Status InProcessParameterServers::Initialize(const std::string& model, const float* params,
                                                   const float* state, int64_t global_step) {
  const int64_t generation = NewGeneration();
  for (size_t c = 0; c < layout_.chunks.size(); ++c) {
    const Chunk& chunk = layout_.chunks[c];
    PSTRAIN_RETURN_IF_ERROR(tasks_[chunk.ps]->Initialize(
        static_cast<int>(c), model, layout_.num_params,
        absl::Span<const float>(params + chunk.begin, chunk.end - chunk.begin),
        absl::Span<const float>(state, chunk.state), global_step, generation));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ShardSaved>> InProcessParameterServers::Save(int64_t step,
                                                                        int64_t global_step,
                                                                        absl::Duration wait) {
  std::vector<absl::StatusOr<ShardSaved>> results(tasks_.size(), absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = tasks_[i]->Save(step, global_step, wait); });
  }
  for (std::thread& t : threads) t.join();
  std::vector<ShardSaved> saved;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) {
      return absl::Status(
          results[i].status().code(),
          absl::StrCat("Save to ps ", i, " failed: ", results[i].status().message()));
    }
    saved.push_back(*std::move(results[i]));
  }
  return saved;
}

absl::StatusOr<int64_t> InProcessParameterServers::Restore(const std::string& model, int64_t step) {
  int64_t restored_step = 0;
  const int64_t generation = NewGeneration();
  for (size_t i = 0; i < tasks_.size(); ++i) {
    absl::StatusOr<int64_t> restored =
        tasks_[i]->Restore(model, layout_.num_params, step, generation);
    if (!restored.ok()) {
      return absl::Status(
          restored.status().code(),
          absl::StrCat("Restore to ps ", i, " failed: ", restored.status().message()));
    }
    if (i == 0) restored_step = *restored;
  }
  return restored_step;
}

absl::Status InProcessParameterServers::Shutdown(const std::string& reason) {
  for (PsTask* task : tasks_) task->Shutdown(reason);
  return absl::OkStatus();
}

absl::Status InProcessParameterServers::Leave(int replica, const std::string& reason,
                                              bool input_ended, absl::Duration) {
  for (PsTask* task : tasks_) PSTRAIN_RETURN_IF_ERROR(task->Leave(replica, reason, input_ended));
  return absl::OkStatus();
}

absl::StatusOr<ParameterView> InProcessParameterServers::Read() {
  ParameterView view;
  std::string params, state;
  for (size_t c = 0; c < layout_.chunks.size(); ++c) {
    const Chunk& chunk = layout_.chunks[c];
    PSTRAIN_ASSIGN_OR_RETURN(PushResult r,
                             tasks_[chunk.ps]->Read(static_cast<int>(c), &params, &state));
    std::memcpy(params_.data() + chunk.begin, params.data(), params.size());
    if (!state.empty()) std::memcpy(state_.data(), state.data(), state.size());
    if (c == 0) view.global_step = r.global_step;
    view.job_done = view.job_done || r.job_done;
  }
  view.params = params_.data();
  view.state = state_.data();
  return view;
}

std::vector<absl::StatusOr<PsStatus>> InProcessParameterServers::Probe(
    absl::Duration /*deadline*/, const std::vector<int64_t>& confirm_drops) {
  std::vector<absl::StatusOr<PsStatus>> statuses;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    if (i < confirm_drops.size() && confirm_drops[i] > 0) tasks_[i]->ConfirmDrops(confirm_drops[i]);
    statuses.push_back(tasks_[i]->Status());
  }
  return statuses;
}

absl::Status InProcessParameterServers::Promote(int task, int owner, int64_t epoch,
                                                const std::vector<int>& backups,
                                                absl::Duration /*deadline*/) {
  if (task < 0 || task >= size()) {
    return absl::InvalidArgumentError(absl::StrCat("no ps task ", task, " to promote"));
  }
  return tasks_[task]->Promote(owner, epoch, backups);
}

absl::Status InProcessParameterServers::Fence(int task, int64_t epoch,
                                              absl::Duration /*deadline*/) {
  if (task < 0 || task >= size()) {
    return absl::InvalidArgumentError(absl::StrCat("no ps task ", task, " to fence"));
  }
  return tasks_[task]->Fence(epoch);
}

absl::Status InProcessParameterServers::AddBackup(int server, int owner, int task,
                                                  absl::Duration deadline) {
  if (server < 0 || server >= size()) {
    return absl::InvalidArgumentError(absl::StrCat("no ps task ", server, " to send a copy"));
  }
  return tasks_[server]->AddBackup(owner, task, deadline);
}

}  // namespace pstrain
