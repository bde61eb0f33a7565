// The ps service over real gRPC on loopback (servers in this process):
// well-formed calls through PsClient, and malformed ones through a raw stub,
// which must be refused with a clear status and change nothing.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "io/checkpoint.h"
#include "ps/parameter_shard.h"
#include "ps/ps_task.h"
#include "ps_protocol/shard_layout.h"
#include "rpc/grpc_parameter_servers.h"
#include "rpc/grpc_util.h"
#include "rpc/ps_client.h"
#include "rpc/ps_service.h"
#include "rpc/testing/ps_test_util.h"

namespace pstrain {
namespace {

using testing_util::kNumParams;
using testing_util::StartPs;
using testing_util::TestPs;

std::string Floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

class PsRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ps0_ = StartPs(0, 2, &env_);
    ps1_ = StartPs(1, 2, &env_);
    PsClientOptions o;
    o.ps_addresses = {ps0_->address, ps1_->address};
    o.layout = ComputeShardLayout(kNumParams, /*num_state=*/1, /*layer_starts=*/{0}, 2);
    o.replica = 0;
    o.rpc_timeout = absl::Seconds(10);
    o.retry_budget = absl::Seconds(2);
    client_ = *PsClient::Create(o);
    servers_ =
        *GrpcParameterServers::Create(o.ps_addresses, o.layout, o.rpc_timeout, o.retry_budget);
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
    ASSERT_TRUE(servers_->Initialize("tiny", params.data(), &state, 0).ok());
  }

  MemEnv env_;  // the ps's job dir
  std::unique_ptr<TestPs> ps0_, ps1_;
  std::unique_ptr<PsClient> client_;
  std::unique_ptr<GrpcParameterServers> servers_;
  std::unique_ptr<ParameterServer::Stub> stub_;
};

TEST_F(PsRpcTest, PullPushRoundTripAcrossTwoShards) {
  ASSERT_TRUE(servers_->WaitReady(absl::Seconds(10), /*initialized=*/false, nullptr).ok());
  EXPECT_FALSE(servers_->WaitReady(absl::Milliseconds(300), /*initialized=*/true, nullptr).ok());
  Initialize();
  ASSERT_TRUE(servers_->WaitReady(absl::Seconds(10), /*initialized=*/true, nullptr).ok());
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
  auto statuses = servers_->Statuses();
  ASSERT_TRUE(statuses.ok());
  EXPECT_EQ((*statuses)[1].begin, 5);
  EXPECT_EQ((*statuses)[1].applied_updates, 1);
  ASSERT_TRUE(servers_->Shutdown("test over").ok());
  EXPECT_TRUE(ps0_->shard->WaitForShutdown(absl::Seconds(1)));
  outcome = client_->Push(1, grads.data(), &stats);
  ASSERT_TRUE(outcome.ok());
  EXPECT_TRUE(outcome->job_done);
}

// Async: a replica killed after pushing some chunks of a step and not the
// others leaves those chunks one update ahead for the rest of the job. The
// trainers push until every chunk has reached train_steps (100 here), not
// only the first that says the job is done.
void TrainAfterAPartialPush(TestPs* ahead, int chunk, int64_t size, PsClient* client,
                            GrpcParameterServers* servers) {
  std::vector<float> g(size, 0.0f);
  const std::vector<float> batch_stats(chunk == 0 ? 1 : 0, 0.0f);  // chunk 0 holds the state
  absl::Notification pushed;
  ahead->task->Push(chunk, /*replica=*/1, /*step=*/0, /*generation=*/0, g, batch_stats, {},
                    [&](absl::Status s, PushResult) {
                      EXPECT_TRUE(s.ok()) << s;
                      pushed.Notify();
                    });
  pushed.WaitForNotification();
  absl::StatusOr<ParameterView> view = client->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->global_step, 0);  // the lowest chunk's
  std::vector<float> grads(kNumParams, 0.0f);
  const float stats = 0;
  int64_t step = view->global_step;
  bool done = view->job_done;
  for (int i = 0; i < 200 && step < 100 && !done; ++i) {  // the trainer's end condition
    absl::StatusOr<PushOutcome> out = client->Push(step, grads.data(), &stats);
    ASSERT_TRUE(out.ok()) << out.status();
    step = out->global_step;
    done = out->job_done;
  }
  EXPECT_EQ(step, 100);
  absl::StatusOr<std::vector<PsStatus>> statuses = servers->Statuses();
  ASSERT_TRUE(statuses.ok()) << statuses.status();
  EXPECT_EQ((*statuses)[0].global_step, 100);
  EXPECT_EQ((*statuses)[1].global_step, 100);
}

