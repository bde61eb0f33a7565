#include "worker/local_training.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/cluster_trace.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "onnx/onnx_weights.h"
#include "ps/in_process_client.h"
#include "worker/evaluation.h"
#include "worker/replica.h"

namespace pstrain {

absl::StatusOr<EvalMetrics> RunLocalTraining(Env* env, const LocalTrainingConfig& config) {
  if (config.train_steps <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--train_steps must be positive, got ", config.train_steps));
  }
  if (config.batch_size <= 0 || config.eval_batch_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--batch_size and --eval_batch_size must be positive, got ", config.batch_size,
                     " and ", config.eval_batch_size));
  }
  if (config.job_dir.empty()) {
    return absl::InvalidArgumentError("--job_dir is required: the directory for this job's output");
  }
  PSTRAIN_ASSIGN_OR_RETURN(const TraceSteps trace_steps, ParseTraceSteps(config.trace_steps));
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<Model> model,
      config.model_spec.has_value()
          ? BuildSpecModel(config.model_spec->spec, config.model_spec->source,
                           SpecBuildOptionsOf(config.model_options.batch_norm_decay))
          : BuildModel(config.model, config.model_options));
  PSTRAIN_RETURN_IF_ERROR(env->CreateDirs(config.job_dir));

  auto load_start = std::chrono::steady_clock::now();
  PSTRAIN_ASSIGN_OR_RETURN(Dataset train,
                           LoadModelData(env, *model, config.data_dir, Split::kTrain));
  PSTRAIN_ASSIGN_OR_RETURN(Dataset test, LoadModelData(env, *model, config.data_dir, Split::kTest));
  LOG(INFO) << "Read " << train.size() << " training and " << test.size() << " test examples from "
            << config.data_dir << " in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count()
            << " s";

  // The initializers', or an ONNX file's values (the spec's weights).
  std::vector<float> params(model->num_params()), state(model->num_state());
  PSTRAIN_RETURN_IF_ERROR(
      InitializeModelVariables(env, *model, config.seed, params.data(), state.data()));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<InProcessClient> client,
                           InProcessClient::Create(*model, config.optimizer, config.state_decay,
                                                   params, state, config.sparse_rules));
  ReplicaSpec spec;  // The only replica.
  spec.batch_size = config.batch_size;
  spec.seed = config.seed;
  spec.use_distortion_for_training = config.use_distortion_for_training;
  spec.train_steps = config.train_steps;
  spec.log_every_n_steps = config.log_every_n_steps;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<BatchIterator> batches,
                           StartReplicaBatches(&train, *model, spec, /*global_step=*/0));
  LOG(INFO) << "Training " << config.model << " (" << model->num_params() << " parameters) for "
            << config.train_steps << " steps, batch size " << config.batch_size << ", "
            << OptimizerTypeName(config.optimizer.type) << " with learning rate "
            << config.optimizer.learning_rate.ToString();

  TrainerOptions options = ReplicaTrainerOptions(spec);
  TraceRecorder trace("worker:0", trace_steps);
  if (trace_steps.enabled()) options.trace = &trace;
  Trainer trainer(model.get(), client.get(), batches.get(), options);
  auto train_start = std::chrono::steady_clock::now();
  PSTRAIN_ASSIGN_OR_RETURN(int64_t step, trainer.Run());
  model->set_trace(nullptr);
  if (trace_steps.enabled()) {
    const std::string dir = ProfileRunDir(config.job_dir, TraceRunName(trace_steps));
    const std::string path = absl::StrCat(dir, "/", TraceFileName(TracedTask{"worker", 0}));
    PSTRAIN_RETURN_IF_ERROR(env->CreateDirs(dir));
    PSTRAIN_RETURN_IF_ERROR(trace.Write(env, path));
    LOG(INFO) << "trace (" << trace.size() << " events) written to " << path;
  }
  const double train_secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - train_start).count();
  LOG(INFO) << "Trained to global step " << step << " in " << train_secs << " s";

  PSTRAIN_ASSIGN_OR_RETURN(ParameterView view, client->Pull());
  PSTRAIN_ASSIGN_OR_RETURN(EvalMetrics metrics,
                           EvaluateDataset(model.get(), view, test, config.eval_batch_size));
  LOG(INFO) << FormatEvalLine(metrics);
  return metrics;
}

}  // namespace pstrain
