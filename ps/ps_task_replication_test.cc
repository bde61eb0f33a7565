// Replicated ps tasks (issue 55), the ps's side, over tasks in this
// process: with 2 copies on 3 ps, every task holds its own chunks and a
// backup of its ring neighbour's; the chief initializes and restores every
// copy; a push is answered once the backup holds it; backups end as their
// primaries, refuse the replicas' pushes and reads, and checkpoints stay
// the primaries'.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "io/checkpoint.h"
#include "models/dense.h"
#include "models/embedding.h"
#include "models/flatten.h"
#include "models/merge.h"
#include "proto/checkpoint.pb.h"
#include "ps/ps_task.h"
#include "ps_protocol/shard_layout.h"
#include "testing/replicated_ps_util.h"

namespace pstrain {
namespace {

// A 4x4 input, 3 classes: 51 parameters over 3 ps.
std::unique_ptr<Model> ReplicatedTinyModel() {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Flatten>("flatten"));
  DenseOptions dense;
  dense.units = 3;
  layers.push_back(std::make_unique<Dense>("dense", dense));
  return *Model::Create("tiny", {4, 4, 1}, 3, std::move(layers));
}

// The tasks of this process, as each other's backups see them.
class TaskLinks : public ReplicaLinks {
 public:
  absl::Status SendChunkUpdate(int task, int chunk, int64_t epoch,
                               const ChunkUpdate& update) override {
    if (absl::Notification* gate = hold.load(); gate != nullptr) gate->WaitForNotification();
    if (Gone(task)) return absl::UnavailableError("gone");
    return Task(task)->FollowChunk(chunk, update, epoch);
  }
  absl::Status SendRowsUpdate(int task, int partition, int64_t epoch,
                              const RowsUpdate& update) override {
    if (Gone(task)) return absl::UnavailableError("gone");
    return Task(task)->FollowRows(partition, update, epoch);
  }
  absl::Status SendChunkCopy(int task, int chunk, int64_t epoch,
                             const ParameterShard::BackupCopy& copy, absl::Time) override {
    if (Gone(task)) return absl::UnavailableError("gone");
    return Task(task)->InstallChunkCopy(chunk, epoch, copy);
  }
  // In pieces of 7 rows, as the wire cuts them.
  absl::Status SendRowsCopy(int task, int partition, int64_t epoch,
                            const SparseShard::BackupCopy& copy, absl::Time) override {
    if (Gone(task)) return absl::UnavailableError("gone");
    const std::vector<SparseShard::BackupCopy> pieces = RowsCopyPieces(copy, 7);
    for (size_t k = 0; k < pieces.size(); ++k) {
      absl::Status s = Task(task)->InstallRowsCopy(partition, epoch, pieces[k], static_cast<int>(k),
                                                   k + 1 == pieces.size());
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  // A restarted task replaces the one before (the senders read it).
  void SetTask(int i, PsTask* task) {
    absl::MutexLock lock(&mu);
    if (static_cast<int>(tasks.size()) <= i) tasks.resize(i + 1);
    tasks[i] = task;
  }
  PsTask* Task(int i) {
    absl::MutexLock lock(&mu);
    return tasks[i];
  }
  // Tasks whose links fail (a dead ps); the senders' threads read it.
  void SetGone(std::set<int> tasks_gone) {
    absl::MutexLock lock(&mu);
    gone = std::move(tasks_gone);
  }
  bool Gone(int task) {
    absl::MutexLock lock(&mu);
    return gone.contains(task);
  }
  absl::Mutex mu;
  std::set<int> gone ABSL_GUARDED_BY(mu);
  // Set: chunk updates wait for it before they are delivered.
  std::atomic<absl::Notification*> hold{nullptr};
  std::vector<PsTask*> tasks ABSL_GUARDED_BY(mu);
};

class PsTaskReplicationTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    model_ = GetParam() ? testing_util::ReplicatedClickModel() : ReplicatedTinyModel();
    model_name_ = GetParam() ? "click" : "tiny";
    job_.training.model = model_name_;
    job_.training.update = UpdateMode::kSync;
    job_.training.optimizer = "adam";
    job_.training.learning_rate = 0.01f;
    job_.training.job_dir = "/job";
    job_.cluster.ps = {"ps:1", "ps:2", "ps:3"};
    job_.cluster.worker = {"w:1"};
    job_.training.chief_trains = false;
    layout_ = ComputeShardLayout(*model_, 3);
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<std::unique_ptr<PsTask>> task =
          PsTask::Create(job_, *model_, i, &env_, nullptr, {.copies = 2, .links = &links_});
      ASSERT_TRUE(task.ok()) << task.status();
      tasks_.push_back(std::move(*task));
      links_.SetTask(i, tasks_.back().get());
    }
  }

