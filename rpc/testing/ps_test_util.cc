#include "rpc/testing/ps_test_util.h"

#include <utility>
#include <vector>

#include "glog/logging.h"
#include "models/dense.h"
#include "models/embedding.h"
#include "models/merge.h"
#include "ps_protocol/shard_layout.h"
#include "rpc/grpc_security.h"
#include "rpc/grpc_util.h"

namespace pstrain {
namespace testing_util {

std::unique_ptr<Model> TestSparseModel() {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Embedding>(
      "emb", EmbeddingOptions{"f", 2, 0, Combiner::kSum, {TableInitializer::kZeros, 0.0f}}));
  DenseOptions logit;
  logit.units = 1;
  layers.push_back(std::make_unique<Dense>("dense", logit));
  layers.push_back(std::make_unique<Linear>("lin", LinearOptions{{"f"}, 10, false}));
  layers.push_back(std::make_unique<Add>("add"));
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(
      "tiny_sparse", {1}, 2, std::move(layers), {{0}, {1}, {0}, {2, 3}}, Head::kBinary);
  CHECK(model.ok()) << model.status();
  return std::move(*model);
}

std::unique_ptr<TestPs> StartPs(int index, int num_chunks, Env* env, const WireSecurity& wire,
                                const TestPsOptions& options) {
  auto ps = std::make_unique<TestPs>();
  auto ranges = BalancedRanges(kNumParams, num_chunks);
  ShardOptions o;
  o.chunk = index;
  o.num_chunks = num_chunks;
  o.begin = ranges[index].first;
  o.end = ranges[index].second;
  o.segments = {{"w", 0, o.end - o.begin}};
  o.num_state = index == 0 ? 1 : 0;
  o.state_decay = 0.0f;
  o.optimizer.type = OptimizerType::kSgd;
  o.optimizer.learning_rate = *LearningRateSchedule::Constant(1.0f);
  o.rule.total_replicas = 2;
  o.rule.train_steps = options.train_steps;
  o.rule.sync = options.sync;
  o.rule.replicas_to_aggregate = 2;
  std::vector<std::unique_ptr<ParameterShard>> shards;
  shards.push_back(*ParameterShard::Create(o));
  ps->shard = shards.back().get();
  PsIdentity identity;
  identity.model = "tiny";
  identity.ps_index = index;
  identity.num_ps = num_chunks;
  identity.num_params = kNumParams;
  identity.job_dir = "/job";
  ps->task = std::make_unique<PsTask>(identity, std::move(shards), env ? env : Env::Default());
  SparseTableRules rules;
  rules.optimizer.learning_rate = 1.0f;
  SparseShardOptions sparse;
  sparse.ps_index = index;
  sparse.num_ps = num_chunks;
  sparse.rule.total_replicas = 2;
  sparse.rule.sync = options.sync;
  sparse.rule.replicas_to_aggregate = 2;
  std::unique_ptr<Model> own = options.sparse_model == nullptr ? TestSparseModel() : nullptr;
  const Model& model = options.sparse_model == nullptr ? *own : *options.sparse_model;
  ps->task->AttachSparse(*SparseShard::Create(model, rules, sparse), "adagrad");
  ps->service = std::make_unique<ParameterServerService>(ps->task.get(), wire.token);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", ServerCredentialsFor(wire), &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.RegisterService(ps->service.get());
  ps->server = builder.BuildAndStart();
  CHECK_GT(port, 0) << "no port on 127.0.0.1 for the test ps";
  ps->address = "127.0.0.1:" + std::to_string(port);
  return ps;
}

}  // namespace testing_util
}  // namespace pstrain
