// The chief's entry points and the order of its run; the steps of each
// phase are in coordinator_startup.cc, coordinator_training.cc and
// coordinator_end.cc (coordinator_internal.h).
#include "chief/coordinator.h"

#include "absl/strings/str_cat.h"
#include "chief/coordinator_internal.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "input/replica_spec.h"
#include "io/checkpoint.h"
#include "models/model_options.h"
#include "rpc/job_clients.h"

namespace pstrain {
namespace coordinator_internal {

CallPatience Patient(absl::Duration budget) {
  CallPatience patience;
  patience.retry_budget = budget;
  return patience;
}

absl::Status Chief::Run() {
  PSTRAIN_RETURN_IF_ERROR(Prepare());
  PSTRAIN_ASSIGN_OR_RETURN(bool started, WaitForParameterServers());
  if (!started) return absl::OkStatus();
  PSTRAIN_RETURN_IF_ERROR(StartJob());
  if (replica_ >= 0) {
    PSTRAIN_RETURN_IF_ERROR(Train());
  } else {
    PSTRAIN_RETURN_IF_ERROR(FollowTraining().status());
  }
  checkpointer_->Stop();
  follower_.reset();
  if (checkpointer_->stopped_early()) {
    if (checkpointer_ != nullptr) checkpointer_->SetRollBackListener(nullptr);
    failover_watch_.reset();  // the ps are leaving
    return StoppedEarly();
  }
  // (The failover watch goes on through the final step, checkpoint and
  // evaluation; EndJob stops it before the ps are told to leave.)
  return EndJob();
}

void Chief::EndJobAfterFailure(const absl::Status& failure) {
  if (layout_.chunks.empty() || job_ended_ || !may_have_reached_ps_) return;
  LOG(ERROR) << "the chief failed: " << failure.message()
             << "; telling the parameter servers to stop";
  CallPatience quick;
  quick.retry_budget = absl::Seconds(1);
  quick.deadline = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<ParameterServers>> servers = deps_.connect(layout_, quick);
  absl::Status s = servers.status();
  if (s.ok()) s = (*servers)->Shutdown(absl::StrCat("the chief failed: ", failure.message()));
  if (!s.ok()) LOG(WARNING) << "could not tell the parameter servers to stop: " << s.message();
}

double Chief::Elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - job_start_).count();
}

}  // namespace coordinator_internal

using coordinator_internal::Chief;

absl::Status RunChiefWith(const JobConfig& given, int replica, const ChiefDependencies& deps) {
  // The model's spec written out in the job the chief keeps, so that the
  // checkpoints and exports, which carry the job's YAML, hold the model.
  JobConfig job = given;
  PSTRAIN_RETURN_IF_ERROR(ResolveJobModel(&job.training));
  if (JobAlreadyFinished(deps.env, job.training.job_dir, job.training.train_steps))
    return absl::OkStatus();
  Chief chief(job, replica, deps);
  absl::Status status = chief.Run();
  // Unavailable: a ps was away past the retry budget or lost its state; the
  // chief exits to be restarted (kExitRestartable) and leaves the job running.
  if (!status.ok() && !absl::IsUnavailable(status)) chief.EndJobAfterFailure(status);
  return status;
}

absl::Status RunChief(const RoleConfig& role, const RoleContext& context) {
  const JobConfig& job = role.job;
  ChiefDependencies deps;
  deps.env = context.env;
  deps.termination = context.termination;
  deps.trace = context.trace;
  deps.connect = [&job](const ShardLayout& layout, const CallPatience& patience) {
    return MakeParameterServers(job, layout, patience);
  };
  deps.training_client = [&job, &context](const ShardLayout& layout, int replica) {
    return MakePsClient(job, layout, replica, context.trace);
  };
  return RunChiefWith(job, ReplicaId(job, role.task), deps);
}

}  // namespace pstrain
