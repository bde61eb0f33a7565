// The job's end, apart from training: the final step, checkpoint and
// evaluation, the exports for serving, the completion marker and the ps'
// shutdown, or a stop that leaves the job to resume.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "chief/coordinator_internal.h"
#include "common/status_macros.h"
#include "export/export.h"
#include "glog/logging.h"
#include "io/checkpoint.h"
#include "io/export_format.h"
#include "io/projector.h"
#include "models/model_options.h"

namespace pstrain {
namespace coordinator_internal {

absl::Status Chief::StoppedEarly() {
  job_ended_ = true;
  PSTRAIN_RETURN_IF_ERROR(checkpointer_->background_status());
  if (t_.follow && t_.exports_to_keep > 0) {
    // An online job stops rather than ends: the checkpoint it stopped at
    // is exported, for serving to go on with the newest model.
    LOG(INFO) << "the online job stopped: its last checkpoint is exported";
    if (absl::Status s = ExportCheckpointAt(t_.job_dir); !s.ok()) {
      LOG(WARNING) << "the stopped online job was not exported: " << s;
    }
  }
  LOG(INFO) << "job stopped before train_steps after " << absl::StrFormat("%.1f", Elapsed())
            << " s; restart it with the same config to resume from the last checkpoint";
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PsStatus>> Chief::WaitForFinalStep() {
  const absl::Time give_up =
      absl::Now() + std::max(absl::Seconds(60), 2 * absl::Seconds(t_.sync_timeout));
  std::vector<PsStatus> statuses;
  while (absl::Now() < give_up) {
    PSTRAIN_ASSIGN_OR_RETURN(statuses, servers_->Statuses());
    bool all = AllInputsEnded(statuses, NumTrainingReplicas(job_));
    for (const PsStatus& s : statuses) {
      // (A replicated job's is the failover watch's: it moves them.)
      if (!s.initialized && !s.shutting_down && t_.ps_replication <= 1) {
        // Restarted while the job was ending: a restarted chief restores
        // the last checkpoint and finishes the job.
        return absl::UnavailableError(
            absl::StrCat("ps ", s.ps_task, " lost its parameters while the job was ending"));
      }
    }
    if (all) break;
    all = true;
    for (const PsStatus& s : statuses) {
      all = all && (s.global_step >= StepLimit(t_) || s.shutting_down);
    }
    if (all) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return statuses;
}

absl::Status Chief::ShutdownQuickly(const std::string& reason) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ParameterServers> servers,
                           deps_.connect(layout_, Patient(absl::Seconds(5))));
  return servers->Shutdown(reason);
}

absl::Status Chief::ExportModel(const ParameterView& view, const std::string& final_checkpoint) {
  const std::string base = JoinPath(t_.job_dir, "export");
  std::string dir;
  if (model_->has_sparse()) {
    // Its rows are on the ps: the final checkpoint's rows files hold them.
    PSTRAIN_ASSIGN_OR_RETURN(std::string index,
                             ResolveCheckpointIndex(deps_.env, final_checkpoint));
    PSTRAIN_ASSIGN_OR_RETURN(dir, export_history_.ExportCheckpoint(deps_.env, index, base));
  } else {
    PSTRAIN_ASSIGN_OR_RETURN(
        dir,
        WriteExport(deps_.env, base, *model_, ModelOptionsFromSpec(t_), view.global_step,
                    JobConfigToYaml(job_), absl::MakeConstSpan(view.params, model_->num_params()),
                    absl::MakeConstSpan(view.state, model_->num_state())));
  }
  LOG(INFO) << "Exported the model for serving to " << dir << " (global step " << view.global_step
            << "; pstrain-predict --model_dir=" << t_.job_dir
            << " or pstrain-serve --model_base_path=" << base << ")";
  absl::StatusOr<std::vector<int64_t>> pruned = PruneExports(deps_.env, base, t_.exports_to_keep);
  if (!pruned.ok())
    LOG(WARNING) << "cannot delete old exports in " << base << ": " << pruned.status();
  return absl::OkStatus();
}

absl::Status Chief::ExportCheckpointAt(const std::string& path) {
  const std::string base = JoinPath(t_.job_dir, "export");
  PSTRAIN_ASSIGN_OR_RETURN(const std::string index, ResolveCheckpointIndex(deps_.env, path));
  PSTRAIN_ASSIGN_OR_RETURN(const std::string dir,
                           export_history_.ExportCheckpoint(deps_.env, index, base));
  LOG(INFO) << "Exported the model for serving to " << dir << " (from " << index
            << "; pstrain-serve --model_base_path=" << base << " picks it up)";
  absl::StatusOr<std::vector<int64_t>> pruned = PruneExports(deps_.env, base, t_.exports_to_keep);
  if (!pruned.ok()) {
    LOG(WARNING) << "cannot delete old exports in " << base << ": " << pruned.status();
  }
  return absl::OkStatus();
}

void Chief::WriteProjectorAt(const std::string& path) {
  absl::MutexLock lock(&projector_mu_);
  const absl::Time start = absl::Now();
  absl::StatusOr<ProjectorSummary> written = [&]() -> absl::StatusOr<ProjectorSummary> {
    PSTRAIN_ASSIGN_OR_RETURN(const std::string index, ResolveCheckpointIndex(deps_.env, path));
    ProjectorOptions options;
    options.rows = t_.projector_rows;
    if (row_namer_ != nullptr) {
      options.name_rows = [this](std::vector<RowsToName>* rows) {
        projector_mu_.AssertHeld();
        row_namer_->Name(rows);
      };
    }
    return WriteProjector(deps_.env, index, t_.job_dir, options);
  }();
  if (!written.ok()) {
    LOG(WARNING) << "cannot write the projector's rows (TensorBoard's PROJECTOR tab) from " << path
                 << ": " << written.status();
    return;
  }
  std::vector<std::string> tables;
  for (const ProjectorTable& t : written->tables) {
    tables.push_back(absl::StrCat(t.name, " ", t.rows, " of ", t.rows_in_checkpoint, " rows",
                                  t.named > 0 ? absl::StrCat(" (", t.named, " named)") : ""));
  }
  if (tables.empty()) return;
  LOG(INFO) << "Wrote the projector's rows at global step " << written->global_step << " to "
            << JoinPath(t_.job_dir, kProjectorConfigFile) << ": " << absl::StrJoin(tables, ", ")
            << "; " << written->bytes << " bytes in " << absl::FormatDuration(absl::Now() - start);
}

absl::Status Chief::EndJob() {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<PsStatus> final_statuses, WaitForFinalStep());
  PSTRAIN_ASSIGN_OR_RETURN(ParameterView final_view, servers_->Read());
  // The final checkpoint first, as the Estimator saves before it
  // evaluates: a ps lost during the evaluation then costs no step (the
  // replicas have finished and would not be there to train them again).
  PSTRAIN_ASSIGN_OR_RETURN(std::string final_checkpoint,
                           checkpointer_->SaveNow(absl::ZeroDuration()));
  if (projector_writer_ != nullptr) {
    // The newest rows (on the writer's thread, which may still be writing an
    // earlier checkpoint's).
    projector_writer_->Queue(final_checkpoint);
    projector_writer_->Drain();
  }
  // An evaluation that fails (a ps read) does not cost the job's end.
  const absl::StatusOr<EvalMetrics> evaluated = Evaluate(final_view);
  if (!evaluated.ok()) {
    LOG(WARNING) << "the final evaluation failed: " << evaluated.status()
                 << "; the final checkpoint is saved";
  }
  EvalMetrics metrics;
  metrics.global_step = final_view.global_step;
  if (evaluated.ok()) metrics = *evaluated;
  // Done: at train_steps, or at the end of every replica's input.
  const bool input_ended = AllInputsEnded(final_statuses, NumTrainingReplicas(job_));
  const bool finished = metrics.global_step >= StepLimit(t_) || input_ended;
  if (input_ended) {
    LOG(INFO) << "every replica's input ended (num_epochs " << t_.num_epochs
              << "): the job ends at global step " << metrics.global_step;
  }
  // An online job (follow) stops rather than finishes: its model is
  // exported as it stops, to serve on.
  if ((finished || t_.follow) && t_.exports_to_keep > 0) {
    PSTRAIN_RETURN_IF_ERROR(ExportModel(final_view, final_checkpoint));
  }
  if (finished) {
    if (absl::Status s = summaries_->Finish(final_statuses); !s.ok()) {
      LOG(WARNING) << "cannot write the final training summaries: " << s;
    }
    PSTRAIN_RETURN_IF_ERROR(
        WriteCompletionMarker(deps_.env, t_.job_dir, metrics.global_step,
                              final_checkpoint.substr(final_checkpoint.find_last_of('/') + 1),
                              /*input_ended=*/input_ended && metrics.global_step < StepLimit(t_)));
  } else {
    LOG(WARNING) << "the job ended at global step " << metrics.global_step
                 << " before its end (train_steps " << t_.train_steps << ")"
                 << "; not marked complete, a restart resumes it";
  }
  const std::string reason = absl::StrCat("training finished at global step ", metrics.global_step);
  if (checkpointer_ != nullptr) checkpointer_->SetRollBackListener(nullptr);
  failover_watch_.reset();  // the ps leave now: no failover
  if (!finished) {
    PSTRAIN_RETURN_IF_ERROR(servers_->Shutdown(reason));
  } else if (absl::Status s = ShutdownQuickly(reason); !s.ok()) {
    // The job is complete: a ps that is gone (or restarting) finds
    // COMPLETED and exits by itself.
    LOG(WARNING) << "the job is complete, but not every ps was told: " << s.message();
  }
  job_ended_ = true;
  LOG(INFO) << "job finished: global step " << metrics.global_step
            << (!evaluated.ok()      ? std::string(", not evaluated")
                : metrics.regression ? absl::StrFormat(", rmse %.5f", metrics.rmse)
                                     : absl::StrFormat(", accuracy %.4f", metrics.accuracy))
            << ", " << absl::StrFormat("%.1f", Elapsed()) << " s";
  return absl::OkStatus();
}

}  // namespace coordinator_internal
}  // namespace pstrain