  // The chief's initialization: every copy of every chunk.
  void InitializeAll(int64_t generation) {
    std::vector<float> params(layout_.num_params);
    for (size_t i = 0; i < params.size(); ++i) params[i] = 0.01f * static_cast<float>(i % 7);
    for (size_t c = 0; c < layout_.chunks.size(); ++c) {
      const Chunk& chunk = layout_.chunks[c];
      for (int t : ReplicaTasks(chunk.ps, 3, 2)) {
        ASSERT_TRUE(tasks_[t]
                        ->Initialize(static_cast<int>(c), model_name_, layout_.num_params,
                                     absl::MakeConstSpan(params).subspan(chunk.begin,
                                                                         chunk.end - chunk.begin),
                                     {}, 0, generation)
                        .ok());
      }
    }
  }

  // One sync step: both replicas push every chunk to its primary.
  void Step(int64_t step) {
    const int replicas = EffectiveTotalReplicas(job_);
    std::vector<std::unique_ptr<absl::Notification>> answered;
    for (int r = 0; r < replicas; ++r) {
      for (size_t c = 0; c < layout_.chunks.size(); ++c) {
        const Chunk& chunk = layout_.chunks[c];
        std::vector<float> g(chunk.end - chunk.begin, 0.1f * (r + 1) - 0.01f * step);
        answered.push_back(std::make_unique<absl::Notification>());
        absl::Notification* done = answered.back().get();
        tasks_[serving_[chunk.ps]]->Push(static_cast<int>(c), r, step, 0, g, {}, {},
                                         [done](absl::Status s, PushResult) {
                                           EXPECT_TRUE(s.ok()) << s;
                                           done->Notify();
                                         });
      }
    }
    for (auto& n : answered) ASSERT_TRUE(n->WaitForNotificationWithTimeout(absl::Seconds(30)));
    if (!model_->has_sparse()) return;
    // Each replica's rows: ids of both tables to the tasks that own them.
    for (int r = 0; r < replicas; ++r) {
      for (int task = 0; task < 3; ++task) {
        std::vector<std::vector<int64_t>> ids(2);
        std::vector<std::vector<float>> grads(2);
        for (int t = 0; t < 2; ++t) {
          for (int64_t id = step * 7 + r; id < step * 7 + r + 60; ++id) {
            const int64_t row = t == 1 ? id % 1000 : id;
            if (RowOwner(layout_.tables[t].key, row, 3) != task ||
                std::find(ids[t].begin(), ids[t].end(), row) != ids[t].end()) {
              continue;
            }
            ids[t].push_back(row);
            for (int d = 0; d < layout_.tables[t].dim; ++d) {
              grads[t].push_back(0.01f * static_cast<float>((row + d + r) % 11) - 0.05f);
            }
          }
        }
        std::vector<ConstRowsRef> parts = {{0, ids[0], grads[0]}, {1, ids[1], grads[1]}};
        absl::StatusOr<PushResult> pushed =
            tasks_[serving_[task]]->PushRows(r, step, 0, parts, task);
        ASSERT_TRUE(pushed.ok()) << pushed.status();
      }
    }
  }

  void ExpectBackupRowsAreTheirPrimaries() {
    if (!model_->has_sparse()) return;
    for (int owner = 0; owner < 3; ++owner) {
      const int backup_task = ReplicaTasks(owner, 3, 2)[1];
      SparseShard* backup = tasks_[backup_task]->backup_rows(owner);
      ASSERT_NE(backup, nullptr);
      const auto want = testing_util::AllRowsOf(*tasks_[owner]->sparse());
      EXPECT_GT(want.size(), 20u);
      EXPECT_EQ(testing_util::AllRowsOf(*backup), want) << "the rows of task " << owner;
      EXPECT_EQ(backup->step(), tasks_[owner]->sparse()->step());
    }
  }