TEST_F(PsRpcTest, AsyncTrainersPushUntilEveryChunkReachesTrainStepsAfterAPartialPush) {
  Initialize();
  TrainAfterAPartialPush(ps1_.get(), 1, kNumParams - 5, client_.get(), servers_.get());
}

TEST_F(PsRpcTest, AsyncTrainersPushUntilEveryChunkReachesTrainStepsWhenChunkZeroIsAhead) {
  Initialize();
  TrainAfterAPartialPush(ps0_.get(), 0, 5, client_.get(), servers_.get());
}

// Sync: replica 1 was killed after pushing chunk 0 of step 0 and not chunk
// 1; replica 0's push completes step 0 on chunk 0 and waits on chunk 1. The
// restarted replica 1 pulls at step 0: chunk 0, already at step 1, gives the
// values of step 0 (a plain pull would mix steps 0 and 1), so the replica
// computes step 0 as before, and its push completes the step everywhere.
TEST(PsRpcSyncTest, AReplicaRejoiningMidStepPullsTheValuesOfThatStep) {
  testing_util::TestPsOptions sync;
  sync.sync = true;
  MemEnv env;
  std::unique_ptr<TestPs> ps0 = StartPs(0, 2, &env, WireSecurity(), sync);
  std::unique_ptr<TestPs> ps1 = StartPs(1, 2, &env, WireSecurity(), sync);
  PsClientOptions o;
  o.ps_addresses = {ps0->address, ps1->address};
  o.layout = ComputeShardLayout(kNumParams, /*num_state=*/1, /*layer_starts=*/{0}, 2);
  o.sync = true;
  o.rpc_timeout = absl::Seconds(10);
  o.retry_budget = absl::Seconds(2);
  std::unique_ptr<GrpcParameterServers> servers =
      *GrpcParameterServers::Create(o.ps_addresses, o.layout, o.rpc_timeout, o.retry_budget);
  std::vector<float> initial(kNumParams);
  for (int i = 0; i < kNumParams; ++i) initial[i] = static_cast<float>(i);
  const float state = 7;
  ASSERT_TRUE(servers->Initialize("tiny", initial.data(), &state, 0).ok());
  o.replica = 0;
  std::unique_ptr<PsClient> replica0 = *PsClient::Create(o);
  ASSERT_TRUE(replica0->Pull().ok());
  // Replica 1's push of chunk 0 before it died (its answer never read).
  const std::vector<float> grads(kNumParams, 2.0f);
  const float stats = 0;
  ps0->task->Push(0, /*replica=*/1, /*step=*/0, /*generation=*/0,
                  absl::MakeConstSpan(grads).subspan(0, 5), absl::MakeConstSpan(&stats, 1), {},
                  [](absl::Status, PushResult) {});
  absl::StatusOr<PushOutcome> pushed0;
  std::thread push0([&] { pushed0 = replica0->Push(0, grads.data(), &stats); });
  // Chunk 0 completes step 0; chunk 1 waits for replica 1.
  for (int i = 0; i < 500 && ps0->shard->GetStats().global_step < 1; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(ps0->shard->GetStats().global_step, 1);
  ASSERT_EQ(ps1->shard->GetStats().global_step, 0);
  o.replica = 1;
  std::unique_ptr<PsClient> plain = *PsClient::Create(o);
  absl::StatusOr<ParameterView> mixed = plain->Pull();
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(mixed->params[0], -2.0f);  // chunk 0 after step 0
  std::unique_ptr<PsClient> replica1 = *PsClient::Create(o);
  absl::StatusOr<ParameterView> view = replica1->PullAt(0);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->global_step, 0);
  EXPECT_FALSE(view->job_done);
  for (int i = 0; i < kNumParams; ++i) EXPECT_EQ(view->params[i], initial[i]) << i;
  EXPECT_EQ(view->state[0], 7.0f);
  absl::StatusOr<PushOutcome> pushed1 = replica1->Push(0, grads.data(), &stats);
  push0.join();
  ASSERT_TRUE(pushed0.ok()) << pushed0.status();
  ASSERT_TRUE(pushed1.ok()) << pushed1.status();
  EXPECT_EQ(pushed0->global_step, 1);
  EXPECT_EQ(pushed1->global_step, 1);
  // Each chunk applied the mean of two equal pushes once.
  view = replica0->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  for (int i = 0; i < kNumParams; ++i) EXPECT_EQ(view->params[i], initial[i] - 2.0f) << i;
  // As both replicas go on, a pull at a step the chunks are at is a plain pull.
  view = replica1->PullAt(1);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->global_step, 1);
  EXPECT_EQ(view->params[9], 7.0f);
  ps0->server->Shutdown();
  ps1->server->Shutdown();
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

