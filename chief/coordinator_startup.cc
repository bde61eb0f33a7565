// The chief's startup, apart from its run: everything that can fail on bad
// input fails here, before the ps are told to start; then restore or
// initialize, and the checkpoint thread.
#include "absl/strings/str_cat.h"
#include "chief/coordinator_internal.h"
#include "chief/job_monitor.h"
#include "common/status_macros.h"
#include "data/formats/csv_format.h"
#include "data/stream/file_list.h"
#include "data/stream/file_pattern.h"
#include "export/export.h"
#include "glog/logging.h"
#include "input/job_input.h"
#include "input/model_input.h"
#include "input/replica_spec.h"
#include "io/event_writer.h"
#include "models/model_options.h"
#include "worker/replica.h"

namespace pstrain {
namespace coordinator_internal {

absl::Status Chief::Prepare() {
  PSTRAIN_ASSIGN_OR_RETURN(model_, BuildJobModel(t_));
  layout_ = ComputeShardLayout(*model_, static_cast<int>(job_.cluster.ps.size()));
  PSTRAIN_ASSIGN_OR_RETURN(servers_, deps_.connect(layout_, CallPatience()));
  PSTRAIN_RETURN_IF_ERROR(deps_.env->CreateDirs(t_.job_dir));
  if (!t_.csv_schema.empty()) {
    // The schema travels with the job: exports keep this copy, which the
    // chief and pstrain-export find in the job dir (JobCsvSchemaPath).
    PSTRAIN_ASSIGN_OR_RETURN(const std::string text, deps_.env->ReadFile(t_.csv_schema));
    PSTRAIN_ASSIGN_OR_RETURN(CsvSchema schema, ParseCsvSchemaText(text, t_.csv_schema));
    PSTRAIN_RETURN_IF_ERROR(deps_.env->WriteFileAtomic(JobCsvSchemaPath(t_.job_dir), text));
    if (model_->has_sparse() && t_.projector_rows > 0 && !t_.train_files.empty()) {
      // The projector's rows named by the CSV text their ids came from.
      absl::StatusOr<std::vector<std::string>> files =
          ExpandFilePatterns(deps_.env, t_.train_files, "training.train_files");
      if (files.ok()) {
        row_namer_ = std::make_unique<CsvRowNamer>(deps_.env, std::move(schema), *files);
      }
    }
  }
  PSTRAIN_ASSIGN_OR_RETURN(eval_, EvalInput::Open(deps_.env, t_, *model_));
  if (t_.follow) {
    // The replicas read the list of files found so far; the chief keeps
    // it up to date while the job trains (StartJob).
    const std::string list = FileListPath(t_.job_dir);
    PSTRAIN_RETURN_IF_ERROR(deps_.env->CreateDirs(JoinPath(t_.job_dir, "input")));
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t added, UpdateFileList(deps_.env, list, t_.train_files));
    PSTRAIN_ASSIGN_OR_RETURN(const std::vector<std::string> files, ReadFileList(deps_.env, list));
    LOG(INFO) << "chief: following " << t_.train_files << ": " << files.size() << " files ("
              << added << " new), listed again every " << t_.poll_secs << " s in " << list;
  }
  return LoadTrainingData();
}

absl::StatusOr<bool> Chief::WaitForParameterServers() {
  LOG(INFO) << "chief: waiting for " << job_.cluster.ps.size() << " parameter servers";
  absl::Status s = servers_->WaitReady(absl::Seconds(t_.startup_timeout), /*initialized=*/false,
                                       deps_.termination);
  if (s.ok()) {
    RecordPsClockOffsets(servers_.get(), deps_.trace);
    return true;
  }
  may_have_reached_ps_ = false;  // none answered in time: nobody to tell
  if (deps_.termination->Received() == 0) return s;
  LOG(INFO) << "chief: " << s.message() << "; the job had not started";
  job_ended_ = true;
  return false;
}

absl::Status Chief::StartJob() {
  // Their own handles, which give up on a ps that does not answer soon (a
  // stop request must not wait a minute behind it).
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ParameterServers> checkpoint_servers,
                           deps_.connect(layout_, Patient(absl::Seconds(5))));
  checkpointer_ = std::make_unique<Checkpointer>(deps_.env, job_, model_.get(),
                                                 std::move(checkpoint_servers), deps_.termination);
  checkpointer_->set_trace(deps_.trace);
  PSTRAIN_ASSIGN_OR_RETURN(start_step_, checkpointer_->RestoreOrInitialize());
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ParameterServers> summary_servers,
                           deps_.connect(layout_, Patient(absl::Seconds(5))));
  PSTRAIN_ASSIGN_OR_RETURN(summaries_,
                           TrainingSummaries::Create(deps_.env, job_, model_.get(),
                                                     std::move(summary_servers), start_step_));
  // Shared with the checkpointer's thread, which feeds it and may outlive
  // this chief on an early return.
  std::shared_ptr<TrainingSummaries> summaries = summaries_;
  checkpointer_->SetStatusObserver([summaries](const std::vector<PsStatus>& statuses) {
    if (absl::Status s = summaries->Observe(statuses); !s.ok()) {
      LOG_EVERY_N(WARNING, 100) << "cannot write training summaries: " << s;
    }
  });
  if (train_.has_value() && !train_->tabular) {  // tabular examples are no images
    if (absl::Status s = summaries_->WriteInputImages(*train_, "input_images", 3, start_step_);
        !s.ok()) {
      LOG(WARNING) << "cannot write input image summaries: " << s;
    }
  }
  if (replica_ < 0) train_.reset();
  const bool exports = t_.exports_to_keep > 0 && (t_.export_steps > 0 || t_.export_secs > 0);
  const bool projector = model_->has_sparse() && t_.projector_rows > 0;
  if (exports || projector) {
    // Exports while training, from the checkpoints (on the checkpoint
    // thread: the replicas train on), which come at least as often
    // (CheckpointCadenceOf); the projector's rows from each.
    if (const std::string note = CheckpointCadenceOf(t_).exports_note; exports && !note.empty()) {
      LOG(INFO) << note;
    }
    if (projector) {
      projector_writer_ = std::make_unique<ProjectorWriter>(
          [this](const std::string& checkpoint) { WriteProjectorAt(checkpoint); });
    }
    checkpointer_->SetSavedObserver(
        [this, exports, projector, last_step = start_step_, last_time = absl::Now()](
            int64_t step, const std::string& prefix) mutable {
          if (projector) projector_writer_->Queue(prefix);
          if (!exports) return;
          // Due at the first checkpoint past each multiple of export_steps
          // (checkpoints land a poll past theirs).
          const bool due =
              (t_.export_steps > 0 && step / t_.export_steps > last_step / t_.export_steps) ||
              (t_.export_secs > 0 && absl::Now() - last_time >= absl::Seconds(t_.export_secs));
          if (!due) return;
          last_step = step;
          last_time = absl::Now();
          if (absl::Status s = ExportCheckpointAt(prefix); !s.ok()) {
            LOG(WARNING) << "the export at global step " << step << " failed (tried again at "
                         << "the next): " << s;
          }
        });
  }
  checkpointer_->Start(start_step_);
  if (t_.ps_replication > 1) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ParameterServers> watch_servers,
                             deps_.connect(layout_, Patient(absl::Seconds(1))));
    Checkpointer* checkpointer = checkpointer_.get();
    failover_watch_ = std::make_unique<FailoverWatch>(
        std::move(watch_servers), t_.ps_replication, absl::Seconds(t_.failover_secs),
        [checkpointer](const std::string& why, std::function<void()> restored) {
          checkpointer->RequestRollBack(why, std::move(restored));
        });
    // Every rollback (the watchdog's too) resets who serves what.
    FailoverWatch* watch = failover_watch_.get();
    checkpointer->SetRollBackListener([watch](bool done) { watch->NoteRollBack(done); });
    LOG(INFO) << "ps_replication " << t_.ps_replication << ": every chunk and table partition "
              << "has " << t_.ps_replication - 1 << " backup(s); a ps silent for "
              << t_.failover_secs << " s fails over to the next copy";
  }
  if (t_.follow) {
    follower_ = std::make_unique<FileListFollower>(deps_.env, FileListPath(t_.job_dir),
                                                   t_.train_files, t_.poll_secs);
  }
  job_start_ = std::chrono::steady_clock::now();
  next_eval_ =
      t_.eval_steps > 0 ? (start_step_ / t_.eval_steps + 1) * t_.eval_steps : StepLimit(t_);
  // Evaluation results for TensorBoard, as an Estimator writes them.
  PSTRAIN_ASSIGN_OR_RETURN(
      eval_events_,
      EventWriter::Create(deps_.env, JoinPath(t_.job_dir, "eval"), absl::Seconds(30)));
  return absl::OkStatus();
}

absl::Status Chief::LoadTrainingData() {
  const bool tabular = model_->input_shape().size() == 1;
  if (tabular && replica_ < 0) return absl::OkStatus();
  if (tabular) {
    PSTRAIN_ASSIGN_OR_RETURN(
        input_, ReplicaInput::Open(deps_.env, t_, *model_, ReplicaSpecOf(job_, replica_)));
    return absl::OkStatus();
  }
  absl::StatusOr<Dataset> loaded =
      tabular ? LoadModelData(deps_.env, *model_, t_.data_dir, Split::kTrain)
              : LoadDataset(deps_.env, t_.data_dir, Split::kTrain);
  if (!loaded.ok()) {
    if (replica_ >= 0) return loaded.status();
    LOG(WARNING) << "no input image summaries: " << loaded.status().message();
    return absl::OkStatus();
  }
  if (!tabular) PSTRAIN_RETURN_IF_ERROR(CheckModelInput(*model_, *loaded, t_.data_dir));
  train_ = *std::move(loaded);
  return absl::OkStatus();
}

}  // namespace coordinator_internal
}  // namespace pstrain
