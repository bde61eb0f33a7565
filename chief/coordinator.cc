#include "chief/coordinator.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "chief/checkpointer.h"
#include "chief/summaries.h"
#include "common/status_macros.h"
#include "data/file_list.h"
#include "export/export.h"
#include "glog/logging.h"
#include "io/checkpoint.h"
#include "io/event_writer.h"
#include "io/export_format.h"
#include "models/model_options.h"
#include "ps_protocol/job_clients.h"
#include "worker/evaluation.h"
#include "worker/model_input.h"
#include "worker/replica.h"

namespace pstrain {
namespace {

// A handle's patience: retried for `budget`, the job's deadline per call.
CallPatience Patient(absl::Duration budget) {
  CallPatience patience;
  patience.retry_budget = budget;
  return patience;
}

// One run of the chief, as a sequence of named steps (Run).
class Chief {
 public:
  Chief(const JobConfig& job, int replica, const ChiefDependencies& deps)
      : job_(job),
        t_(job.training),
        replica_(replica),
        deps_(deps),
        export_history_(job.training.full_export_every) {}

  absl::Status Run() {
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
    if (checkpointer_->stopped_early()) return StoppedEarly();
    return EndJob();
  }

  // Without its chief the job cannot finish: after a failure, end it rather
  // than leave the ps (and the workers waiting on them) running. Best
  // effort and quick: the failure is logged first, a ps that does not
  // answer within a second is left to its own startup timeout, and a ps the
  // chief never reached is not waited for at all.
  void EndJobAfterFailure(const absl::Status& failure) {
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

 private:
  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - job_start_).count();
  }

  // The model, its layout, the ps, the job dir and the data: everything that
  // can fail on bad input fails here, before the job starts.
  absl::Status Prepare() {
    PSTRAIN_ASSIGN_OR_RETURN(model_, BuildJobModel(t_));
    layout_ = ComputeShardLayout(*model_, static_cast<int>(job_.cluster.ps.size()));
    PSTRAIN_ASSIGN_OR_RETURN(servers_, deps_.connect(layout_, CallPatience()));
    PSTRAIN_RETURN_IF_ERROR(deps_.env->CreateDirs(t_.job_dir));
    PSTRAIN_ASSIGN_OR_RETURN(eval_, EvalInput::Open(deps_.env, t_, *model_));
    if (t_.follow) {
      // The replicas read the list of files found so far; the chief keeps
      // it up to date while the job trains (StartJob).
      const std::string list = FileListPath(t_.job_dir);
      PSTRAIN_RETURN_IF_ERROR(deps_.env->CreateDirs(JoinPath(t_.job_dir, "input")));
      PSTRAIN_ASSIGN_OR_RETURN(const int64_t added,
                               UpdateFileList(deps_.env, list, t_.train_files));
      PSTRAIN_ASSIGN_OR_RETURN(const std::vector<std::string> files, ReadFileList(deps_.env, list));
      LOG(INFO) << "chief: following " << t_.train_files << ": " << files.size() << " files ("
                << added << " new), listed again every " << t_.poll_secs << " s in " << list;
    }
    return LoadTrainingData();
  }

