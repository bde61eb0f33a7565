// Replicated ps tasks over real gRPC on loopback (issue 55): two ps tasks
// with 2 copies, each the other's backup; the primaries' updates go over
// ParameterServer.Replicate; every backup ends as its primary (chunks and
// rows); a backup that is gone leaves its primary's stream, whose answers
// then wait for the chief's confirmation of the drop and no longer; a
// restarted task rejoins with copies over the wire; a malformed update,
// copy, promotion or fence is refused.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
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

// Ps 1 is gone: ps 0's streams drop it, and hold their answers until the
// chief (here: a Status call that confirms the drops, as its failover
// watch's probe does) has seen the drop; then every answer goes, and the
// later ones at once.
TEST_F(PsReplicationRpcTest, ABackupThatIsGoneHoldsAnswersOnlyUntilTheChiefConfirmsTheDrop) {
  Push(0);
  servers_[1]->Shutdown(absl::Seconds(1));
  auto stub = ParameterServer::NewStub(
      grpc::CreateChannel(addresses_[0], grpc::InsecureChannelCredentials()));
  // The chief's probe: ps 0's status, confirming the drops it says.
  auto probe = [&](int64_t confirm) {
    StatusRequest request;
    request.set_confirm_drops(confirm);
    StatusResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    EXPECT_TRUE(stub->Status(&context, request, &response).ok());
    return response;
  };
  std::vector<int> own;
  for (size_t c = 0; c < layout_.chunks.size(); ++c) {
    if (layout_.chunks[c].ps == 0) own.push_back(static_cast<int>(c));
  }
  const std::vector<float> g(layout_.chunks[own[0]].end - layout_.chunks[own[0]].begin, 0.1f);
  absl::Notification first;
  tasks_[0]->Push(own[0], 0, 1, 0, g, {}, {}, [&](absl::Status s, PushResult) {
    EXPECT_TRUE(s.ok()) << s;
    first.Notify();
  });
  // The link to ps 1 fails (refused, or past its 3 s deadline): dropped.
  StatusResponse seen;
  for (int i = 0; i < 100 && seen.backup_drops() == 0; ++i) {
    seen = probe(0);
    if (seen.backup_drops() == 0) absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_GT(seen.backup_drops(), 0);
  // One entry per drop, each naming ps 1.
  EXPECT_EQ(seen.dropped_backups_size(), seen.backup_drops());
  EXPECT_EQ(std::set<int>(seen.dropped_backups().begin(), seen.dropped_backups().end()),
            std::set<int>{1});
  // Not answered until the drop is confirmed.
  EXPECT_FALSE(first.WaitForNotificationWithTimeout(absl::Milliseconds(300)));
  const absl::Time start = absl::Now();
  probe(seen.backup_drops());
  ASSERT_TRUE(first.WaitForNotificationWithTimeout(absl::Seconds(20)));
  // Every later push of ps 0's chunks: each stream drops ps 1 at once (its
  // link gave up on it) and is held again until confirmed.
  for (int64_t step = 2; step < 5; ++step) {
    for (int c : own) {
      absl::Notification done;
      tasks_[0]->Push(c, 0, step, 0,
                      std::vector<float>(layout_.chunks[c].end - layout_.chunks[c].begin, 0.1f), {},
                      {}, [&](absl::Status s, PushResult) {
                        EXPECT_TRUE(s.ok()) << s;
                        done.Notify();
                      });
      for (int i = 0; i < 200 && !done.WaitForNotificationWithTimeout(absl::Milliseconds(100));
           ++i) {
        probe(probe(0).backup_drops());
      }
      ASSERT_TRUE(done.HasBeenNotified()) << "step " << step << ", chunk " << c;
    }
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

// The chief's Promote and fence: a bad one changes nothing.
TEST_F(PsReplicationRpcTest, ABadPromotionOrFenceIsRefused) {
  auto stub = ParameterServer::NewStub(
      grpc::CreateChannel(addresses_[1], grpc::InsecureChannelCredentials()));
  auto call = [&](const PromoteRequest& request) {
    grpc::ClientContext context;
    PromoteResponse response;
    return stub->Promote(&context, request, &response).error_code();
  };
  PromoteRequest request;
  request.set_owner(0);
  request.set_epoch(2);
  request.add_backups(7);  // no such ps
  EXPECT_EQ(call(request), grpc::StatusCode::INVALID_ARGUMENT);
  request.clear_backups();
  request.set_owner(5);  // holds no copy of it
  EXPECT_EQ(call(request), grpc::StatusCode::INVALID_ARGUMENT);
  request.set_owner(0);
  request.set_epoch(1);  // not past the epoch it knows
  EXPECT_EQ(call(request), grpc::StatusCode::FAILED_PRECONDITION);
  PromoteRequest fence;
  fence.set_fence(true);
  fence.set_owner(0);  // a fence is for the receiving ps itself (1)
  fence.set_epoch(2);
  EXPECT_EQ(call(fence), grpc::StatusCode::INVALID_ARGUMENT);
  fence.set_owner(1);
  fence.set_epoch(1);  // a fence needs a failover's epoch
  EXPECT_EQ(call(fence), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_FALSE(tasks_[1]->serves(0));
  EXPECT_TRUE(tasks_[1]->serves(1));
  EXPECT_TRUE(tasks_[1]->Status().initialized);
  // A good promotion, then asked for ps 0's status there.
  request.set_epoch(2);
  EXPECT_EQ(call(request), grpc::StatusCode::OK);
  StatusRequest status;
  status.set_owner(0);
  StatusResponse answer;
  grpc::ClientContext context;
  ASSERT_TRUE(stub->Status(&context, status, &answer).ok());
  EXPECT_EQ(answer.ps_task(), 0);
  EXPECT_EQ(answer.served_by(), 1);
  EXPECT_EQ(answer.epoch(), 2);
  EXPECT_TRUE(answer.initialized());
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
  // Its own chunk, which it serves: the sender is refused as fenced.
  request.set_chunk(tasks_[1]->shards().front()->options().chunk);
  grpc::ClientContext own;
  EXPECT_EQ(stub->Replicate(&own, request, &response).error_code(), grpc::StatusCode::ABORTED);
  // A copy that is no whole number of values, or of a chunk it holds none of.
  InstallCopyRequest copy;
  copy.set_chunk(tasks_[1]->backup_chunks().front());
  copy.set_epoch(2);
  copy.set_params("abcde");
  InstallCopyResponse installed;
  grpc::ClientContext bad_copy;
  EXPECT_EQ(stub->InstallCopy(&bad_copy, copy, &installed).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  copy.set_params("");
  copy.set_chunk(1000);
  grpc::ClientContext no_chunk;
  EXPECT_EQ(stub->InstallCopy(&no_chunk, copy, &installed).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  AddBackupRequest add;
  add.set_owner(1);
  add.set_task(0);
  grpc::ClientContext no_timeout;
  AddBackupResponse added;
  EXPECT_EQ(stub->AddBackup(&no_timeout, add, &added).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  add.set_timeout_ms(1000);
  add.set_task(1);  // itself
  grpc::ClientContext itself;
  EXPECT_EQ(stub->AddBackup(&itself, add, &added).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// A rejoin over gRPC: ps 1 dies, ps 0 serves its chunks and rows (epoch 2);
// ps 1 restarts empty at its address, and ps 0 sends it a copy of both
// tasks' chunks and rows (InstallCopy, the rows in pieces) while pushes go
// on; ps 1 then holds what ps 0 holds, follows on, and refuses the
// replicas' requests for its own chunks (fenced: ps 0 serves them).
TEST_F(PsReplicationRpcTest, ARestartedPsRejoinsWithCopiesOverGrpc) {
  for (int64_t step = 0; step < 10; ++step) Push(step);
  servers_[1]->Shutdown(absl::ZeroDuration());
  servers_[1].reset();
  std::unique_ptr<PsTask> dead = std::move(tasks_[1]);
  ASSERT_TRUE(tasks_[0]->Promote(1, 2).ok());
  // Pushes to ps 0 for ps 1's chunks; ps 0's own stream drops ps 1 (its
  // answers wait for the drop's confirmation: given as the chief would).
  auto push_to_0 = [&](int64_t step) {
    for (size_t c = 0; c < layout_.chunks.size(); ++c) {
      const Chunk& chunk = layout_.chunks[c];
      std::vector<float> g(chunk.end - chunk.begin, 0.01f * static_cast<float>(step % 3));
      absl::Notification done;
      tasks_[0]->Push(static_cast<int>(c), 0, step, 0, g, {}, {}, [&](absl::Status s, PushResult) {
        EXPECT_TRUE(s.ok()) << s;
        done.Notify();
      });
      for (int k = 0; k < 3000 && !done.WaitForNotificationWithTimeout(absl::Milliseconds(10));
           ++k) {
        tasks_[0]->ConfirmDrops(tasks_[0]->Status().backup_drops);
      }
      ASSERT_TRUE(done.HasBeenNotified());
    }
  };
  for (int64_t step = 10; step < 14; ++step) push_to_0(step);

  absl::StatusOr<std::unique_ptr<PsTask>> restarted =
      PsTask::Create(job_, *model_, 1, &env_, nullptr, {.copies = 2, .links = links_.get()});
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  tasks_[1] = std::move(*restarted);
  absl::StatusOr<std::unique_ptr<GrpcPsServer>> server =
      GrpcPsServer::Start(tasks_[1].get(), *model_, 1, addresses_[1], WireSecurity());
  ASSERT_TRUE(server.ok()) << server.status();
  servers_[1] = std::move(*server);
  EXPECT_FALSE(tasks_[1]->Status().initialized);
  std::thread pusher([&] {
    for (int64_t step = 14; step < 20; ++step) push_to_0(step);
  });
  auto stub = ParameterServer::NewStub(
      grpc::CreateChannel(addresses_[0], grpc::InsecureChannelCredentials()));
  for (int owner : {0, 1}) {
    AddBackupRequest add;
    add.set_owner(owner);
    add.set_task(1);
    add.set_timeout_ms(30000);
    AddBackupResponse added;
    grpc::ClientContext context;
    const grpc::Status s = stub->AddBackup(&context, add, &added);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  pusher.join();
  push_to_0(20);
  const PsStatus rejoined = tasks_[1]->Status();
  EXPECT_TRUE(rejoined.initialized);
  EXPECT_EQ(rejoined.epoch, 2);
  EXPECT_TRUE(absl::IsAborted(tasks_[1]->StatusFor(1).status()));
  for (size_t c = 0; c < layout_.chunks.size(); ++c) {
    const int chunk = static_cast<int>(c);
    ParameterShard* on_0 = tasks_[0]->backup(chunk);
    ParameterShard* on_1 = tasks_[1]->backup(chunk);
    for (ParameterShard* s : tasks_[0]->shards()) {
      if (s->options().chunk == chunk) on_0 = s;
    }
    for (ParameterShard* s : tasks_[1]->shards()) {
      if (s->options().chunk == chunk) on_1 = s;
    }
    ASSERT_TRUE(on_0 != nullptr && on_1 != nullptr) << c;
    absl::StatusOr<ShardSnapshot> a = on_0->Snapshot(-1, absl::ZeroDuration());
    absl::StatusOr<ShardSnapshot> b = on_1->Snapshot(-1, absl::ZeroDuration());
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->params, b->params) << c;
    EXPECT_EQ(a->slots, b->slots) << c;
    EXPECT_EQ(a->step, b->step) << c;
  }
  // The rows pushed before the failure, on the copy of ps 1's rows ps 0
  // served, and ps 0's own, came over in pieces.
  EXPECT_GT(testing_util::AllRowsOf(*tasks_[1]->sparse()).size(), 20u);
  EXPECT_EQ(testing_util::AllRowsOf(*tasks_[1]->sparse()),
            testing_util::AllRowsOf(*tasks_[0]->backup_rows(1)));
  EXPECT_EQ(testing_util::AllRowsOf(*tasks_[1]->backup_rows(0)),
            testing_util::AllRowsOf(*tasks_[0]->sparse()));
}

}  // namespace
}  // namespace pstrain
