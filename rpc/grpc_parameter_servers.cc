#include "rpc/grpc_parameter_servers.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "rpc/ps_proto.h"

namespace pstrain {
namespace {

using Done = std::function<void(grpc::Status)>;

// Sends requests[i] to ps task i for every task at once (one broadcast) and
// returns the answers in task order. `method(async_stub, context, request,
// response, done)` starts one call.
template <typename Response, typename Request, typename Method>
absl::StatusOr<std::vector<Response>> ToEveryTask(
    const PsConnections& connections, const char* what, const std::vector<Request>& requests,
    Method method, std::optional<absl::Duration> budget = std::nullopt) {
  std::vector<Response> responses(requests.size());
  PSTRAIN_RETURN_IF_ERROR(connections.Broadcast(
      static_cast<int>(requests.size()), what, [&](int i) { return connections.TaskName(i); },
      [&](int i, grpc::ClientContext* ctx, Done done) {
        method(connections.stub(i)->async(), ctx, &requests[i], &responses[i], std::move(done));
      },
      budget));
  return responses;
}

// The same request to every task.
template <typename Request>
std::vector<Request> Copies(int n, const Request& request) {
  return std::vector<Request>(n, request);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcParameterServers>> GrpcParameterServers::Create(
    const std::vector<std::string>& addresses, const ShardLayout& layout,
    absl::Duration rpc_timeout, absl::Duration retry_budget, const WireSecurity& wire, int copies,
    absl::Duration failover_after) {
  if (addresses.empty() || addresses.size() != layout.ranges.size() || layout.chunks.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the layout has ", layout.ranges.size(),
                                                   " ps ranges for ", addresses.size(),
                                                   " ps addresses"));
  }
  return std::unique_ptr<GrpcParameterServers>(new GrpcParameterServers(
      addresses, layout, rpc_timeout, retry_budget, wire, copies, failover_after));
}

GrpcParameterServers::GrpcParameterServers(const std::vector<std::string>& addresses,
                                           const ShardLayout& layout, absl::Duration rpc_timeout,
                                           absl::Duration retry_budget, const WireSecurity& wire,
                                           int copies, absl::Duration failover_after)
    : layout_(layout),
      connections_(addresses, rpc_timeout, retry_budget, wire, copies, failover_after),
      rows_(&connections_, layout.tables, /*replica=*/-1),
      params_(layout.num_params),
      state_(layout.num_state) {}

template <typename Response, typename Request, typename Method>
absl::StatusOr<std::vector<Response>> GrpcParameterServers::ToEveryOwner(
    const char* what, std::vector<Request> requests, Method method,
    std::optional<absl::Duration> budget) {
  if (connections_.copies() <= 1) {
    return ToEveryTask<Response>(connections_, what, requests, method, budget);
  }
  // Requests about the owner's chunks say whose (Status, Save); the others
  // (Shutdown, Leave) are for the whole task that serves them.
  if constexpr (requires(Request r) { r.set_owner(0); }) {
    for (size_t i = 0; i < requests.size(); ++i) requests[i].set_owner(static_cast<int>(i));
  }
  std::vector<Response> responses(requests.size());
  PSTRAIN_RETURN_IF_ERROR(connections_.Broadcast(
      static_cast<int>(requests.size()), what,
      [&](int i) {
        const int at = connections_.Serving(i);
        return at == i ? connections_.TaskName(i)
                       : absl::StrCat(connections_.TaskName(at), " (for ps ", i, ")");
      },
      [&](int i, grpc::ClientContext* ctx, Done done) {
        method(connections_.stub(connections_.Serving(i))->async(), ctx, &requests[i],
               &responses[i], std::move(done));
      },
      budget, [](int i) { return i; }));
  return responses;
}

absl::StatusOr<std::vector<std::string>> GrpcParameterServers::MissingTasks(bool initialized) {
  const int n = size();
  std::vector<int> all(n);
  for (int i = 0; i < n; ++i) all[i] = i;
  std::vector<StatusResponse> responses(n);
  // A replicated job asks for each task's chunks where they are served.
  const bool routed = connections_.copies() > 1;
  std::vector<StatusRequest> requests(n);
  if (routed) {
    for (int i = 0; i < n; ++i) requests[i].set_owner(i);
  }
  const std::vector<grpc::Status> results =
      connections_.CallOnce(all, absl::Seconds(5), [&](int i, grpc::ClientContext* ctx, Done done) {
        connections_.stub(connections_.Serving(i))
            ->async()
            ->Status(ctx, &requests[i], &responses[i], std::move(done));
      });
  std::vector<std::string> missing;
  for (int i = 0; i < n; ++i) {
    // Not there, or not initialized: a failover may have moved them.
    if (routed && (!results[i].ok() || (initialized && !responses[i].initialized()))) {
      connections_.Reroute(i);
    }
    if (!results[i].ok()) {
      missing.push_back(
          absl::StrCat(connections_.TaskName(i), " (", results[i].error_message(), ")"));
    } else if (responses[i].ps_task() != i) {
      return absl::FailedPreconditionError(
          absl::StrCat("the ps at ", connections_.address(i), " is task ", responses[i].ps_task(),
                       ", expected task ", i, "; check the order of the cluster's ps addresses"));
    } else if (initialized && !responses[i].initialized()) {
      missing.push_back(absl::StrCat("ps ", i, " (not initialized yet)"));
    }
  }
  return missing;
}

absl::Status GrpcParameterServers::WaitReady(absl::Duration timeout, bool initialized,
                                             const TerminationNotice* stop) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Time next_log = absl::Now() + absl::Seconds(5);
  while (true) {
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> missing, MissingTasks(initialized));
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
    if (stop != nullptr ? stop->WaitFor(absl::Milliseconds(200))
                        : (absl::SleepFor(absl::Milliseconds(200)), false)) {
      return absl::CancelledError("stop requested while waiting for the parameter servers");
    }
  }
}

