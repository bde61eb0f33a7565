#include "chief/coordinator.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "data/batcher.h"
#include "data/mnist.h"
#include "glog/logging.h"
#include "models/registry.h"
#include "worker/distributed.h"
#include "worker/trainer.h"

namespace pstrain {
namespace {

// Initializes the ps unless they already hold parameters (a restarted chief
// joins the running job); returns the global step training starts from.
absl::StatusOr<int64_t> InitializeParameters(const JobConfig& job, const Model& model,
                                             PsClient* client) {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<StatusResponse> statuses, client->StatusAll());
  bool all = true, any = false;
  for (const StatusResponse& s : statuses) {
    all = all && s.initialized();
    any = any || s.initialized();
  }
  if (all) {
    LOG(INFO) << "parameter servers already initialized at global step "
              << statuses[0].global_step() << "; continuing";
    return statuses[0].global_step();
  }
  if (any) LOG(WARNING) << "some ps were initialized and some not; initializing all afresh";
  std::vector<float> params(model.num_params()), state(model.num_state());
  model.InitializeVariables(job.training.seed, params.data(), state.data());
  PSTRAIN_RETURN_IF_ERROR(
      client->InitializeAll(job.training.model, params.data(), state.data(), 0));
  LOG(INFO) << "initialized " << model.num_params() << " parameters on " << job.cluster.ps.size()
            << " ps (seed " << job.training.seed << ")";
  return 0;
}

}  // namespace

absl::Status RunChief(const RoleConfig& role) {
  const JobConfig& job = role.job;
  const TrainingSpec& t = job.training;
  const int replica = ReplicaId(job, role.task);
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, BuildModel(t.model, ModelOptions{}));
  const ShardLayout layout = ComputeShardLayout(*model, static_cast<int>(job.cluster.ps.size()));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client, MakePsClient(job, layout, replica));
  PSTRAIN_RETURN_IF_ERROR(Env::Default()->CreateDirs(t.job_dir));
  PSTRAIN_ASSIGN_OR_RETURN(Dataset test, LoadMnist(Env::Default(), t.data_dir, Split::kTest));

  LOG(INFO) << "chief: waiting for " << job.cluster.ps.size() << " parameter servers";
  PSTRAIN_RETURN_IF_ERROR(
      client->WaitForPs(absl::Seconds(t.startup_timeout), /*initialized=*/false));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t start_step, InitializeParameters(job, *model, client.get()));

  const auto job_start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - job_start).count();
  };
  int64_t next_eval =
      t.eval_steps > 0 ? (start_step / t.eval_steps + 1) * t.eval_steps : t.train_steps;
  auto evaluate = [&](const ParameterView& view) {
    EvalMetrics m = EvaluateDataset(model.get(), view, test, t.eval_batch_size);
    LOG(INFO) << FormatEvalLine(m) << " (" << absl::StrFormat("%.1f", elapsed())
              << " s of training)";
    return m;
  };
  auto maybe_evaluate = [&](const ParameterView& view) {
    if (t.eval_steps > 0 && view.global_step >= next_eval && view.global_step < t.train_steps) {
      evaluate(view);
      next_eval = (view.global_step / t.eval_steps + 1) * t.eval_steps;
    }
    return absl::OkStatus();
  };

  if (replica >= 0) {
    PSTRAIN_ASSIGN_OR_RETURN(Dataset train, LoadMnist(Env::Default(), t.data_dir, Split::kTrain));
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<BatchIterator> batches,
                             BatchIterator::Create(&train, t.batch_size, replica,
                                                   NumTrainingReplicas(job), true, t.seed));
    TrainerOptions options;
    options.train_steps = t.train_steps;
    options.log_every_n_steps = t.log_every_n_steps;
    options.seed = t.seed + static_cast<uint64_t>(replica) * 7919;
    options.on_pull = maybe_evaluate;
    Trainer trainer(model.get(), client.get(), batches.get(), options);
    PSTRAIN_ASSIGN_OR_RETURN(int64_t step, trainer.Run());
    LOG(INFO) << "chief finished training at global step " << step;
  } else {
    // Not a replica: follow the global step and evaluate as it passes.
    while (true) {
      PSTRAIN_ASSIGN_OR_RETURN(std::vector<StatusResponse> statuses, client->StatusAll());
      const int64_t step = statuses[0].global_step();
      if (step >= t.train_steps) break;
      if (t.eval_steps > 0 && step >= next_eval) {
        PSTRAIN_ASSIGN_OR_RETURN(ParameterView view, client->Pull());
        PSTRAIN_RETURN_IF_ERROR(maybe_evaluate(view));
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
  }
  PSTRAIN_ASSIGN_OR_RETURN(ParameterView final_view, client->Pull());
  const EvalMetrics metrics = evaluate(final_view);
  PSTRAIN_RETURN_IF_ERROR(
      client->ShutdownAll(absl::StrCat("training finished at global step ", metrics.global_step)));
  LOG(INFO) << "job finished: global step " << metrics.global_step << ", accuracy "
            << absl::StrFormat("%.4f", metrics.accuracy) << ", "
            << absl::StrFormat("%.1f", elapsed()) << " s";
  return absl::OkStatus();
}

}  // namespace pstrain
