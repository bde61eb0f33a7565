// Replicated ps tasks over real gRPC on loopback (issue 55): two ps tasks
// with 2 copies, each the other's backup; the primaries' updates go over
// ParameterServer.Replicate; every backup ends as its primary (chunks and
// rows); a backup that is gone leaves its primary's stream and holds no
// answer up past the links' deadline; a malformed update is refused.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/env.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "models/dense.h"
#include "models/embedding.h"
#include "models/merge.h"
#include "proto/parameter_server.grpc.pb.h"
#include "ps/ps_task.h"
#include "ps_protocol/shard_layout.h"
#include "rpc/grpc_replica_links.h"
#include "rpc/ps_server.h"
#include "testing/replicated_ps_util.h"

namespace pstrain {
namespace {

// A port on 127.0.0.1 nobody listens on now.
std::string FreeLoopbackAddress() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  return "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

class PsReplicationRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing_util::ReplicatedClickModel();
    job_.training.model = "click";
    job_.training.update = UpdateMode::kAsync;
    job_.training.optimizer = "adam";
    job_.training.learning_rate = 0.01f;
    job_.training.chief_trains = false;
    job_.cluster.worker = {"w:1"};
    addresses_ = {FreeLoopbackAddress(), FreeLoopbackAddress()};
    job_.cluster.ps = addresses_;
    layout_ = ComputeShardLayout(*model_, 2);
    links_ = std::make_unique<GrpcReplicaLinks>(addresses_, absl::Seconds(3));
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<std::unique_ptr<PsTask>> task =
          PsTask::Create(job_, *model_, i, &env_, nullptr, {.copies = 2, .links = links_.get()});
      ASSERT_TRUE(task.ok()) << task.status();
      tasks_.push_back(std::move(*task));
      absl::StatusOr<std::unique_ptr<GrpcPsServer>> server =
          GrpcPsServer::Start(tasks_.back().get(), *model_, i, addresses_[i], WireSecurity());
      ASSERT_TRUE(server.ok()) << server.status();
      servers_.push_back(std::move(*server));
    }
    std::vector<float> params(layout_.num_params, 0.125f);
    for (size_t c = 0; c < layout_.chunks.size(); ++c) {
      const Chunk& chunk = layout_.chunks[c];
      for (int t = 0; t < 2; ++t) {
        ASSERT_TRUE(tasks_[t]
                        ->Initialize(static_cast<int>(c), "click", layout_.num_params,
                                     absl::MakeConstSpan(params).subspan(chunk.begin,
                                                                         chunk.end - chunk.begin),
                                     {}, 0, /*generation=*/3)
                        .ok());
      }
    }
  }

  // Replica 0's push of every chunk and of 30 rows per table, at `step`.
  void Push(int64_t step) {
    for (size_t c = 0; c < layout_.chunks.size(); ++c) {
      const Chunk& chunk = layout_.chunks[c];
      std::vector<float> g(chunk.end - chunk.begin, 0.01f * static_cast<float>(step % 5) - 0.02f);
      absl::Notification done;
      tasks_[chunk.ps]->Push(static_cast<int>(c), 0, step, 0, g, {}, {},
                             [&](absl::Status s, PushResult) {
                               EXPECT_TRUE(s.ok()) << s;
                               done.Notify();
                             });
      ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
    }
    for (int task = 0; task < 2; ++task) {
      std::vector<std::vector<int64_t>> ids(2);
      std::vector<std::vector<float>> grads(2);
      for (int t = 0; t < 2; ++t) {
        for (int64_t id = step; id < step + 60; ++id) {
          if (RowOwner(layout_.tables[t].key, id, 2) != task) continue;
          ids[t].push_back(id);
          for (int d = 0; d < layout_.tables[t].dim; ++d)
            grads[t].push_back(0.02f * (id % 3) - 0.02f);
        }
      }
      absl::StatusOr<PushResult> pushed =
          tasks_[task]->PushRows(0, step, 0, {{0, ids[0], grads[0]}, {1, ids[1], grads[1]}});
      ASSERT_TRUE(pushed.ok()) << pushed.status();
    }
  }

  MemEnv env_;
  JobConfig job_;
  std::unique_ptr<Model> model_;
  ShardLayout layout_;
  std::vector<std::string> addresses_;
  std::unique_ptr<GrpcReplicaLinks> links_;
  std::vector<std::unique_ptr<PsTask>> tasks_;
  std::vector<std::unique_ptr<GrpcPsServer>> servers_;
};