absl::StatusOr<std::vector<PsStatus>> GrpcParameterServers::Statuses() {
  PSTRAIN_ASSIGN_OR_RETURN(
      std::vector<StatusResponse> responses,
      ToEveryOwner<StatusResponse>("Status", Copies(size(), StatusRequest()),
                                   [](auto* stub, auto... args) { stub->Status(args...); }));
  // A replicated job: a task that answers without parameters restarted; its
  // chunks may be served elsewhere already (a failover): ask there.
  bool moved = false;
  for (int i = 0; i < size(); ++i) {
    if (connections_.copies() > 1 && !responses[i].initialized()) {
      moved = connections_.Reroute(i) || moved;
    }
  }
  if (moved) {
    PSTRAIN_ASSIGN_OR_RETURN(
        responses,
        ToEveryOwner<StatusResponse>("Status", Copies(size(), StatusRequest()),
                                     [](auto* stub, auto... args) { stub->Status(args...); }));
  }
  std::vector<PsStatus> statuses;
  for (const StatusResponse& r : responses) statuses.push_back(FromProto(r));
  return statuses;
}

absl::Status GrpcParameterServers::Initialize(const std::string& model, const float* params,
                                              const float* state, int64_t global_step) {
  const auto& chunks = layout_.chunks;
  const int n = static_cast<int>(chunks.size());
  const int64_t generation = NewGeneration();
  std::vector<InitializeRequest> requests(n);
  for (int c = 0; c < n; ++c) {
    requests[c].set_chunk(c);
    requests[c].set_model(model);
    requests[c].set_num_params(layout_.num_params);
    requests[c].set_params(reinterpret_cast<const char*>(params + chunks[c].begin),
                           (chunks[c].end - chunks[c].begin) * sizeof(float));
    if (chunks[c].state > 0) {
      requests[c].set_state(reinterpret_cast<const char*>(state), chunks[c].state * sizeof(float));
    }
    requests[c].set_global_step(global_step);
    requests[c].set_generation(generation);
  }
  // Every copy of a chunk (a replicated job) gets the same values and
  // generation: call k is chunk sends[k].first to task sends[k].second.
  std::vector<std::pair<int, int>> sends;
  for (int c = 0; c < n; ++c) {
    for (int task : ReplicaTasks(chunks[c].ps, size(), connections_.copies())) {
      sends.emplace_back(c, task);
    }
  }
  std::vector<InitializeResponse> answers(sends.size());
  return connections_.Broadcast(
      static_cast<int>(sends.size()), "Initialize",
      [&](int k) { return absl::StrCat("ps ", sends[k].second, " (chunk ", sends[k].first, ")"); },
      [&](int k, grpc::ClientContext* ctx, Done done) {
        connections_.stub(sends[k].second)
            ->async()
            ->Initialize(ctx, &requests[sends[k].first], &answers[k], std::move(done));
      });
}

