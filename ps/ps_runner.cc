#include "ps/ps_runner.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/grpc_util.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "grpcpp/grpcpp.h"
#include "models/registry.h"
#include "ps/parameter_shard.h"
#include "ps/ps_service.h"
#include "ps/shard_layout.h"

namespace pstrain {

absl::StatusOr<OptimizerConfig> OptimizerConfigFromSpec(const TrainingSpec& t) {
  OptimizerConfig config;
  PSTRAIN_ASSIGN_OR_RETURN(config.type, ParseOptimizerType(t.optimizer));
  PSTRAIN_ASSIGN_OR_RETURN(
      config.learning_rate,
      ParseLearningRateSchedule(static_cast<float>(t.learning_rate), t.learning_rate_schedule));
  config.momentum = static_cast<float>(t.momentum);
  config.nesterov = t.nesterov;
  config.weight_decay = static_cast<float>(t.weight_decay);
  for (absl::string_view s : absl::StrSplit(t.weight_decay_exclusions, ',', absl::SkipEmpty())) {
    config.weight_decay_exclusions.emplace_back(s);
  }
  return config;
}

absl::Status RunParameterServer(const RoleConfig& role) {
  const JobConfig& job = role.job;
  const int index = role.task.task_index;
  const int num_ps = static_cast<int>(job.cluster.ps.size());
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                           BuildModel(job.training.model, ModelOptions{}));
  const ShardLayout layout = ComputeShardLayout(*model, num_ps);
  ShardOptions options;
  options.shard_index = index;
  options.num_shards = num_ps;
  options.begin = layout.ranges[index].first;
  options.end = layout.ranges[index].second;
  options.segments = SegmentsForRange(*model, options.begin, options.end);
  options.num_state = layout.state_size(index);
  PSTRAIN_ASSIGN_OR_RETURN(options.optimizer, OptimizerConfigFromSpec(job.training));
  options.sync = job.training.update == UpdateMode::kSync;
  options.replicas_to_aggregate = EffectiveReplicasToAggregate(job);
  options.total_replicas = EffectiveTotalReplicas(job);
  options.sync_timeout = absl::Seconds(job.training.sync_timeout);
  options.train_steps = job.training.train_steps;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ParameterShard> shard, ParameterShard::Create(options));
  ParameterServerService service(shard.get(), job.training.model, layout.num_params);

  PSTRAIN_ASSIGN_OR_RETURN(std::string address, job.cluster.address("ps", index));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("ps ", index, " cannot listen on ", address,
                                               " (in use, or not an address of this host)"));
  }
  LOG(INFO) << "ps " << index << " of " << num_ps << " serving " << job.training.model
            << " parameters [" << options.begin << ", " << options.end << ") on " << address << " ("
            << UpdateModeName(job.training.update)
            << (options.sync ? absl::StrCat(", ", options.replicas_to_aggregate, " of ",
                                            options.total_replicas, " replicas per step")
                             : "")
            << ")";

  while (!shard->WaitForShutdown(absl::Seconds(1))) {
  }
  // Let every replica still running learn that the job is over before the
  // port closes, so none of them waits on a ps that is gone.
  const absl::Time linger_until = absl::Now() + absl::Seconds(5);
  while (service.replicas_told_done() < options.total_replicas && absl::Now() < linger_until) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  const ParameterShard::Stats stats = shard->GetStats();
  LOG(INFO) << "ps " << index << " done at global step " << stats.global_step << ": "
            << stats.applied_updates << " updates applied, " << stats.stale_pushes
            << " stale pushes dropped, " << stats.timed_out_steps << " sync steps timed out";
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return absl::OkStatus();
}

}  // namespace pstrain
