#include "tests/ps_test_util.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "ps_protocol/grpc_util.h"
#include "ps_protocol/shard_layout.h"
#include "security/grpc_security.h"

namespace pstrain {
namespace testing_util {

std::unique_ptr<TestPs> StartPs(int index, int num_chunks, Env* env, const WireSecurity& wire) {
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
  o.total_replicas = 2;
  o.train_steps = 100;
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
  ps->service = std::make_unique<ParameterServerService>(ps->task.get(), wire.token);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", ServerCredentialsFor(wire), &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.RegisterService(ps->service.get());
  ps->server = builder.BuildAndStart();
  EXPECT_GT(port, 0);
  ps->address = "127.0.0.1:" + std::to_string(port);
  return ps;
}

}  // namespace testing_util
}  // namespace pstrain