  // Every task saves its own chunks and rows at `step`, and the chief's
  // index over their files is written: the primaries' files only, as
  // without replication.
  void SaveCheckpoint(int64_t step) {
    CheckpointIndex index;
    index.set_model(model_name_);
    index.set_global_step(step);
    index.set_num_params(layout_.num_params);
    for (const auto& task : tasks_) {
      absl::StatusOr<ShardSaved> saved = task->Save(step, step, absl::Seconds(5));
      ASSERT_TRUE(saved.ok()) << saved.status();
      EXPECT_EQ(saved->begin, task->shards().front()->options().begin);
      EXPECT_EQ(saved->end, task->shards().back()->options().end);
      index.set_optimizer(saved->optimizer);
      index.clear_slot_names();
      for (const std::string& name : saved->slot_names) index.add_slot_names(name);
      CheckpointShardFile* shard = index.add_shards();
      shard->set_file(saved->file);
      shard->set_begin(saved->begin);
      shard->set_end(saved->end);
      shard->set_size_bytes(saved->size_bytes);
      shard->set_crc32c(saved->crc32c);
      shard->set_rows_file(saved->rows_file);
      shard->set_rows_size_bytes(saved->rows_size_bytes);
      shard->set_rows_crc32c(saved->rows_crc32c);
    }
    for (const SparseTableInfo& t : model_->sparse_tables()) {
      CheckpointTable* table = index.add_tables();
      table->set_name(t.name);
      table->set_dim(t.dim);
      table->set_buckets(t.buckets);
      index.set_table_optimizer(job_.training.embedding_optimizer);
    }
    ASSERT_TRUE(
        WriteCheckpointIndex(&env_, JoinPath("/job", IndexFileName(CheckpointPrefix(step))), index)
            .ok());
  }

  void ExpectBackupsAreTheirPrimaries() {
    ExpectBackupRowsAreTheirPrimaries();
    for (size_t c = 0; c < layout_.chunks.size(); ++c) {
      const Chunk& chunk = layout_.chunks[c];
      const int backup_task = ReplicaTasks(chunk.ps, 3, 2)[1];
      ParameterShard* backup = tasks_[backup_task]->backup(static_cast<int>(c));
      ASSERT_NE(backup, nullptr) << c;
      ParameterShard* primary = nullptr;
      for (ParameterShard* s : tasks_[chunk.ps]->shards()) {
        if (s->options().chunk == static_cast<int>(c)) primary = s;
      }
      ASSERT_NE(primary, nullptr);
      absl::StatusOr<ShardSnapshot> a = primary->Snapshot(-1, absl::ZeroDuration());
      absl::StatusOr<ShardSnapshot> b = backup->Snapshot(-1, absl::ZeroDuration());
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_EQ(a->params, b->params) << "chunk " << c;
      EXPECT_EQ(a->slots, b->slots) << "chunk " << c;
      EXPECT_EQ(a->step, b->step) << "chunk " << c;
    }
  }

  MemEnv env_;
  std::string model_name_;
  JobConfig job_;
  std::unique_ptr<Model> model_;
  ShardLayout layout_;
  TaskLinks links_;
  std::vector<std::unique_ptr<PsTask>> tasks_;
  // Who serves each task's chunks and rows (failovers move them).
  std::vector<int> serving_ = {0, 1, 2};
};

TEST_P(PsTaskReplicationTest, EveryChunkHasABackupOnTheNextPsThatEndsAsItsPrimary) {
  for (int t = 0; t < 3; ++t) {
    std::vector<int> want;
    for (size_t c = 0; c < layout_.chunks.size(); ++c) {
      if (layout_.chunks[c].ps == (t + 2) % 3) want.push_back(static_cast<int>(c));
    }
    EXPECT_EQ(tasks_[t]->backup_chunks(), want) << "task " << t;
    EXPECT_FALSE(want.empty());
  }
  // A replicated chunk is initialized with the chief's generation only.
  EXPECT_TRUE(absl::IsInvalidArgument(tasks_[0]->Initialize(
      0, model_name_, layout_.num_params, std::vector<float>(layout_.chunks[0].end), {}, 0, 0)));
  InitializeAll(/*generation=*/31);
  for (int64_t step = 0; step < 20; ++step) Step(step);
  ExpectBackupsAreTheirPrimaries();
  EXPECT_EQ(tasks_[0]->Status().global_step, 20);

  // The replicas' pushes and reads go to the primary: a backup refuses them.
  const int chunk = tasks_[1]->backup_chunks().front();
  absl::Status pushed;
  tasks_[1]->Push(chunk, 0, 20, 0, std::vector<float>(tasks_[1]->ChunkSize(chunk), 1.0f), {}, {},
                  [&](absl::Status s, PushResult) { pushed = s; });
  EXPECT_TRUE(absl::IsFailedPrecondition(pushed)) << pushed;
  std::string params, state;
  EXPECT_TRUE(absl::IsFailedPrecondition(tasks_[1]->Read(chunk, &params, &state).status()));
  // An update of its own chunk from another task: it serves that chunk.
  EXPECT_TRUE(absl::IsAborted(
      tasks_[1]->FollowChunk(tasks_[1]->shards()[0]->options().chunk, ChunkUpdate())));
}

