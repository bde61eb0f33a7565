// The ps service over real gRPC on loopback (servers in this process):
// well-formed calls through PsClient, and malformed ones through a raw stub,
// which must be refused with a clear status and change nothing.
#include <memory>
#include <vector>

#include "common/grpc_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "ps/parameter_shard.h"
#include "ps/ps_service.h"
#include "ps/shard_layout.h"
#include "worker/ps_client.h"

namespace pstrain {
namespace {

constexpr int64_t kNumParams = 10;

struct TestPs {
  std::unique_ptr<ParameterShard> shard;
  std::unique_ptr<ParameterServerService> service;
  std::unique_ptr<grpc::Server> server;
  std::string address;
};

// Shard i of 2 over 10 parameters, SGD with learning rate 1, 1 state value on
// shard 0, async.
std::unique_ptr<TestPs> StartPs(int index, int num_shards, Env* env = nullptr) {
  auto ps = std::make_unique<TestPs>();
  auto ranges = BalancedRanges(kNumParams, num_shards);
  ShardOptions o;
  o.shard_index = index;
  o.num_shards = num_shards;
  o.begin = ranges[index].first;
  o.end = ranges[index].second;
  o.segments = {{"w", 0, o.end - o.begin}};
  o.num_state = index == 0 ? 1 : 0;
  o.state_decay = 0.0f;
  o.optimizer.type = OptimizerType::kSgd;
  o.optimizer.learning_rate = *LearningRateSchedule::Constant(1.0f);
  o.total_replicas = 2;
  o.train_steps = 100;
  ps->shard = *ParameterShard::Create(o);
  PsIdentity identity;
  identity.model = "tiny";
  identity.ps_index = index;
  identity.num_ps = num_shards;
  identity.num_params = kNumParams;
  ps->service = std::make_unique<ParameterServerService>(
      identity, std::vector<ParameterShard*>{ps->shard.get()}, env ? env : Env::Default());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.RegisterService(ps->service.get());
  ps->server = builder.BuildAndStart();
  EXPECT_GT(port, 0);
  ps->address = "127.0.0.1:" + std::to_string(port);
  return ps;
}

std::string Floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

class PsRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ps0_ = StartPs(0, 2);
    ps1_ = StartPs(1, 2);
    PsClientOptions o;
    o.ps_addresses = {ps0_->address, ps1_->address};
    o.layout = ComputeShardLayout(kNumParams, /*num_state=*/1, /*layer_starts=*/{0}, 2);
    o.replica = 0;
    o.rpc_timeout = absl::Seconds(10);
    o.retry_budget = absl::Seconds(2);
    client_ = *PsClient::Create(o);
    stub_ = ParameterServer::NewStub(
        grpc::CreateChannel(ps0_->address, grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    ps0_->server->Shutdown();
    ps1_->server->Shutdown();
  }

  grpc::Status Call(const PushRequest& request, PushPullResponse* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->PushPull(&ctx, request, response);
  }

  void Initialize() {
    std::vector<float> params(kNumParams);
    for (int i = 0; i < kNumParams; ++i) params[i] = static_cast<float>(i);
    const float state = 7;
    ASSERT_TRUE(client_->InitializeAll("tiny", params.data(), &state, 0).ok());
  }

  std::unique_ptr<TestPs> ps0_, ps1_;
  std::unique_ptr<PsClient> client_;
  std::unique_ptr<ParameterServer::Stub> stub_;
};

TEST_F(PsRpcTest, PullPushRoundTripAcrossTwoShards) {
  ASSERT_TRUE(client_->WaitForPs(absl::Seconds(10), /*initialized=*/false).ok());
  EXPECT_FALSE(client_->WaitForPs(absl::Milliseconds(300), /*initialized=*/true).ok());
  Initialize();
  ASSERT_TRUE(client_->WaitForPs(absl::Seconds(10), /*initialized=*/true).ok());
  auto view = client_->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  for (int i = 0; i < kNumParams; ++i) EXPECT_EQ(view->params[i], i);
  EXPECT_EQ(view->state[0], 7);
  EXPECT_EQ(view->global_step, 0);
  std::vector<float> grads(kNumParams, 1.0f);
  const float stats = 3;
  auto outcome = client_->Push(0, grads.data(), &stats);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->global_step, 1);
  view = client_->Pull();  // Served from the PushPull answers.
  for (int i = 0; i < kNumParams; ++i) EXPECT_EQ(view->params[i], i - 1.0f);
  EXPECT_EQ(view->state[0], 3);  // decay 0: the pushed statistics
  auto statuses = client_->StatusAll();
  ASSERT_TRUE(statuses.ok());
  EXPECT_EQ((*statuses)[1].begin(), 5);
  EXPECT_EQ((*statuses)[1].applied_updates(), 1);
  ASSERT_TRUE(client_->ShutdownAll("test over").ok());
  EXPECT_TRUE(ps0_->shard->WaitForShutdown(absl::Seconds(1)));
  outcome = client_->Push(1, grads.data(), &stats);
  ASSERT_TRUE(outcome.ok());
  EXPECT_TRUE(outcome->job_done);
}

TEST_F(PsRpcTest, Bf16WireHalvesTheBytes) {
  Initialize();
  PsClientOptions o;
  o.ps_addresses = {ps0_->address, ps1_->address};
  o.layout = ComputeShardLayout(kNumParams, 1, {0}, 2);
  o.replica = 1;
  o.bf16 = true;
  o.rpc_timeout = absl::Seconds(10);
  auto client = *PsClient::Create(o);
  ASSERT_TRUE(client->Pull().ok());
  std::vector<float> grads(kNumParams, 0.5f);
  grads[3] = 1.0f / 3.0f;  // not a bfloat16: rounded on the wire
  const float stats = 3;
  auto outcome = client->Push(0, grads.data(), &stats);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  auto view = client->Pull();
  ASSERT_TRUE(view.ok());
  for (int i = 0; i < kNumParams; ++i) {
    if (i == 3) continue;
    EXPECT_EQ(view->params[i], i - 0.5f) << i;  // exact in bfloat16
  }
  EXPECT_NEAR(view->params[3], 3 - 1.0f / 3.0f, 3.0 / 256);
  EXPECT_EQ(client->bytes_sent(), kNumParams * 2 + 4);  // bf16 gradients + float32 stats
  // The master copy on the ps stays float32.
  std::string p, st;
  ASSERT_TRUE(ps0_->shard->Read(&p, &st).ok());
  float master3;
  std::memcpy(&master3, p.data() + 3 * sizeof(float), sizeof(float));
  EXPECT_NEAR(master3, 3 - 1.0f / 3.0f, 1e-2);
}

TEST_F(PsRpcTest, PullBeforeInitializeIsFailedPrecondition) {
  grpc::ClientContext ctx;
  PullRequest request;
  PullResponse response;
  grpc::Status s = stub_->Pull(&ctx, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("not initialized"), std::string::npos) << s.error_message();
}

TEST_F(PsRpcTest, BadInitializeIsRefused) {
  auto init = [&](InitializeRequest r) {
    grpc::ClientContext ctx;
    InitializeResponse response;
    return stub_->Initialize(&ctx, r, &response);
  };
  InitializeRequest good;
  good.set_shard(0);
  good.set_model("tiny");
  good.set_num_params(kNumParams);
  good.set_params(Floats({1, 2, 3, 4, 5}));
  good.set_state(Floats({0}));
  InitializeRequest r = good;
  r.set_model("other");
  EXPECT_EQ(init(r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  r = good;
  r.set_num_params(11);
  EXPECT_EQ(init(r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  r = good;
  r.set_params(Floats({1, 2, 3}));
  grpc::Status s = init(r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("holds 5 parameters"), std::string::npos) << s.error_message();
  r = good;
  r.set_shard(1);
  s = init(r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("shard 1"), std::string::npos) << s.error_message();
  r = good;
  r.set_params(std::string(7, 'x'));  // not whole floats
  EXPECT_EQ(init(r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_FALSE(ps0_->shard->GetStats().initialized);
  EXPECT_TRUE(init(good).ok());
}

TEST_F(PsRpcTest, BadPushesAreRefusedAndChangeNothing) {
  Initialize();
  PushRequest good;
  good.set_shard(0);
  good.set_replica(1);
  good.set_step(0);
  good.set_gradients(Floats({1, 1, 1, 1, 1}));
  good.set_batch_stats(Floats({1}));
  std::vector<PushRequest> bad(6, good);
  bad[0].set_gradients(Floats({1, 1, 1}));                     // short
  bad[1].set_gradients(Floats(std::vector<float>(50, 1.0f)));  // long
  bad[2].set_gradients(std::string(19, 'x'));                  // not whole floats
  bad[3].set_shard(1);                                         // sent to the wrong ps
  bad[4].set_replica(5);                                       // unknown replica
  bad[5].set_step(3);                                          // ahead of the ps
  for (const PushRequest& r : bad) {
    PushPullResponse response;
    grpc::Status s = Call(r, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_FALSE(s.error_message().empty());
  }
  auto view = client_->Pull();
  ASSERT_TRUE(view.ok());
  for (int i = 0; i < kNumParams; ++i) EXPECT_EQ(view->params[i], i);
  EXPECT_EQ(view->global_step, 0);
  EXPECT_EQ(ps0_->shard->GetStats().applied_updates, 0);
  PushPullResponse response;
  EXPECT_TRUE(Call(good, &response).ok());
  EXPECT_EQ(response.global_step(), 1);
}

TEST(PsClientTest, UnreachablePsIsAClearErrorAfterTheRetryBudget) {
  PsClientOptions o;
  o.ps_addresses = {"127.0.0.1:1"};
  o.layout = ComputeShardLayout(4, 0, {0}, 1);
  o.rpc_timeout = absl::Seconds(1);
  o.retry_budget = absl::Milliseconds(300);
  auto client = *PsClient::Create(o);
  auto view = client->Pull();
  ASSERT_FALSE(view.ok());
  EXPECT_TRUE(absl::IsUnavailable(view.status())) << view.status();
  EXPECT_NE(view.status().message().find("127.0.0.1:1"), std::string::npos);
  absl::Status wait = client->WaitForPs(absl::Milliseconds(300), false);
  EXPECT_TRUE(absl::IsDeadlineExceeded(wait)) << wait;
}

}  // namespace
}  // namespace pstrain