// A chunk whose parameters did not change since the client's last answer
// (plain SGD, an all-zero gradient here; frozen layers alike) is answered
// without its parameters, and the client keeps its copy.
TEST_F(PsRpcTest, AnUnchangedChunkIsAnsweredWithoutItsParameters) {
  Initialize();
  ASSERT_TRUE(client_->Pull().ok());
  const float stats = 3;
  // Step 0: both chunks move and answer with their versions.
  std::vector<float> grads(kNumParams, 1.0f);
  ASSERT_TRUE(client_->Push(0, grads.data(), &stats).ok());
  ASSERT_TRUE(client_->Pull().ok());
  EXPECT_EQ(client_->unchanged_answers(), 0);
  // Step 1: chunk 1 (params 5..9) gets zeros: answered without parameters.
  for (int i = 5; i < kNumParams; ++i) grads[i] = 0.0f;
  const int64_t received = client_->bytes_received();
  ASSERT_TRUE(client_->Push(1, grads.data(), &stats).ok());
  absl::StatusOr<ParameterView> view = client_->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(client_->unchanged_answers(), 1);
  // Chunk 0's 5 floats and the state came; chunk 1's parameters did not.
  EXPECT_EQ(client_->bytes_received() - received, 5 * 4 + 4);
  for (int i = 0; i < kNumParams; ++i) EXPECT_EQ(view->params[i], i < 5 ? i - 2.0f : i - 1.0f) << i;
  EXPECT_EQ(view->global_step, 2);
  // Step 2: chunk 1 moves again and sends its new values.
  std::fill(grads.begin(), grads.end(), 1.0f);
  ASSERT_TRUE(client_->Push(2, grads.data(), &stats).ok());
  view = client_->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(client_->unchanged_answers(), 1);
  for (int i = 0; i < kNumParams; ++i) EXPECT_EQ(view->params[i], i < 5 ? i - 3.0f : i - 2.0f) << i;
  // A client that holds a version of another generation gets the values.
  PushRequest request;
  request.set_chunk(0);
  request.set_replica(1);
  request.set_step(3);
  request.set_gradients(Floats(std::vector<float>(5, 0.0f)));
  request.set_batch_stats(Floats({0}));
  request.set_generation(0);
  request.set_have_params_version(1 << 20);
  PushPullResponse response;
  ASSERT_TRUE(Call(request, &response).ok());
  EXPECT_FALSE(response.params_unchanged());
  EXPECT_EQ(response.params().size(), 5 * sizeof(float));
}