TEST_P(PsTaskReplicationTest, ACheckpointIsThePrimariesAndRestoresEveryCopy) {
  InitializeAll(/*generation=*/5);
  for (int64_t step = 0; step < 6; ++step) Step(step);
  SaveCheckpoint(6);
  absl::StatusOr<std::vector<std::string>> files = env_.ListDir("/job");
  ASSERT_TRUE(files.ok());
  // 3 shard files (and 3 rows files) and the index.
  EXPECT_EQ(files->size(), model_->has_sparse() ? 7u : 4u);

  // Trained on, then rolled back: every copy restored, with one generation,
  // and the backups follow their primaries on from there.
  for (int64_t step = 6; step < 9; ++step) Step(step);
  EXPECT_TRUE(
      absl::IsInvalidArgument(tasks_[0]->Restore(model_name_, layout_.num_params, 6, 0).status()));
  for (const auto& task : tasks_) {
    absl::StatusOr<int64_t> restored = task->Restore(model_name_, layout_.num_params, 6, 44);
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_EQ(*restored, 6);
  }
  ExpectBackupsAreTheirPrimaries();
  for (int64_t step = 6; step < 12; ++step) Step(step);
  ExpectBackupsAreTheirPrimaries();
  EXPECT_EQ(tasks_[2]->Status().global_step, 12);
}

