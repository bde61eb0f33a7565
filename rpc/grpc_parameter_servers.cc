#include "rpc/grpc_parameter_servers.h"

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
    absl::Duration rpc_timeout, absl::Duration retry_budget, const WireSecurity& wire) {
  if (addresses.empty() || addresses.size() != layout.ranges.size() || layout.chunks.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the layout has ", layout.ranges.size(),
                                                   " ps ranges for ", addresses.size(),
                                                   " ps addresses"));
  }
  return std::unique_ptr<GrpcParameterServers>(
      new GrpcParameterServers(addresses, layout, rpc_timeout, retry_budget, wire));
}

GrpcParameterServers::GrpcParameterServers(const std::vector<std::string>& addresses,
                                           const ShardLayout& layout, absl::Duration rpc_timeout,
                                           absl::Duration retry_budget, const WireSecurity& wire)
    : layout_(layout),
      connections_(addresses, rpc_timeout, retry_budget, wire),
      rows_(&connections_, layout.tables, /*replica=*/-1),
      params_(layout.num_params),
      state_(layout.num_state) {}

absl::StatusOr<std::vector<std::string>> GrpcParameterServers::MissingTasks(bool initialized) {
  const int n = size();
  std::vector<int> all(n);
  for (int i = 0; i < n; ++i) all[i] = i;
  std::vector<StatusResponse> responses(n);
  static const StatusRequest kRequest;
  const std::vector<grpc::Status> results =
      connections_.CallOnce(all, absl::Seconds(5), [&](int i, grpc::ClientContext* ctx, Done done) {
        connections_.stub(i)->async()->Status(ctx, &kRequest, &responses[i], std::move(done));
      });
  std::vector<std::string> missing;
  for (int i = 0; i < n; ++i) {
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
      ToEveryTask<StatusResponse>(connections_, "Status", Copies(size(), StatusRequest()),
                                  [](auto* stub, auto... args) { stub->Status(args...); }));
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
  std::vector<InitializeResponse> responses(n);
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
  return connections_.Broadcast(
      n, "Initialize", [&](int c) { return absl::StrCat("ps ", chunks[c].ps, " (chunk ", c, ")"); },
      [&](int c, grpc::ClientContext* ctx, Done done) {
        connections_.stub(chunks[c].ps)
            ->async()
            ->Initialize(ctx, &requests[c], &responses[c], std::move(done));
      });
}

absl::Status GrpcParameterServers::Shutdown(const std::string& reason) {
  ShutdownRequest request;
  request.set_reason(reason);
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
      ToEveryTask<SaveResponse>(connections_, "Save", Copies(size(), request),
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
  return ToEveryTask<LeaveResponse>(
             connections_, "Leave", Copies(size(), request),
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

}  // namespace pstrain