// A new or restarted ps answers Unavailable until the chief initializes or
// restores it: clients retry it as they retry a ps that is not up yet.
TEST_F(PsRpcTest, PullBeforeInitializeIsUnavailable) {
  grpc::ClientContext ctx;
  PullRequest request;
  PullResponse response;
  grpc::Status s = stub_->Pull(&ctx, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(s.error_message().find("not initialized"), std::string::npos) << s.error_message();
}

TEST_F(PsRpcTest, BadInitializeIsRefused) {
  auto init = [&](InitializeRequest r) {
    grpc::ClientContext ctx;
    InitializeResponse response;
    return stub_->Initialize(&ctx, r, &response);
  };
  InitializeRequest good;
  good.set_chunk(0);
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
  r.set_chunk(1);
  s = init(r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("chunk 1"), std::string::npos) << s.error_message();
  r = good;
  r.set_params(std::string(7, 'x'));  // not whole floats
  EXPECT_EQ(init(r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_FALSE(ps0_->shard->GetStats().initialized);
  EXPECT_TRUE(init(good).ok());
}

TEST_F(PsRpcTest, ASparsePushUpdatesOnlyItsOffsets) {
  Initialize();
  PushRequest push;
  push.set_chunk(0);
  push.set_replica(1);
  push.set_step(0);
  push.set_gradients(Floats({2, 4}));  // SGD, learning rate 1
  const std::vector<uint32_t> at = {1, 3};
  push.set_indices(std::string(reinterpret_cast<const char*>(at.data()), 8));
  push.set_batch_stats(Floats({1}));
  PushPullResponse response;
  grpc::Status s = Call(push, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  auto view = client_->Pull();
  ASSERT_TRUE(view.ok());
  const std::vector<float> want = {0, 1 - 2, 2, 3 - 4, 4};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(view->params[i], want[i]) << i;
}

TEST_F(PsRpcTest, BadPushesAreRefusedAndChangeNothing) {
  Initialize();
  PushRequest good;
  good.set_chunk(0);
  good.set_replica(1);
  good.set_step(0);
  good.set_gradients(Floats({1, 1, 1, 1, 1}));
  good.set_batch_stats(Floats({1}));
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<PushRequest> bad(17, good);
  bad[0].set_gradients(Floats({1, 1, 1}));                     // short
  bad[1].set_gradients(Floats(std::vector<float>(50, 1.0f)));  // long
  bad[2].set_gradients(std::string(19, 'x'));                  // not whole floats
  bad[3].set_chunk(1);                                         // sent to the wrong ps
  bad[4].set_replica(5);                                       // unknown replica
  bad[5].set_step(3);                                          // ahead of the ps
  bad[6].set_gradients(Floats({1, 1, nan, 1, 1}));             // non-finite gradients
  bad[7].set_gradients(Floats({1, -inf, 1, 1, 1}));
  bad[8].set_batch_stats(Floats({inf}));  // non-finite statistics
  bad[9].set_examples(-20);               // negative counts
  bad[10].set_loss_batches(-1);
  bad[11].set_loss_sum(nan);
  bad[12].set_dtype(BFLOAT16);  // no bfloat16 values at all (a fuzzer find)
  bad[12].clear_gradients();
  bad[13].set_dtype(BFLOAT16);  // an odd number of bytes
  bad[13].set_gradients(std::string(9, 'x'));
  // Sparse (top-k) pushes: an offset past the chunk, offsets out of order,
  // more offsets than values.
  auto offsets = [](std::vector<uint32_t> v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(uint32_t));
  };
  bad[14].set_gradients(Floats({1}));
  bad[14].set_indices(offsets({5}));
  bad[15].set_gradients(Floats({1, 1}));
  bad[15].set_indices(offsets({3, 1}));
  bad[16].set_gradients(Floats({1}));
  bad[16].set_indices(offsets({0, 1}));
  const std::vector<std::string> said = {"",
                                         "",
                                         "",
                                         "",
                                         "",
                                         "",
                                         "1 non-finite",
                                         "1 non-finite",
                                         "1 non-finite",
                                         "examples = -20",
                                         "loss_batches = -1",
                                         "loss_sum = nan",
                                         "",
                                         "not a whole number",
                                         "offset 5 after -1 in a chunk of 5",
                                         "offset 1 after 3",
                                         "8 bytes of offsets for 1 values"};
  for (size_t i = 0; i < bad.size(); ++i) {
    PushPullResponse response;
    grpc::Status s = Call(bad[i], &response);
    // A step ahead is what a replica sends after a rollback: aborted, pull again.
    EXPECT_EQ(s.error_code(),
              i == 5 ? grpc::StatusCode::ABORTED : grpc::StatusCode::INVALID_ARGUMENT)
        << i << ": " << s.error_message();
    EXPECT_FALSE(s.error_message().empty());
    EXPECT_NE(s.error_message().find(said[i]), std::string::npos) << i << ": " << s.error_message();
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

// The chief's part of a save: the index over the ps's shard files.
void WriteIndex(Env* env, const std::string& path, int64_t step,
                const std::vector<ShardSaved>& saved) {
  CheckpointIndex index;
  index.set_model("tiny");
  index.set_global_step(step);
  index.set_num_params(kNumParams);
  index.set_num_state(1);
  index.set_optimizer(saved[0].optimizer);
  for (const ShardSaved& r : saved) {
    CheckpointShardFile* f = index.add_shards();
    f->set_file(r.file);
    f->set_begin(r.begin);
    f->set_end(r.end);
    f->set_num_state(r.num_state);
    f->set_size_bytes(r.size_bytes);
    f->set_crc32c(r.crc32c);
  }
  ASSERT_TRUE(WriteCheckpointIndex(env, path, index).ok());
}

PsClientOptions OptionsFor(const std::vector<std::string>& addresses) {
  PsClientOptions o;
  o.ps_addresses = addresses;
  o.layout = ComputeShardLayout(kNumParams, 1, {0}, static_cast<int>(addresses.size()));
  o.replica = 0;
  o.rpc_timeout = absl::Seconds(10);
  o.retry_budget = absl::Seconds(2);
  return o;
}

std::unique_ptr<PsClient> ClientFor(const std::vector<std::string>& addresses) {
  return *PsClient::Create(OptionsFor(addresses));
}

std::unique_ptr<GrpcParameterServers> ServersFor(const std::vector<std::string>& addresses) {
  const PsClientOptions o = OptionsFor(addresses);
  return *GrpcParameterServers::Create(o.ps_addresses, o.layout, o.rpc_timeout, o.retry_budget);
}

std::string Ids(std::vector<int64_t> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
}

// Ids of table `table` of TestSparseModel that ps `ps` of 2 holds, the first `n`.
std::vector<int64_t> OwnedIds(int table, int ps, int n) {
  const ShardLayout layout = ComputeShardLayout(*testing_util::TestSparseModel(), 2);
  std::vector<int64_t> ids;
  for (int64_t id = 0; static_cast<int>(ids.size()) < n; ++id) {
    if (RowOwner(layout.tables[table].key, id, 2) == ps) ids.push_back(id);
  }
  return ids;
}

TEST_F(PsRpcTest, RowsRoundTripAndBadRowRequestsAreRefusedChangingNothing) {
  Initialize();  // the rows answer UNAVAILABLE until the ps is initialized
  auto pull = [&](const PullRowsRequest& request, PullRowsResponse* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->PullRows(&ctx, request, response);
  };
  auto push = [&](const PushRowsRequest& request, PushRowsResponse* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->PushRows(&ctx, request, response);
  };
  const std::vector<int64_t> ids = OwnedIds(0, 0, 2);
  PushRowsRequest good;
  good.set_replica(1);
  TableRows* rows = good.add_tables();
  rows->set_table(0);
  rows->set_ids(Ids(ids));
  rows->set_values(Floats({1, -1, 2, -2}));  // 2 ids x dim 2
  // Bad pushes, each answered INVALID_ARGUMENT with its reason.
  struct Bad {
    std::function<void(PushRowsRequest*)> edit;
    std::string reason;
  };
  const std::vector<Bad> bad = {
      {[](PushRowsRequest* r) {
         r->mutable_tables(0)->set_values(Floats({1, 2, 3}));
       },
       "expected 4 float32 values"},
      {[](PushRowsRequest* r) { r->mutable_tables(0)->set_ids("1234567"); },
       "not a whole number of int64 ids"},
      {[](PushRowsRequest* r) { r->mutable_tables(0)->set_table(7); },
       "table 7 is not one of the model's 2 embedding tables"},
      {[&](PushRowsRequest* r) {
         r->mutable_tables(0)->set_ids(Ids({ids[0], ids[0]}));
       },
       "pushed twice"},
      {[](PushRowsRequest* r) {
         r->mutable_tables(0)->set_ids(Ids({-5, 0}));
       },
       "is negative"},
      {[&](PushRowsRequest* r) {
         r->mutable_tables(0)->set_ids(Ids({ids[0], OwnedIds(0, 1, 1)[0]}));
       },
       "not on ps 0"},
      {[](PushRowsRequest* r) { r->set_replica(9); }, "replica 9"},
  };
  for (const Bad& b : bad) {
    PushRowsRequest request = good;
    b.edit(&request);
    PushRowsResponse response;
    const grpc::Status s = push(request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << b.reason;
    EXPECT_NE(s.error_message().find(b.reason), std::string::npos) << s.error_message();
  }
  EXPECT_EQ(ps0_->task->sparse()->tables()[0]->size(), 0);  // nothing was applied

  PushRowsResponse pushed;
  ASSERT_TRUE(push(good, &pushed).ok());
  EXPECT_FALSE(pushed.stale());
  PullRowsRequest read;
  read.set_replica(-1);
  TableRows* want = read.add_tables();
  want->set_table(0);
  want->set_ids(Ids(ids));
  PullRowsResponse answer;
  ASSERT_TRUE(pull(read, &answer).ok());
  ASSERT_EQ(answer.tables_size(), 1);
  ASSERT_EQ(answer.tables(0).values().size(), 4 * sizeof(float));
  std::vector<float> values(4);
  std::memcpy(values.data(), answer.tables(0).values().data(), 4 * sizeof(float));
  // Adagrad, learning rate 1, accumulator 0.1 + g^2, from zeros.
  for (int k = 0; k < 4; ++k) {
    const float g = std::vector<float>{1, -1, 2, -2}[k];
    EXPECT_NEAR(values[k], -g / std::sqrt(0.1f + g * g), 1e-5) << k;
  }
  // A pull of another ps's row, or of a table of another dim's size, is refused.
  want->set_ids(Ids({OwnedIds(0, 1, 1)[0]}));
  grpc::Status s = pull(read, &answer);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  want->set_table(-1);
  s = pull(read, &answer);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
}

TEST_F(PsRpcTest, SaveOnTwoPsRestoresOnOneAndBack) {
  Initialize();
  std::vector<float> grads(kNumParams);
  for (int i = 0; i < kNumParams; ++i) grads[i] = 0.25f * i;
  const float stats = 5;
  ASSERT_TRUE(client_->Push(0, grads.data(), &stats).ok());
  ASSERT_TRUE(client_->Push(1, grads.data(), &stats).ok());
  absl::StatusOr<ParameterView> before = client_->PullLatest();
  ASSERT_TRUE(before.ok());
  const std::vector<float> expected(before->params, before->params + kNumParams);

  absl::StatusOr<std::vector<ShardSaved>> saved = servers_->Save(2, 2, absl::ZeroDuration());
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_EQ(saved->size(), 2u);
  EXPECT_EQ((*saved)[0].file, "model.ckpt-2.shard-0-of-2");
  EXPECT_EQ((*saved)[1].file, "model.ckpt-2.shard-1-of-2");
  EXPECT_EQ((*saved)[1].begin, 5);
  EXPECT_EQ((*saved)[0].min_step, 2);
  EXPECT_TRUE(env_.FileExists("/job/model.ckpt-2.shard-1-of-2"));
  WriteIndex(&env_, "/job/model.ckpt-2.index", 2, *saved);

  // One ps restores what two wrote.
  auto single = StartPs(0, 1, &env_);
  auto one = ClientFor({single->address});
  auto one_servers = ServersFor({single->address});
  absl::StatusOr<int64_t> step = one_servers->Restore("tiny", 2);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 2);
  absl::StatusOr<ParameterView> restored = one->PullLatest();
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(std::vector<float>(restored->params, restored->params + kNumParams), expected);
  EXPECT_EQ(restored->state[0], 5);
  EXPECT_EQ(restored->global_step, 2);

  // And two restore what one wrote, after they were initialized afresh.
  ASSERT_TRUE(one->Push(2, grads.data(), &stats).ok());
  absl::StatusOr<ParameterView> moved = one->PullLatest();
  const std::vector<float> expected3(moved->params, moved->params + kNumParams);
  saved = one_servers->Save(3, 3, absl::ZeroDuration());
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ((*saved)[0].file, "model.ckpt-3.shard-0-of-1");
  WriteIndex(&env_, "/job/model.ckpt-3.index", 3, *saved);
  Initialize();
  step = servers_->Restore("tiny", 3);
  ASSERT_TRUE(step.ok()) << step.status();
  absl::StatusOr<ParameterView> back = client_->PullLatest();
  EXPECT_EQ(std::vector<float>(back->params, back->params + kNumParams), expected3);
  EXPECT_EQ(back->global_step, 3);
  single->server->Shutdown();
}

TEST_F(PsRpcTest, BadSaveRestoreAndLeaveRequestsAreRefused) {
  auto save = [&](const SaveRequest& r) {
    grpc::ClientContext ctx;
    SaveResponse response;
    return stub_->Save(&ctx, r, &response);
  };
  auto restore = [&](const RestoreRequest& r) {
    grpc::ClientContext ctx;
    RestoreResponse response;
    return stub_->Restore(&ctx, r, &response);
  };
  SaveRequest good_save;
  good_save.set_step(0);
  // Nothing to save before initialization.
  EXPECT_EQ(save(good_save).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  Initialize();
  SaveRequest r = good_save;
  r.set_step(-1);
  EXPECT_EQ(save(r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  r = good_save;
  r.set_wait_ms(-1);
  EXPECT_EQ(save(r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // A checkpoint is named by its step, in the ps's job dir (/job). A request
  // that still carries a path (field 1, as older clients sent it) is refused,
  // and nothing is written anywhere.
  for (const char* outside : {"/tmp/elsewhere/evil", "/tmp/elsewhere/model.ckpt-0",
                              "/job/../tmp/model.ckpt-0", "/job/sub/model.ckpt-0"}) {
    r = good_save;
    r.GetReflection()->MutableUnknownFields(&r)->AddLengthDelimited(1, outside);
    const grpc::Status s = save(r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << outside;
    EXPECT_NE(s.error_message().find("job dir /job"), std::string::npos) << s.error_message();
  }
  EXPECT_TRUE(env_.ListDir("/tmp").value_or(std::vector<std::string>{}).empty());
  EXPECT_FALSE(env_.FileExists("/job/model.ckpt-0.shard-0-of-2"));

  RestoreRequest good_restore;
  good_restore.set_model("tiny");
  good_restore.set_num_params(kNumParams);
  good_restore.set_step(0);
  // An index the chief found but this ps cannot: a job dir not shared.
  grpc::Status missing = restore(good_restore);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(missing.error_message().find("every task must see the job dir"), std::string::npos)
      << missing.error_message();
  for (const char* outside : {"/etc/passwd", "../../../../etc/shadow", "/tmp/model.ckpt-0.index"}) {
    RestoreRequest elsewhere = good_restore;
    elsewhere.GetReflection()->MutableUnknownFields(&elsewhere)->AddLengthDelimited(1, outside);
    EXPECT_EQ(restore(elsewhere).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << outside;
  }
  RestoreRequest negative = good_restore;
  negative.set_step(-1);
  EXPECT_EQ(restore(negative).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  RestoreRequest bad = good_restore;
  bad.set_model("other");
  EXPECT_EQ(restore(bad).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  bad = good_restore;
  bad.set_num_params(3);
  EXPECT_EQ(restore(bad).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // A damaged shard file: DATA_LOSS naming it, and nothing changes.
  absl::StatusOr<std::vector<ShardSaved>> saved = servers_->Save(0, 0, absl::ZeroDuration());
  ASSERT_TRUE(saved.ok()) << saved.status();
  WriteIndex(&env_, "/job/model.ckpt-0.index", 0, *saved);
  std::string bytes = *env_.ReadFile("/job/model.ckpt-0.shard-0-of-2");
  bytes[bytes.size() - 9] ^= 0x10;
  ASSERT_TRUE(env_.WriteFileAtomic("/job/model.ckpt-0.shard-0-of-2", bytes).ok());
  std::vector<float> grads(kNumParams, 1.0f);
  const float stats = 0;
  ASSERT_TRUE(client_->Push(0, grads.data(), &stats).ok());
  grpc::Status s = restore(good_restore);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_NE(s.error_message().find("model.ckpt-0.shard-0-of-2"), std::string::npos)
      << s.error_message();
  absl::StatusOr<ParameterView> view = client_->PullLatest();
  EXPECT_EQ(view->global_step, 1);
  EXPECT_EQ(view->params[0], -1.0f);

  grpc::ClientContext ctx;
  LeaveRequest leave;
  leave.set_replica(5);
  LeaveResponse left;
  EXPECT_EQ(stub_->Leave(&ctx, leave, &left).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// The client side of bad requests: a client whose picture of the job does not
// match the ps it reaches gets a clear error naming the ps, never silence.
TEST_F(PsRpcTest, ClientRefusesALayoutThatDoesNotFitItsAddresses) {
  PsClientOptions o = OptionsFor({ps0_->address, ps1_->address});
  o.layout = ComputeShardLayout(kNumParams, 1, {0}, 3);  // three ranges, two addresses
  absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(o);
  EXPECT_TRUE(absl::IsInvalidArgument(client.status())) << client.status();
  EXPECT_TRUE(absl::IsInvalidArgument(
      GrpcParameterServers::Create(o.ps_addresses, o.layout, o.rpc_timeout, o.retry_budget)
          .status()));
}

TEST_F(PsRpcTest, ClientNamesAPsListedOutOfOrder) {
  auto swapped = ServersFor({ps1_->address, ps0_->address});
  absl::Status s = swapped->WaitReady(absl::Seconds(5), false, nullptr);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("is task 1, expected task 0"), std::string::npos) << s;
}

TEST_F(PsRpcTest, ClientWithAnotherModelSizeGetsClearErrors) {
  Initialize();
  PsClientOptions o = OptionsFor({ps0_->address, ps1_->address});
  o.layout = ComputeShardLayout(kNumParams + 2, 1, {0}, 2);  // 12 parameters, not 10
  auto client = *PsClient::Create(o);
  absl::StatusOr<ParameterView> view = client->Pull();
  EXPECT_TRUE(absl::IsDataLoss(view.status())) << view.status();
  EXPECT_NE(view.status().message().find("expected 24"), std::string::npos) << view.status();

  std::vector<float> grads(kNumParams + 2, 1.0f);
  const float stats = 0;
  absl::StatusOr<PushOutcome> pushed = client->Push(0, grads.data(), &stats);
  EXPECT_TRUE(absl::IsInvalidArgument(pushed.status())) << pushed.status();
  // The ps that refused is named with its address (chunks go out last first,
  // so either may be the one reported).
  const std::string message(pushed.status().message());
  EXPECT_TRUE(message.find("PushPull to ps 0 at " + ps0_->address) != std::string::npos ||
              message.find("PushPull to ps 1 at " + ps1_->address) != std::string::npos)
      << message;
  EXPECT_NE(message.find("which holds 5 parameters"), std::string::npos) << message;
  auto servers =
      *GrpcParameterServers::Create(o.ps_addresses, o.layout, o.rpc_timeout, o.retry_budget);
  absl::StatusOr<int64_t> restored = servers->Restore("tiny", 9);
  EXPECT_TRUE(absl::IsInvalidArgument(restored.status())) << restored.status();
  EXPECT_NE(restored.status().message().find("with 12 parameters reached a ps serving"),
            std::string::npos)
      << restored.status();
  // Nothing changed on the ps.
  auto ok = client_->Pull();
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->global_step, 0);
  EXPECT_EQ(ok->params[0], 0.0f);
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
  auto servers =
      *GrpcParameterServers::Create(o.ps_addresses, o.layout, o.rpc_timeout, o.retry_budget);
  absl::Status wait = servers->WaitReady(absl::Milliseconds(300), false, nullptr);
  EXPECT_TRUE(absl::IsDeadlineExceeded(wait)) << wait;
}

}  // namespace
}  // namespace pstrain