TEST_F(PsReplicationRpcTest, BackupsOverGrpcEndAsTheirPrimaries) {
  for (int64_t step = 0; step < 30; ++step) Push(step);
  for (size_t c = 0; c < layout_.chunks.size(); ++c) {
    const int backup_task = 1 - layout_.chunks[c].ps;
    ParameterShard* backup = tasks_[backup_task]->backup(static_cast<int>(c));
    ASSERT_NE(backup, nullptr);
    ParameterShard* primary = nullptr;
    for (ParameterShard* s : tasks_[layout_.chunks[c].ps]->shards()) {
      if (s->options().chunk == static_cast<int>(c)) primary = s;
    }
    ASSERT_NE(primary, nullptr);
    absl::StatusOr<ShardSnapshot> a = primary->Snapshot(-1, absl::ZeroDuration());
    absl::StatusOr<ShardSnapshot> b = backup->Snapshot(-1, absl::ZeroDuration());
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->params, b->params) << c;
    EXPECT_EQ(a->slots, b->slots) << c;
    EXPECT_EQ(a->step, b->step) << c;
  }
  for (int owner = 0; owner < 2; ++owner) {
    SparseShard* backup = tasks_[1 - owner]->backup_rows(owner);
    ASSERT_NE(backup, nullptr);
    const auto want = testing_util::AllRowsOf(*tasks_[owner]->sparse());
    EXPECT_GT(want.size(), 30u);
    EXPECT_EQ(testing_util::AllRowsOf(*backup), want) << "rows of task " << owner;
  }
}

TEST_F(PsReplicationRpcTest, ABackupThatIsGoneHoldsNoAnswerUpPastTheDeadline) {
  Push(0);
  servers_[1]->Shutdown(absl::Seconds(1));
  const absl::Time start = absl::Now();
  for (int64_t step = 1; step < 4; ++step) {
    for (size_t c = 0; c < layout_.chunks.size(); ++c) {
      if (layout_.chunks[c].ps != 0) continue;
      absl::Notification done;
      tasks_[0]->Push(static_cast<int>(c), 0, step, 0,
                      std::vector<float>(layout_.chunks[c].end - layout_.chunks[c].begin, 0.1f), {},
                      {}, [&](absl::Status s, PushResult) {
                        EXPECT_TRUE(s.ok()) << s;
                        done.Notify();
                      });
      ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20)));
    }
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST_F(PsReplicationRpcTest, AMalformedUpdateIsRefused) {
  auto stub = ParameterServer::NewStub(
      grpc::CreateChannel(addresses_[1], grpc::InsecureChannelCredentials()));
  ReplicateRequest request;
  request.set_chunk(tasks_[1]->backup_chunks().front());
  request.mutable_applied()->set_sequence(1);
  request.mutable_applied()->set_generation(3);
  request.set_grads("abc");  // not whole floats
  grpc::ClientContext context;
  ReplicateResponse response;
  EXPECT_EQ(stub->Replicate(&context, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  request.set_grads("");
  request.mutable_applied()->add_replicas(0);  // no step for it
  grpc::ClientContext again;
  EXPECT_EQ(stub->Replicate(&again, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  request.mutable_applied()->clear_replicas();
  request.set_chunk(tasks_[1]->shards().front()->options().chunk);  // its own, no backup
  grpc::ClientContext own;
  EXPECT_EQ(stub->Replicate(&own, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace pstrain