  // False if a stop request came first (the job had not started: nothing to end).
  absl::StatusOr<bool> WaitForParameterServers() {
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

  // Restore or initialize, summaries and input images, the checkpoint thread.
  absl::Status StartJob() {
    // Their own handles, which give up on a ps that does not answer soon (a
    // stop request must not wait a minute behind it).
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ParameterServers> checkpoint_servers,
                             deps_.connect(layout_, Patient(absl::Seconds(5))));
    checkpointer_ = std::make_unique<Checkpointer>(
        deps_.env, job_, model_.get(), std::move(checkpoint_servers), deps_.termination);
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
    if (t_.exports_to_keep > 0 && (t_.export_steps > 0 || t_.export_secs > 0)) {
      // Exports while training, from the checkpoints (on the checkpoint
      // thread: the replicas train on).
      checkpointer_->SetSavedObserver([this, last_step = start_step_, last_time = absl::Now()](
                                          int64_t step, const std::string& prefix) mutable {
        const bool due =
            (t_.export_steps > 0 && step >= last_step + t_.export_steps) ||
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

  // The training data: a few examples become image summaries; a chief that
  // does not train keeps it only for that (and goes on without it).
  // Tabular examples are no images: a chief that does not train reads none.
  absl::Status LoadTrainingData() {
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

  absl::StatusOr<EvalMetrics> Evaluate(const ParameterView& view) {
    ScopedTraceEvent event(deps_.trace, "eval", "evaluate");
    PSTRAIN_ASSIGN_OR_RETURN(EvalMetrics m, eval_->Evaluate(model_.get(), view));
    LOG(INFO) << FormatEvalLine(m) << " (" << absl::StrFormat("%.1f", Elapsed())
              << " s of training)";
    absl::Status s = eval_events_->WriteScalar("accuracy", m.global_step, m.accuracy);
    if (s.ok() && m.binary) s = eval_events_->WriteScalar("auc", m.global_step, m.auc);
    if (s.ok()) s = eval_events_->WriteScalar("loss", m.global_step, m.loss);
    if (s.ok()) s = eval_events_->Flush();
    if (!s.ok()) LOG(WARNING) << "cannot write evaluation events: " << s;
    return m;
  }

  void MaybeEvaluate(const ParameterView& view) {
    if (t_.eval_steps > 0 && view.global_step >= next_eval_ && view.global_step < StepLimit(t_)) {
      // A periodic evaluation that fails (a ps read) is said and training goes on.
      if (absl::StatusOr<EvalMetrics> m = Evaluate(view); !m.ok()) {
        LOG(WARNING) << "evaluation at global step " << view.global_step
                     << " failed: " << m.status();
      }
      next_eval_ = (view.global_step / t_.eval_steps + 1) * t_.eval_steps;
    }
  }

  // Trains as replica 0, evaluating as the pulled global step passes eval_steps.
  absl::Status Train() {
    const ReplicaSpec spec = ReplicaSpecOf(job_, replica_);
    // Tabular input is the replica's (in memory or streamed); images are
    // the chief's own copy, which also gives the image summaries.
    const auto start =
        [this, &spec](int64_t global_step) -> absl::StatusOr<std::unique_ptr<BatchSource>> {
      if (input_ != nullptr) return input_->Start(global_step);
      PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<BatchIterator> batches,
                               StartReplicaBatches(&*train_, *model_, spec, global_step));
      return std::unique_ptr<BatchSource>(std::move(batches));
    };
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ParameterClient> client,
                             deps_.training_client(layout_, replica_));
    TrainerOptions options = ReplicaTrainerOptions(spec);
    options.trace = deps_.trace;
    options.rewind = start;
    if (input_ != nullptr && input_->streamed()) {
      options.on_input = InputSummaries(deps_.env, t_.job_dir, replica_);
    }
    const std::unique_ptr<ProgressiveValidation> progressive = ProgressiveValidationOf(t_, *model_);
    if (progressive != nullptr) {
      options.progressive = progressive.get();
      options.on_progressive = ProgressiveSummaries(deps_.env, t_.job_dir, replica_);
    }
    options.on_pull = [this](const ParameterView& view) {
      MaybeEvaluate(view);
      return absl::OkStatus();
    };
    // Stopped (SIGTERM): a replica waiting for new files (follow) pulls no
    // more, and would not hear of the end from the ps.
    options.should_stop = [this] { return checkpointer_->stopped_early(); };
    int64_t from = start_step_;
    while (true) {
      PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<BatchSource> batches, start(from));
      if (spec.sync) options.batches_from_step = from;
      Trainer trainer(model_.get(), client.get(), batches.get(), options);
      PSTRAIN_ASSIGN_OR_RETURN(int64_t step, trainer.Run());
      if (!trainer.input_ended()) {
        LOG(INFO) << "chief finished training at global step " << step;
        return absl::OkStatus();
      }
      // Its input ended (num_epochs): the job goes on until every
      // replica's has, and this replica trains again if a rollback undoes
      // some of its steps.
      const std::string reason = absl::StrCat("the chief's input ended at global step ", step);
      PSTRAIN_RETURN_IF_ERROR(
          servers_->Leave(replica_, reason, /*input_ended=*/true, absl::Seconds(10)));
      LOG(INFO) << reason << "; following the other replicas";
      PSTRAIN_ASSIGN_OR_RETURN(std::optional<int64_t> rolled_back, FollowTraining(step));
      if (!rolled_back.has_value()) return absl::OkStatus();
      from = *rolled_back;
    }
  }

  // Follows the global step and evaluates as it passes, until the job is
  // done: a chief that is no replica, or one whose input ended at global
  // step `input_end`. Then a rollback below `input_end` (a ps restored
  // from a checkpoint) returns the step it went back to, for the chief's
  // replica to train from again.
  absl::StatusOr<std::optional<int64_t>> FollowTraining(int64_t input_end = -1) {
    const absl::Duration patience =
        std::max(absl::Seconds(300), 3 * absl::Seconds(t_.sync_timeout));
    int64_t last_step = -1;
    absl::Time last_progress = absl::Now();
    absl::Time last_said = absl::Now();  // the Leave that told the ps its input ended
    while (!checkpointer_->stopped_early()) {
      PSTRAIN_ASSIGN_OR_RETURN(std::vector<PsStatus> statuses, servers_->Statuses());
      const int64_t step = statuses[0].global_step;
      if (deps_.trace != nullptr) deps_.trace->SetStep(step);
      bool done = step >= StepLimit(t_) || AllInputsEnded(statuses, NumTrainingReplicas(job_));
      bool initialized = true;
      for (const PsStatus& s : statuses) {
        done = done || s.job_done;
        initialized = initialized && s.initialized;
      }
      if (done) break;
      int64_t highest = 0;
      for (const PsStatus& s : statuses) highest = std::max(highest, s.max_global_step);
      if (input_end >= 0 && initialized && InputEndLost(statuses) && highest >= input_end &&
          absl::Now() - last_said > absl::Seconds(5)) {
        // A restarted ps forgot that this replica's input ended.
        PSTRAIN_RETURN_IF_ERROR(servers_->Leave(replica_, "the chief's input ended (said again)",
                                                /*input_ended=*/true, absl::Seconds(10)));
        last_said = absl::Now();
      }
      if (input_end >= 0 && initialized && highest < input_end) {
        LOG(WARNING) << "the job was rolled back to global step " << LowestStep(statuses)
                     << ", below where the chief's input ended (" << input_end
                     << "); the chief trains from there again";
        return LowestStep(statuses);
      }
      if (step != last_step) {
        last_step = step;
        last_progress = absl::Now();
      } else if (!t_.follow && absl::Now() - last_progress > patience) {
        return absl::DeadlineExceededError(absl::StrCat(
            "no training progress for ", absl::FormatDuration(patience), " (global step ", step,
            t_.train_steps > 0 ? absl::StrCat(" of ", t_.train_steps) : std::string(),
            "): are the workers running?"));
      }
      if (t_.eval_steps > 0 && step >= next_eval_) {
        PSTRAIN_ASSIGN_OR_RETURN(ParameterView view, servers_->Read());
        MaybeEvaluate(view);
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    return std::nullopt;
  }

  // Stopped (SIGTERM, a ps preempted) after the checkpoint: a restart of the
  // cluster resumes from it.
  absl::Status StoppedEarly() {
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

  // Every chunk of every ps reaches train_steps (in async mode the other
  // replicas' last pushes may still be landing), or every replica's input
  // ended; the statuses then.
  absl::StatusOr<std::vector<PsStatus>> WaitForFinalStep() {
    const absl::Time give_up =
        absl::Now() + std::max(absl::Seconds(60), 2 * absl::Seconds(t_.sync_timeout));
    std::vector<PsStatus> statuses;
    while (absl::Now() < give_up) {
      PSTRAIN_ASSIGN_OR_RETURN(statuses, servers_->Statuses());
      bool all = AllInputsEnded(statuses, NumTrainingReplicas(job_));
      for (const PsStatus& s : statuses) {
        if (!s.initialized && !s.shutting_down) {
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

  // Tells every ps the job is over, giving up on one that does not answer
  // within a few seconds.
  absl::Status ShutdownQuickly(const std::string& reason) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ParameterServers> servers,
                             deps_.connect(layout_, Patient(absl::Seconds(5))));
    return servers->Shutdown(reason);
  }

  // The model for serving, before the job is marked complete:
  // <job_dir>/export/<version>/; the newest exports_to_keep are kept.
  absl::Status ExportModel(const ParameterView& view, const std::string& final_checkpoint) {
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

  // A new export version from the checkpoint `path` names (a prefix, or the
  // job dir: its newest), and the versions beyond exports_to_keep deleted.
  absl::Status ExportCheckpointAt(const std::string& path) {
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

  // The final evaluation and checkpoint, the completion marker, the end of
  // the job on every ps.
  absl::Status EndJob() {
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<PsStatus> final_statuses, WaitForFinalStep());
    PSTRAIN_ASSIGN_OR_RETURN(ParameterView final_view, servers_->Read());
    // The final checkpoint first, as the Estimator saves before it
    // evaluates: a ps lost during the evaluation then costs no step (the
    // replicas have finished and would not be there to train them again).
    PSTRAIN_ASSIGN_OR_RETURN(std::string final_checkpoint,
                             checkpointer_->SaveNow(absl::ZeroDuration()));
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
      PSTRAIN_RETURN_IF_ERROR(WriteCompletionMarker(
          deps_.env, t_.job_dir, metrics.global_step,
          final_checkpoint.substr(final_checkpoint.find_last_of('/') + 1),
          /*input_ended=*/input_ended && metrics.global_step < StepLimit(t_)));
    } else {
      LOG(WARNING) << "the job ended at global step " << metrics.global_step
                   << " before its end (train_steps " << t_.train_steps << ")"
                   << "; not marked complete, a restart resumes it";
    }
    const std::string reason =
        absl::StrCat("training finished at global step ", metrics.global_step);
    if (!finished) {
      PSTRAIN_RETURN_IF_ERROR(servers_->Shutdown(reason));
    } else if (absl::Status s = ShutdownQuickly(reason); !s.ok()) {
      // The job is complete: a ps that is gone (or restarting) finds
      // COMPLETED and exits by itself.
      LOG(WARNING) << "the job is complete, but not every ps was told: " << s.message();
    }
    job_ended_ = true;
    LOG(INFO) << "job finished: global step " << metrics.global_step
              << (evaluated.ok() ? absl::StrFormat(", accuracy %.4f", metrics.accuracy)
                                 : std::string(", not evaluated"))
              << ", " << absl::StrFormat("%.1f", Elapsed()) << " s";
    return absl::OkStatus();
  }

  const JobConfig& job_;
  const TrainingSpec& t_;
  const int replica_;
  const ChiefDependencies& deps_;
  std::unique_ptr<Model> model_;
  ShardLayout layout_;
  std::unique_ptr<ParameterServers> servers_;
  std::unique_ptr<EvalInput> eval_;
  std::optional<Dataset> train_;
  std::unique_ptr<ReplicaInput> input_;  // a training chief's tabular input
  // A click model's exports: deltas between full versions (before the
  // checkpointer, whose thread exports, so that it outlives it).
  ExportHistory export_history_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<FileListFollower> follower_;  // follow: new files listed while training
  std::shared_ptr<TrainingSummaries> summaries_;
  std::unique_ptr<EventWriter> eval_events_;
  int64_t start_step_ = 0;
  int64_t next_eval_ = 0;
  std::chrono::steady_clock::time_point job_start_ = std::chrono::steady_clock::now();
  bool job_ended_ = false;  // the chief ended the job itself (or it never started)
  bool may_have_reached_ps_ = true;
};

}  // namespace

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
