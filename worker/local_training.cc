#include "worker/local_training.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cluster_trace.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "input/eval_input.h"
#include "input/job_input.h"
#include "input/replica_spec.h"
#include "models/model_options.h"
#include "onnx/onnx_weights.h"
#include "ps/in_process_client.h"
#include "ps/model_tables.h"
#include "ps/optimizer_config.h"
#include "worker/replica.h"
#include "worker/trainer.h"

namespace pstrain {
namespace {

// The training keys a job without a cluster honours, as a cluster replica
// (or the chief's evaluation) does.
constexpr std::string_view kLocalKeys[] = {
    // The model and its resolution.
    "model", "onnx_weights", "num_layers", "batch_norm_decay", "batch_norm_epsilon",
    // The input of a replica and of the evaluation.
    "use_distortion_for_training", "data_dir", "train_files", "eval_files", "input_compression",
    "shuffle_buffer", "shuffle_files", "cycle_length", "num_epochs", "csv_schema",
    "max_bad_records", "progressive_validation", "progressive_window",
    // The optimizer and the embedding tables' rules (the in-process ps's).
    "optimizer", "learning_rate", "learning_rate_schedule", "momentum", "nesterov", "weight_decay",
    "weight_decay_exclusions", "embedding_optimizer", "embedding_learning_rate", "embedding_l1",
    "embedding_l2", "embedding_ttl_steps", "embedding_min_count",
    // The schedule of the one replica.
    "job_dir", "batch_size", "eval_batch_size", "train_steps", "log_every_n_steps", "seed",
    "threads", "trace_steps",
    // One replica: every update mode is the same.
    "update"};

// Why a job without a cluster cannot honour `key`.
const char* WhyNotLocal(std::string_view key) {
  static constexpr std::pair<std::string_view, const char*> kWhy[] = {
      {"checkpoint_steps", "writes no checkpoints"},
      {"checkpoint_secs", "writes no checkpoints"},
      {"keep_checkpoint_max", "writes no checkpoints"},
      {"exports_to_keep", "exports no model"},
      {"export_steps", "exports no model"},
      {"export_secs", "exports no model"},
      {"full_export_every", "exports no model"},
      {"save_summary_steps", "writes no training summaries"},
      {"histogram_steps", "writes no training summaries"},
      {"projector_rows", "writes no checkpoints"},
      {"flush_secs", "writes no training summaries"},
      {"eval_steps", "evaluates once, when training ends"},
      {"follow", "follows no new files (the chief keeps an online job's file list)"},
      {"poll_secs", "follows no new files (the chief keeps an online job's file list)"},
  };
  for (const auto& [k, why] : kWhy) {
    if (k == key) return why;
  }
  return "has no parameter servers, chief or other replicas, and no wire between them";
}

}  // namespace

absl::Status CheckLocalTraining(const TrainingSpec& t) {
  const TrainingSpec defaults;
  for (const std::string& key : TrainingFieldNames()) {
    if (std::find(std::begin(kLocalKeys), std::end(kLocalKeys), key) != std::end(kLocalKeys)) {
      continue;
    }
    PSTRAIN_ASSIGN_OR_RETURN(const std::string value, GetTrainingField(t, key));
    PSTRAIN_ASSIGN_OR_RETURN(const std::string default_value, GetTrainingField(defaults, key));
    if (value == default_value) continue;
    return absl::InvalidArgumentError(
        absl::StrCat("training.", key, " = ", value, ": a job without a cluster ", WhyNotLocal(key),
                     ", so it cannot honour training.", key,
                     "; leave it out, or run the job on a cluster (pstrain-launch --config FILE)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<EvalMetrics> RunLocalTraining(Env* env, const TrainingSpec& t) {
  PSTRAIN_RETURN_IF_ERROR(ValidateTrainingSpec(t));
  PSTRAIN_RETURN_IF_ERROR(CheckLocalTraining(t));
  PSTRAIN_ASSIGN_OR_RETURN(const TraceSteps trace_steps, ParseTraceSteps(t.trace_steps));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, BuildJobModel(t));
  PSTRAIN_ASSIGN_OR_RETURN(const OptimizerConfig optimizer, OptimizerConfigFromSpec(t));
  PSTRAIN_ASSIGN_OR_RETURN(const SparseTableRules rules, SparseTableRulesOf(t));
  PSTRAIN_RETURN_IF_ERROR(env->CreateDirs(t.job_dir));

  // The job's only replica, and its evaluation, read as a cluster's do.
  const ReplicaSpec spec = ReplicaSpecOf(t, /*replica=*/0, /*num_replicas=*/1);
  auto load_start = std::chrono::steady_clock::now();
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ReplicaInput> input,
                           ReplicaInput::Open(env, t, *model, spec));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<EvalInput> eval, EvalInput::Open(env, t, *model));
  LOG(INFO) << "The replica " << input->Describe() << "; the evaluation reads " << eval->Describe()
            << " (opened in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count()
            << " s)";

  // The initializers', or an ONNX file's values (the spec's weights).
  std::vector<float> params(model->num_params()), state(model->num_state());
  PSTRAIN_RETURN_IF_ERROR(
      InitializeModelVariables(env, *model, t.seed, params.data(), state.data()));
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<InProcessClient> client,
      InProcessClient::Create(*model, optimizer, StateDecayOf(t), params, state, rules));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<BatchSource> batches, input->Start(/*global_step=*/0));
  LOG(INFO) << "Training " << t.model << " (" << model->num_params() << " parameters) "
            << (t.train_steps > 0 ? absl::StrCat("for ", t.train_steps, " steps")
                                  : absl::StrCat("for ", t.num_epochs, " epochs"))
            << ", batch size " << t.batch_size << ", " << OptimizerTypeName(optimizer.type)
            << " with learning rate " << optimizer.learning_rate.ToString();

  TrainerOptions options = ReplicaTrainerOptions(spec);
  TraceRecorder trace("worker:0", trace_steps);
  if (trace_steps.enabled()) options.trace = &trace;
  if (input->streamed()) options.on_input = InputSummaries(env, t.job_dir, spec.replica);
  const std::unique_ptr<ProgressiveValidation> progressive = ProgressiveValidationOf(t, *model);
  if (progressive != nullptr) {
    options.progressive = progressive.get();
    options.on_progressive = ProgressiveSummaries(env, t.job_dir, spec.replica);
  }
  Trainer trainer(model.get(), client.get(), batches.get(), options);
  auto train_start = std::chrono::steady_clock::now();
  PSTRAIN_ASSIGN_OR_RETURN(int64_t step, trainer.Run());
  model->set_trace(nullptr);
  if (trace_steps.enabled()) {
    const std::string dir = ProfileRunDir(t.job_dir, TraceRunName(trace_steps));
    const std::string path = absl::StrCat(dir, "/", TraceFileName(TracedTask{"worker", 0}));
    PSTRAIN_RETURN_IF_ERROR(env->CreateDirs(dir));
    PSTRAIN_RETURN_IF_ERROR(trace.Write(env, path));
    LOG(INFO) << "trace (" << trace.size() << " events) written to " << path;
  }
  const double train_secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - train_start).count();
  LOG(INFO) << "Trained to global step " << step << " in " << train_secs << " s"
            << (trainer.input_ended() ? " (the input ended)" : "");

  PSTRAIN_ASSIGN_OR_RETURN(ParameterView view, client->Pull());
  PSTRAIN_ASSIGN_OR_RETURN(EvalMetrics metrics, EvaluateInput(model.get(), view, *eval));
  LOG(INFO) << FormatEvalLine(metrics);
  return metrics;
}

}  // namespace pstrain