absl::Status GrpcParameterServers::Shutdown(const std::string& reason) {
  ShutdownRequest request;
  request.set_reason(reason);
  // Every task, each where it is: a restarted one that serves nothing (a
  // replicated job after a failover) must end too.
  return ToEveryTask<ShutdownResponse>(connections_, "Shutdown", Copies(size(), request),
                                       [](auto* stub, auto... args) { stub->Shutdown(args...); })
      .status();
}

absl::StatusOr<std::vector<ShardSaved>> GrpcParameterServers::Save(int64_t step,
                                                                   int64_t global_step,
                                                                   absl::Duration wait) {
  SaveRequest request;
  request.set_step(step);
  request.set_global_step(global_step);
  request.set_wait_ms(absl::ToInt64Milliseconds(wait));
  PSTRAIN_ASSIGN_OR_RETURN(
      std::vector<SaveResponse> responses,
      ToEveryOwner<SaveResponse>("Save", Copies(size(), request),
                                 [](auto* stub, auto... args) { stub->Save(args...); }));
  std::vector<ShardSaved> saved;
  for (const SaveResponse& r : responses) saved.push_back(FromProto(r));
  return saved;
}

absl::StatusOr<int64_t> GrpcParameterServers::Restore(const std::string& model, int64_t step) {
  RestoreRequest request;
  request.set_step(step);
  request.set_model(model);
  request.set_num_params(layout_.num_params);
  request.set_generation(NewGeneration());
  PSTRAIN_ASSIGN_OR_RETURN(
      std::vector<RestoreResponse> responses,
      ToEveryTask<RestoreResponse>(connections_, "Restore", Copies(size(), request),
                                   [](auto* stub, auto... args) { stub->Restore(args...); }));
  return responses[0].global_step();
}

absl::Status GrpcParameterServers::Leave(int replica, const std::string& reason, bool input_ended,
                                         absl::Duration retry_budget) {
  LeaveRequest request;
  request.set_replica(replica);
  request.set_reason(reason);
  request.set_input_ended(input_ended);
  return ToEveryOwner<LeaveResponse>(
             "Leave", Copies(size(), request),
             [](auto* stub, auto... args) { stub->Leave(args...); }, retry_budget)
      .status();
}

absl::StatusOr<ParameterView> GrpcParameterServers::Read() {
  std::vector<int64_t> steps;
  bool job_done = false;
  PSTRAIN_RETURN_IF_ERROR(
      connections_.PullChunks(layout_, params_.data(), state_.data(), &steps, &job_done).status());
  ParameterView view;
  view.params = params_.data();
  view.state = state_.data();
  view.global_step = steps[0];
  view.job_done = job_done;
  if (!layout_.tables.empty()) view.rows = &rows_;
  return view;
}