// A failover at the ps's side: ps 0 dies; ps 1, which holds its backups,
// is promoted (epoch 2) and serves its chunks and rows with every
// acknowledged update, a retry of one applied once; ps 0 comes back and
// its next push is refused there (fenced by ps 1), and so is every later one.
TEST_P(PsTaskReplicationTest, APromotedBackupServesOnAndFencesTheOldPrimary) {
  InitializeAll(/*generation=*/9);
  for (int64_t step = 0; step < 5; ++step) Step(step);
  std::vector<int> chunks_of_0;
  std::map<int, std::vector<float>> before;
  for (ParameterShard* s : tasks_[0]->shards()) {
    chunks_of_0.push_back(s->options().chunk);
    before[s->options().chunk] = s->Snapshot(-1, absl::ZeroDuration())->params;
  }
  // ps 0 is gone: nothing reaches it.
  links_.SetGone({0});
  EXPECT_TRUE(absl::IsInvalidArgument(tasks_[2]->Promote(0, 2)));  // holds no copy of ps 0's
  EXPECT_TRUE(absl::IsFailedPrecondition(tasks_[1]->Promote(0, 1)));
  ASSERT_TRUE(tasks_[1]->Promote(0, 2).ok());
  ASSERT_TRUE(tasks_[1]->Promote(0, 2).ok());  // again: the same
  EXPECT_TRUE(tasks_[1]->serves(0));
  EXPECT_EQ(tasks_[1]->epoch(0), 2);
  // Its status says so, for the clients to find ps 0's chunks and rows.
  EXPECT_EQ(tasks_[1]->Status().serves, std::vector<int>{0});
  EXPECT_EQ(tasks_[1]->Status().serves_epochs, std::vector<int64_t>{2});
  EXPECT_TRUE(tasks_[2]->Status().serves.empty());
  for (int chunk : chunks_of_0) {
    // Every update ps 0 acknowledged is there.
    EXPECT_EQ(tasks_[1]->backup(chunk)->Snapshot(-1, absl::ZeroDuration())->params, before[chunk]);
    // A retry of the last step's push, counted before the failover: taken
    // as counted, not applied again; the next step's push is served.
    const int64_t size = tasks_[1]->ChunkSize(chunk);
    absl::Status retried, pushed;
    PushResult retry;
    tasks_[1]->Push(chunk, 0, 4, 0, std::vector<float>(size, 5.0f), {}, {},
                    [&](absl::Status s, PushResult r) {
                      retried = s;
                      retry = r;
                    });
    EXPECT_TRUE(retried.ok()) << retried;
    EXPECT_FALSE(retry.stale);
    EXPECT_EQ(tasks_[1]->backup(chunk)->Snapshot(-1, absl::ZeroDuration())->params, before[chunk]);
    absl::Notification done;
    tasks_[1]->Push(chunk, 0, 5, 0, std::vector<float>(size, 0.5f), {}, {},
                    [&](absl::Status s, PushResult) {
                      pushed = s;
                      done.Notify();
                    });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
    EXPECT_TRUE(pushed.ok()) << pushed;
    EXPECT_NE(tasks_[1]->backup(chunk)->Snapshot(-1, absl::ZeroDuration())->params, before[chunk]);
  }
  if (model_->has_sparse()) {
    // ps 0's rows are pushed to ps 1 now.
    std::vector<int64_t> ids;
    for (int64_t id = 0; ids.size() < 5; ++id) {
      if (RowOwner(layout_.tables[0].key, id, 3) == 0) ids.push_back(id);
    }
    std::vector<float> grads(ids.size() * layout_.tables[0].dim, 0.1f);
    absl::StatusOr<PushResult> rows = tasks_[1]->PushRows(0, 5, 0, {{0, ids, grads}});
    EXPECT_TRUE(rows.ok()) << rows.status();
    // ps 0, back, pushes its own rows: fenced by ps 1.
    absl::StatusOr<PushResult> stale = tasks_[0]->PushRows(0, 5, 0, {{0, ids, grads}});
    EXPECT_TRUE(absl::IsAborted(stale.status())) << stale.status();
  }
  // A checkpoint now: ps 1 saves ps 0's chunks and rows under ps 0's file
  // names; ps 2 refuses to (it does not serve them).
  absl::StatusOr<ShardSaved> for_0 = tasks_[1]->SaveFor(0, 6, 6, absl::Seconds(5));
  ASSERT_TRUE(for_0.ok()) << for_0.status();
  EXPECT_EQ(for_0->file, ShardFileName(CheckpointPrefix(6), 0, 3));
  EXPECT_EQ(for_0->begin, layout_.ranges[0].first);
  EXPECT_EQ(for_0->end, layout_.ranges[0].second);
  if (model_->has_sparse()) {
    EXPECT_EQ(for_0->rows_file, RowsFileName(CheckpointPrefix(6), 0, 3));
    EXPECT_GT(for_0->table_rows[0], 0);
  }
  EXPECT_TRUE(absl::IsFailedPrecondition(tasks_[2]->SaveFor(0, 6, 6, absl::Seconds(5)).status()));
  // ps 0 comes back and takes a push of its chunk: its update is refused by
  // ps 1, so the push fails, and so does every later one.
  links_.SetGone({});
  const int chunk = chunks_of_0.front();
  absl::Status old_push;
  absl::Notification answered;
  tasks_[0]->Push(chunk, 0, 5, 0, std::vector<float>(tasks_[0]->ChunkSize(chunk), 1.0f), {}, {},
                  [&](absl::Status s, PushResult) {
                    old_push = s;
                    answered.Notify();
                  });
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(absl::IsAborted(old_push)) << old_push;
  EXPECT_NE(old_push.message().find("fenced"), std::string::npos) << old_push;
  absl::Status later;
  tasks_[0]->Push(chunk, 0, 6, 0, std::vector<float>(tasks_[0]->ChunkSize(chunk), 1.0f), {}, {},
                  [&](absl::Status s, PushResult) { later = s; });
  EXPECT_TRUE(absl::IsAborted(later)) << later;
}

// An update still on its way to a backup when a restore comes (the job
// rolled back) is obsolete: it is not applied there, and the backup stays
// in its primary's stream and follows on from the restored values.
TEST_P(PsTaskReplicationTest, AnUpdateOnItsWayWhenARestoreComesKeepsTheBackup) {
  InitializeAll(/*generation=*/21);
  Step(0);
  SaveCheckpoint(1);
  absl::Notification gate;
  links_.hold.store(&gate);
  const int chunk = tasks_[0]->shards().front()->options().chunk;
  absl::Notification answered;
  tasks_[0]->Push(chunk, 0, 1, 0, std::vector<float>(tasks_[0]->ChunkSize(chunk), 0.5f), {}, {},
                  [&](absl::Status s, PushResult) {
                    // Answered by the restore, whichever way: the step is
                    // rolled back.
                    EXPECT_TRUE(s.ok() || absl::IsAborted(s)) << s;
                    answered.Notify();
                  });
  EXPECT_FALSE(answered.HasBeenNotified());  // its backup does not hold it yet
  for (const auto& task : tasks_) {
    ASSERT_TRUE(task->Restore(model_name_, layout_.num_params, 1, 46).ok());
  }
  gate.Notify();
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  links_.hold.store(nullptr);
  ExpectBackupsAreTheirPrimaries();
  for (int64_t step = 1; step < 5; ++step) Step(step);
  ExpectBackupsAreTheirPrimaries();
}

