#include "ps_server/ps_runner.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "io/checkpoint.h"
#include "models/model_options.h"
#include "ps/ps_task.h"
#include "rpc/ps_server.h"
#include "rpc/replica_links.h"

namespace pstrain {
namespace {

// Serves until the chief ends the job (true) or a stop request's grace
// period runs out or comes before the job started (false). SIGTERM (a
// preemption notice) does not end the job here: the ps keeps serving while
// the chief saves a checkpoint, which it starts when Status says this ps is
// going, then ends the job.
bool ServeUntilShutdown(PsTask* task, const TrainingSpec& t, const TerminationNotice* stop) {
  const int index = task->identity().ps_index;
  std::optional<absl::Time> give_up;
  while (!task->WaitForShutdown(absl::Milliseconds(100))) {
    if (!give_up.has_value() && stop->Received() != 0) {
      const absl::Duration grace = absl::Seconds(t.shutdown_grace_secs);
      if (!task->Status().initialized) {
        LOG(INFO) << "ps " << index << ": stop requested before the job started; exiting";
        return false;
      }
      LOG(INFO) << "ps " << index << ": stop requested (signal " << stop->Received()
                << "); serving up to " << absl::FormatDuration(grace)
                << " more so the chief can save a checkpoint";
      task->SetPreempting();
      give_up = absl::Now() + grace;
    }
    if (give_up.has_value() && absl::Now() >= *give_up) {
      LOG(WARNING) << "ps " << index << ": the chief did not end the job within the grace "
                   << "period; exiting without it (the last checkpoint stays usable)";
      return false;
    }
  }
  return true;
}

// Lets every replica still running learn that the job is over before the
// port closes, so none of them waits on a ps that is gone; and the chief's
// polling loops (every 200 ms) see the end in a Status answer. A job that
// never started (nobody initialized the ps) has no replica to wait for, and
// a stop request ends the wait.
void Linger(const PsTask& task, const TerminationNotice* stop) {
  const absl::Time shutdown_at = absl::Now();
  // A task that serves nothing (restarted and empty, or a replicated task
  // that only follows) has no replica to answer.
  const absl::Time linger_until =
      shutdown_at +
      (task.Status().initialized && task.serves_any() ? absl::Seconds(5) : absl::Seconds(1));
  while ((task.replicas_told_done() < task.total_replicas() ||
          absl::Now() < shutdown_at + absl::Seconds(1)) &&
         absl::Now() < linger_until) {
    if (stop->WaitFor(absl::Milliseconds(50))) return;
  }
}

}  // namespace

absl::Status RunParameterServer(const RoleConfig& role, const RoleContext& context) {
  const JobConfig& job = role.job;
  const TrainingSpec& t = job.training;
  const int index = role.task.task_index;
  if (JobAlreadyFinished(context.env, t.job_dir, t.train_steps)) return absl::OkStatus();
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, BuildJobModel(t));
  // A replicated job (issue 55): a primary's updates reach its backups over
  // these links; one that does not answer within failover_secs leaves the
  // primary's stream, so no answer waits longer for it.
  std::unique_ptr<ReplicaLinks> links;
  PsReplication replication;
  replication.copies = t.ps_replication;
  if (t.ps_replication > 1) {
    links = MakeGrpcReplicaLinks(job.cluster.ps, absl::Seconds(t.failover_secs), job.wire);
    replication.links = links.get();
  }
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<PsTask> task,
      PsTask::Create(job, *model, index, context.env, context.trace, replication));
  PSTRAIN_ASSIGN_OR_RETURN(std::string address, job.cluster.address("ps", index));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<GrpcPsServer> server,
                           GrpcPsServer::Start(task.get(), *model, index, address, job.wire));
  const PsStatus status = task->Status();
  const bool sync = t.update == UpdateMode::kSync;
  LOG(INFO) << "ps " << index << " of " << job.cluster.ps.size() << " serving " << t.model
            << " parameters [" << status.begin << ", " << status.end << ") in "
            << task->shards().size() << " chunks on " << address << " (" << UpdateModeName(t.update)
            << (sync ? absl::StrCat(", ", EffectiveReplicasToAggregate(job), " of ",
                                    EffectiveTotalReplicas(job), " replicas per step")
                     : "")
            << (t.update == UpdateMode::kSsp ? absl::StrCat(", staleness ", t.staleness) : "")
            << "), " << (job.wire.tls ? "mutual TLS" : "plaintext")
            << (job.wire.token.empty() ? ", no job token" : ", job token checked")
            << (t.ps_replication > 1
                    ? absl::StrCat(", ", t.ps_replication, " copies of every chunk (backups of ps ",
                                   absl::StrJoin(task->backup_owners(), ", "), ")")
                    : "");
  if (!ServeUntilShutdown(task.get(), t, context.termination)) {
    task->Shutdown("the stop request's grace period ran out");  // answers waiting pulls
    server->Shutdown(absl::Seconds(1));
    return absl::OkStatus();
  }
  Linger(*task, context.termination);
  const StepStats stats = task->TotalStats();
  LOG(INFO) << "ps " << index << " done at global step " << stats.global_step << ": "
            << stats.applied_updates << " updates applied, " << stats.stale_pushes
            << " stale pushes dropped, " << stats.timed_out_steps << " sync steps timed out"
            << (t.update == UpdateMode::kSsp
                    ? absl::StrCat(", ", stats.ssp_waits, " pushes waited for slower replicas")
                    : "");
  if (const SparseShard* sparse = task->sparse(); sparse != nullptr) {
    const SparseShard::Stats rows = sparse->GetStats();
    int64_t held = 0;
    for (const auto& table : sparse->tables()) held += table->size();
    LOG(INFO) << "ps " << index << " embedding rows: " << held << " held in "
              << sparse->tables().size() << " tables; " << rows.rows_pulled << " pulled, "
              << rows.rows_pushed << " pushed, " << rows.stale_pushes << " stale pushes, "
              << rows.evicted << " evicted";
  }
  server->Shutdown(absl::Seconds(2));
  return absl::OkStatus();
}

}  // namespace pstrain