std::vector<absl::StatusOr<PsStatus>> GrpcParameterServers::Probe(
    absl::Duration deadline, const std::vector<int64_t>& confirm_drops) {
  const int n = size();
  std::vector<int> all(n);
  for (int i = 0; i < n; ++i) all[i] = i;
  std::vector<StatusRequest> requests(n);
  for (int i = 0; i < n && i < static_cast<int>(confirm_drops.size()); ++i) {
    requests[i].set_confirm_drops(confirm_drops[i]);
  }
  std::vector<StatusResponse> responses(n);
  const std::vector<grpc::Status> results =
      connections_.CallOnce(all, deadline, [&](int i, grpc::ClientContext* ctx, Done done) {
        connections_.stub(i)->async()->Status(ctx, &requests[i], &responses[i], std::move(done));
      });
  std::vector<absl::StatusOr<PsStatus>> statuses;
  for (int i = 0; i < n; ++i) {
    if (results[i].ok()) {
      statuses.push_back(FromProto(responses[i]));
    } else {
      statuses.push_back(
          absl::Status(static_cast<absl::StatusCode>(results[i].error_code()),
                       absl::StrCat(connections_.TaskName(i), ": ", results[i].error_message())));
    }
  }
  return statuses;
}

absl::Status GrpcParameterServers::Promote(int task, int owner, int64_t epoch,
                                           const std::vector<int>& backups,
                                           absl::Duration deadline) {
  if (task < 0 || task >= size()) {
    return absl::InvalidArgumentError(absl::StrCat("no ps task ", task, " to promote"));
  }
  PromoteRequest request;
  request.set_owner(owner);
  request.set_epoch(epoch);
  for (int b : backups) request.add_backups(b);
  PromoteResponse response;
  const std::vector<grpc::Status> results =
      connections_.CallOnce({task}, deadline, [&](int i, grpc::ClientContext* ctx, Done done) {
        connections_.stub(i)->async()->Promote(ctx, &request, &response, std::move(done));
      });
  if (results[0].ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(results[0].error_code()),
                      absl::StrCat("Promote on ", connections_.TaskName(task), " (for ps ", owner,
                                   "): ", results[0].error_message()));
}

absl::Status GrpcParameterServers::Fence(int task, int64_t epoch, absl::Duration deadline) {
  if (task < 0 || task >= size()) {
    return absl::InvalidArgumentError(absl::StrCat("no ps task ", task, " to fence"));
  }
  PromoteRequest request;
  request.set_owner(task);
  request.set_epoch(epoch);
  request.set_fence(true);
  PromoteResponse response;
  const std::vector<grpc::Status> results =
      connections_.CallOnce({task}, deadline, [&](int i, grpc::ClientContext* ctx, Done done) {
        connections_.stub(i)->async()->Promote(ctx, &request, &response, std::move(done));
      });
  if (results[0].ok()) return absl::OkStatus();
  return absl::Status(
      static_cast<absl::StatusCode>(results[0].error_code()),
      absl::StrCat("Fence of ", connections_.TaskName(task), ": ", results[0].error_message()));
}

absl::Status GrpcParameterServers::AddBackup(int server, int owner, int task,
                                             absl::Duration deadline) {
  if (server < 0 || server >= size()) {
    return absl::InvalidArgumentError(absl::StrCat("no ps task ", server, " to send a copy"));
  }
  AddBackupRequest request;
  request.set_owner(owner);
  request.set_task(task);
  // The ps answers within the request's timeout; the call waits a little
  // longer for that answer.
  request.set_timeout_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline)));
  AddBackupResponse response;
  const std::vector<grpc::Status> results = connections_.CallOnce(
      {server}, deadline + absl::Seconds(5), [&](int i, grpc::ClientContext* ctx, Done done) {
        connections_.stub(i)->async()->AddBackup(ctx, &request, &response, std::move(done));
      });
  if (results[0].ok()) return absl::OkStatus();
  return absl::Status(
      static_cast<absl::StatusCode>(results[0].error_code()),
      absl::StrCat("AddBackup on ", connections_.TaskName(server), " (ps ", task,
                   " rejoins for the chunks of ps ", owner, "): ", results[0].error_message()));
}

}  // namespace pstrain