// A rejoin: ps 0 dies and ps 1 serves its chunks and rows (epoch 2, no
// other copy); ps 0 restarts empty and rejoins: ps 1 sends it a copy of ps
// 0's chunks and rows, ps 2 one of its own (ps 0 holds their backups), and
// ps 0 follows both while training goes on. Then ps 1 dies too: ps 0 is
// handed its own chunks back (epoch 3) and ps 2 takes ps 1's, with every
// acknowledged update, no rollback.
TEST_P(PsTaskReplicationTest, ARestartedPsRejoinsAndASecondFailureLosesNothing) {
  // The chief's part: a primary that dropped a backup holds its answers
  // until the drop is confirmed.
  std::atomic<bool> stop{false};
  std::thread chief([&] {
    while (!stop) {
      for (int t = 0; t < 3; ++t) {
        PsTask* task = links_.Task(t);
        task->ConfirmDrops(task->Status().backup_drops);
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
  });
  struct Join {
    std::atomic<bool>* stop;
    std::thread* thread;
    ~Join() {
      *stop = true;
      thread->join();
    }
  } join{&stop, &chief};
  InitializeAll(/*generation=*/12);
  for (int64_t step = 0; step < 3; ++step) Step(step);
  // A copy from before a restore (another generation) is refused, and
  // changes nothing.
  const int own_chunk = tasks_[0]->shards().front()->options().chunk;
  absl::StatusOr<ParameterShard::BackupCopy> old_copy =
      tasks_[1]->backup(own_chunk)->CopyForBackup([] {});
  ASSERT_TRUE(old_copy.ok());
  old_copy->progress.generation = 77;
  EXPECT_TRUE(absl::IsFailedPrecondition(tasks_[0]->InstallChunkCopy(own_chunk, 2, *old_copy)));
  EXPECT_TRUE(tasks_[0]->serves(0));
  links_.SetGone({0});
  ASSERT_TRUE(tasks_[1]->Promote(0, 2).ok());
  serving_[0] = 1;
  for (int64_t step = 3; step < 5; ++step) Step(step);

  // ps 0 comes back empty.
  absl::StatusOr<std::unique_ptr<PsTask>> restarted =
      PsTask::Create(job_, *model_, 0, &env_, nullptr, {.copies = 2, .links = &links_});
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  links_.SetTask(0, restarted->get());
  std::unique_ptr<PsTask> dead = std::move(tasks_[0]);
  tasks_[0] = std::move(*restarted);
  links_.SetGone({});
  EXPECT_FALSE(tasks_[0]->Status().initialized);
  // An update of its own chunk from their server at epoch 2 is no fence of
  // the sender: the restarted task just holds no copy yet (a drop).
  EXPECT_TRUE(absl::IsFailedPrecondition(tasks_[0]->FollowChunk(own_chunk, ChunkUpdate(), 2)));
  // Only the server of a task's chunks sends them, and only to a copy.
  EXPECT_TRUE(absl::IsFailedPrecondition(tasks_[2]->AddBackup(0, 0, absl::Seconds(5))));
  EXPECT_TRUE(absl::IsInvalidArgument(tasks_[1]->AddBackup(0, 2, absl::Seconds(5))));
  // Training goes on while the copies travel.
  std::thread trainer([&] {
    for (int64_t step = 5; step < 8; ++step) Step(step);
  });
  ASSERT_TRUE(tasks_[1]->AddBackup(0, 0, absl::Seconds(30)).ok());
  ASSERT_TRUE(tasks_[2]->AddBackup(2, 0, absl::Seconds(30)).ok());
  trainer.join();
  for (int64_t step = 8; step < 10; ++step) Step(step);
  const PsStatus rejoined = tasks_[0]->Status();
  EXPECT_TRUE(rejoined.initialized);
  EXPECT_EQ(rejoined.epoch, 2);
  EXPECT_EQ(rejoined.global_step, 10);
  // It refuses the replicas' requests for its own chunks: ps 1 serves them.
  EXPECT_TRUE(absl::IsAborted(tasks_[0]->StatusFor(0).status()));
  std::string params, state;
  EXPECT_TRUE(absl::IsAborted(
      tasks_[0]->Read(tasks_[0]->shards()[0]->options().chunk, &params, &state).status()));
  // It holds what its servers hold, bit for bit.
  for (ParameterShard* own : tasks_[0]->shards()) {
    const int chunk = own->options().chunk;
    EXPECT_EQ(own->Snapshot(-1, absl::ZeroDuration())->params,
              tasks_[1]->backup(chunk)->Snapshot(-1, absl::ZeroDuration())->params)
        << chunk;
  }
  for (int chunk : tasks_[0]->backup_chunks()) {
    ParameterShard* primary = nullptr;
    for (ParameterShard* s : tasks_[2]->shards()) {
      if (s->options().chunk == chunk) primary = s;
    }
    ASSERT_NE(primary, nullptr);
    EXPECT_EQ(tasks_[0]->backup(chunk)->Snapshot(-1, absl::ZeroDuration())->slots,
              primary->Snapshot(-1, absl::ZeroDuration())->slots)
        << chunk;
  }
  if (model_->has_sparse()) {
    EXPECT_EQ(testing_util::AllRowsOf(*tasks_[0]->sparse()),
              testing_util::AllRowsOf(*tasks_[1]->backup_rows(0)));
    EXPECT_EQ(testing_util::AllRowsOf(*tasks_[0]->backup_rows(2)),
              testing_util::AllRowsOf(*tasks_[2]->sparse()));
  }

  // ps 1 dies: what it acknowledged is on ps 0 (its own) and ps 2 (ps 1's).
  std::map<int, std::vector<float>> before;
  for (ParameterShard* s : tasks_[0]->shards()) {
    before[s->options().chunk] =
        tasks_[1]->backup(s->options().chunk)->Snapshot(-1, absl::ZeroDuration())->params;
  }
  links_.SetGone({1});
  EXPECT_TRUE(absl::IsFailedPrecondition(tasks_[0]->Promote(0, 2)));  // not past epoch 2
  ASSERT_TRUE(tasks_[0]->Promote(0, 3).ok());
  ASSERT_TRUE(tasks_[2]->Promote(1, 2).ok());
  serving_[0] = 0;
  serving_[1] = 2;
  EXPECT_TRUE(tasks_[0]->serves(0));
  EXPECT_EQ(tasks_[0]->Status().serves, std::vector<int>{0});
  EXPECT_EQ(tasks_[0]->Status().serves_epochs, std::vector<int64_t>{3});
  ASSERT_TRUE(tasks_[0]->StatusFor(0).ok());
  EXPECT_EQ(tasks_[0]->StatusFor(0)->epoch, 3);
  for (ParameterShard* s : tasks_[0]->shards()) {
    EXPECT_EQ(s->Snapshot(-1, absl::ZeroDuration())->params, before[s->options().chunk]);
  }
  for (int64_t step = 10; step < 12; ++step) Step(step);
  EXPECT_EQ(tasks_[0]->Status().global_step, 12);
  EXPECT_EQ(tasks_[2]->StatusFor(1)->global_step, 12);
}

// Async rows: 4 replicas push rows of ps 0 concurrently, ps 0 dies in the
// middle (no answer after its death counts), ps 1 is promoted: every push
// ps 0 acknowledged is in ps 1's copy. Each row counts its pushes, so per
// id the copy's count is at least the acknowledged ones (and at most the
// pushes sent: an unacknowledged one may or may not have made it).
TEST(PsTaskAsyncReplicationTest, EveryAcknowledgedRowsPushIsOnThePromotedCopy) {
  std::unique_ptr<Model> model = testing_util::ReplicatedClickModel();
  JobConfig job;
  job.training.model = "click";
  job.training.update = UpdateMode::kAsync;
  job.training.job_dir = "/job";
  job.cluster.ps = {"ps:1", "ps:2", "ps:3"};
  job.cluster.worker = {"w:1", "w:2", "w:3", "w:4"};
  job.training.chief_trains = false;
  const ShardLayout layout = ComputeShardLayout(*model, 3);
  MemEnv env;
  TaskLinks links;
  std::vector<std::unique_ptr<PsTask>> tasks;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::unique_ptr<PsTask>> task =
        PsTask::Create(job, *model, i, &env, nullptr, {.copies = 2, .links = &links});
    ASSERT_TRUE(task.ok()) << task.status();
    tasks.push_back(std::move(*task));
    links.SetTask(i, tasks.back().get());
  }
  std::vector<float> params(layout.num_params, 0.01f);
  for (size_t c = 0; c < layout.chunks.size(); ++c) {
    const Chunk& chunk = layout.chunks[c];
    for (int t : ReplicaTasks(chunk.ps, 3, 2)) {
      ASSERT_TRUE(tasks[t]
                      ->Initialize(
                          static_cast<int>(c), "click", layout.num_params,
                          absl::MakeConstSpan(params).subspan(chunk.begin, chunk.end - chunk.begin),
                          {}, 0, /*generation=*/5)
                      .ok());
    }
  }
  // Ids of table 0 that ps 0 owns.
  std::vector<int64_t> own;
  for (int64_t id = 0; own.size() < 50; ++id) {
    if (RowOwner(layout.tables[0].key, id, 3) == 0) own.push_back(id);
  }
  absl::Mutex mu;
  bool dead = false;                 // ps 0 is gone: its answers from now on never arrive
  std::map<int64_t, int64_t> acked;  // id -> pushes ps 0 acknowledged while alive
  std::map<int64_t, int64_t> sent;   // id -> pushes sent to ps 0
  std::atomic<int> answered{0}, pushed{0};
  std::vector<std::thread> replicas;
  for (int r = 0; r < 4; ++r) {
    replicas.emplace_back([&, r] {
      for (int k = 0; k < 150; ++k) {
        {
          absl::MutexLock lock(&mu);
          if (dead) return;
        }
        std::vector<int64_t> ids = {own[(r * 7 + k) % own.size()], own[(k * 3 + 1) % own.size()]};
        if (ids[0] == ids[1]) ids.pop_back();
        std::vector<float> grads(ids.size() * layout.tables[0].dim, 0.01f);
        {
          absl::MutexLock lock(&mu);
          for (int64_t id : ids) ++sent[id];
        }
        ++pushed;
        // A replica waits for its push's answer before the next, as a
        // worker's step does.
        auto answer = std::make_shared<absl::Notification>();
        tasks[0]->PushRows(
            r, k, 0, {{0, ids, grads}},
            [&, ids, answer](absl::StatusOr<PushResult> result) {
              {
                absl::MutexLock lock(&mu);
                if (result.ok() && !dead) {
                  for (int64_t id : ids) ++acked[id];
                }
              }
              ++answered;
              answer->Notify();
            },
            /*owner=*/0);
        answer->WaitForNotification();
      }
    });
  }
  // ps 0 dies once it has acknowledged 150 rows' pushes: its links fail,
  // and nothing it answers from then on reaches anyone.
  const auto acked_enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    int64_t n = 0;
    for (const auto& [id, count] : acked) n += count;
    return n >= 150;
  };
  {
    absl::MutexLock lock(&mu);
    mu.AwaitWithTimeout(absl::Condition(&acked_enough), absl::Seconds(60));
    dead = true;
  }
  links.SetGone({0});
  // The answers still out come once the chief confirms the drop of ps 0's
  // backup (its stream holds them until then).
  for (int i = 0; i < 3000 && answered.load() < pushed.load(); ++i) {
    tasks[0]->ConfirmDrops(tasks[0]->Status().backup_drops);
    absl::SleepFor(absl::Milliseconds(10));
  }
  for (std::thread& t : replicas) t.join();
  ASSERT_EQ(answered.load(), pushed.load());
  ASSERT_TRUE(tasks[1]->Promote(0, 2).ok());
  std::map<int64_t, int64_t> on_copy;
  ASSERT_TRUE(tasks[1]
                  ->backup_rows(0)
                  ->tables()[0]
                  ->ForEachRow([&](int64_t id, absl::Span<const float>, absl::Span<const float>,
                                   int64_t, int64_t count) {
                    on_copy[id] = count;
                    return absl::OkStatus();
                  })
                  .ok());
  absl::MutexLock lock(&mu);
  int64_t total_acked = 0;
  for (const auto& [id, n] : acked) {
    total_acked += n;
    EXPECT_GE(on_copy[id], n) << "id " << id << ": acknowledged pushes missing on the copy";
    EXPECT_LE(on_copy[id], sent[id]) << "id " << id;
  }
  EXPECT_GT(total_acked, 100) << "too few pushes were acknowledged to test anything";
  // The copy, promoted, takes ps 0's rows on.
  const std::vector<int64_t> one = {own[0]};
  const std::vector<float> grad(layout.tables[0].dim, 0.1f);
  absl::StatusOr<PushResult> after = tasks[1]->PushRows(0, 200, 0, {{0, one, grad}});
  EXPECT_TRUE(after.ok()) << after.status();
}

INSTANTIATE_TEST_SUITE_P(Models, PsTaskReplicationTest, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? "WithTables" : "Dense";
                         });

}  // namespace
}  // namespace pstrain
