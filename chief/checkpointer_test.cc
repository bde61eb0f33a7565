#include "chief/checkpointer.h"

#include <csignal>
#include <cstring>

#include "gtest/gtest.h"
#include "models/dense.h"
#include "models/flatten.h"
#include "models/registry.h"
#include "ps/in_process_parameter_servers.h"
#include "ps/ps_task.h"
#include "ps_protocol/shard_layout.h"

namespace pstrain {
namespace {

TEST(CheckpointModelCheckTest, RefusesAnotherShapeNamingTheVariable) {
  std::unique_ptr<Model> model = *BuildModel("mnist_cnn", ModelOptions{});
  CheckpointIndex index;
  index.set_model("mnist_cnn");
  index.set_num_params(model->num_params());
  index.set_num_state(model->num_state());
  AddModelVariables(*model, &index);
  EXPECT_TRUE(CheckCheckpointMatchesModel(index, *model, "/j/model.ckpt-5.index").ok());

  CheckpointIndex other = index;
  const std::string name = other.variables(1).name();
  other.mutable_variables(1)->set_shape(0, 99);
  absl::Status s = CheckCheckpointMatchesModel(other, *model, "/j/model.ckpt-5.index");
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("variable " + name + " has shape"), std::string::npos) << s;

  other = index;
  other.mutable_variables(0)->set_name("dense_9/kernel");
  s = CheckCheckpointMatchesModel(other, *model, "/j/model.ckpt-5.index");
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find(index.variables(0).name()), std::string::npos) << s;

  other = index;
  other.add_variables()->set_name("extra/bias");
  s = CheckCheckpointMatchesModel(other, *model, "/j/model.ckpt-5.index");
  EXPECT_NE(s.message().find("extra/bias"), std::string::npos) << s;
}

TEST(CheckpointModelCheckTest, ASpecChangeWithTheSameVariablesIsNamed) {
  const std::string saved = "name: m\nlayers:\n  - dense: {units: 4, activation: relu}\n";
  const std::string now = "name: m\nlayers:\n  - dense: {units: 4, activation: tanh}\n";
  EXPECT_EQ(SpecChange(saved, now),
            "\"- dense: {units: 4, activation: relu}\" is now \"- dense: {units: 4, activation: "
            "tanh}\"");
  EXPECT_EQ(SpecChange(saved, saved), "");
  EXPECT_EQ(SpecChange("", now), "");  // a checkpoint from before specs
  EXPECT_EQ(SpecChange(saved, saved + "  - relu\n"), "\"\" is now \"- relu\"");
  // A checkpoint's spec written with float32's 9 digits is the spec now
  // written with the shortest text.
  const std::string head =
      "input: [4, 4, 1]\nclasses: 2\nlayers:\n  - flatten: {name: \"flatten\"}\n";
  EXPECT_EQ(SpecChange(head + "  - dense: {name: \"dense\", units: 2, alpha: 0.300000012}\n",
                       head + "  - dense: {name: \"dense\", units: 2, alpha: 0.3}\n"),
            "");
  EXPECT_NE(SpecChange(head + "  - dense: {name: \"dense\", units: 2, alpha: 0.300000012}\n",
                       head + "  - dense: {name: \"dense\", units: 2, alpha: 0.2}\n"),
            "");
}

// A 2x2 input, 3 classes, 15 parameters: checkpoints of it are small.
std::unique_ptr<Model> TinyModel() {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Flatten>("flatten"));
  DenseOptions dense;
  dense.units = 3;
  layers.push_back(std::make_unique<Dense>("dense", dense));
  return *Model::Create("tiny", {2, 2, 1}, 3, std::move(layers));
}

// The chief's checkpointer against two in-process ps tasks and a MemEnv job
// dir; training is simulated by pushing zero gradients into every chunk.
class CheckpointerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_.cluster.chief = {"chief:1"};
    job_.cluster.worker = {"worker:1"};
    job_.cluster.ps = {"ps:1", "ps:2"};
    job_.training.model = "tiny";
    job_.training.job_dir = "/job";
    job_.training.train_steps = 1000;
    job_.training.checkpoint_steps = 0;
    model_ = TinyModel();
    StartTasks();
  }

  // Fresh ps tasks (as after a restart of every ps).
  void StartTasks() {
    absl::MutexLock lock(&tasks_mu_);
    tasks_.clear();
    for (int i = 0; i < 2; ++i) tasks_.push_back(*PsTask::Create(job_, *model_, i, &env_));
  }

  // Ps task `i` restarted: a new one, holding nothing.
  void RestartTask(int i) {
    std::shared_ptr<PsTask> fresh = *PsTask::Create(job_, *model_, i, &env_);
    absl::MutexLock lock(&tasks_mu_);
    tasks_[i] = std::move(fresh);
  }

  std::unique_ptr<ParameterServers> Servers() {
    std::vector<PsTask*> tasks;
    absl::MutexLock lock(&tasks_mu_);
    for (auto& t : tasks_) tasks.push_back(t.get());
    return std::make_unique<InProcessParameterServers>(tasks, ComputeShardLayout(*model_, 2));
  }

  // In-process ps over the tasks there are at each call (RestartTask
  // replaces one while the checkpointer runs).
  class LiveServers : public ParameterServers {
   public:
    explicit LiveServers(CheckpointerTest* test) : test_(test) {}
    int size() const override { return 2; }
    absl::Status WaitReady(absl::Duration timeout, bool initialized,
                           const TerminationNotice* stop) override {
      return Now()->WaitReady(timeout, initialized, stop);
    }
    absl::StatusOr<std::vector<PsStatus>> Statuses() override { return Now()->Statuses(); }
    absl::Status Initialize(const std::string& model, const float* params, const float* state,
                            int64_t global_step) override {
      return Now()->Initialize(model, params, state, global_step);
    }
    absl::StatusOr<std::vector<ShardSaved>> Save(int64_t step, int64_t global_step,
                                                 absl::Duration wait) override {
      return Now()->Save(step, global_step, wait);
    }
    absl::StatusOr<int64_t> Restore(const std::string& model, int64_t step) override {
      return Now()->Restore(model, step);
    }
    absl::Status Shutdown(const std::string& reason) override { return Now()->Shutdown(reason); }
    absl::Status Leave(int replica, const std::string& reason, bool input_ended,
                       absl::Duration budget) override {
      return Now()->Leave(replica, reason, input_ended, budget);
    }
    absl::StatusOr<ParameterView> Read() override { return Now()->Read(); }
    std::vector<absl::StatusOr<PsStatus>> Probe(
        absl::Duration deadline, const std::vector<int64_t>& confirm_drops) override {
      return Now()->Probe(deadline, confirm_drops);
    }
    absl::Status Promote(int task, int owner, int64_t epoch, const std::vector<int>& backups,
                         absl::Duration deadline) override {
      return Now()->Promote(task, owner, epoch, backups, deadline);
    }
    absl::Status Fence(int task, int64_t epoch, absl::Duration deadline) override {
      return Now()->Fence(task, epoch, deadline);
    }
    absl::Status AddBackup(int server, int owner, int task, absl::Duration deadline) override {
      return Now()->AddBackup(server, owner, task, deadline);
    }

   private:
    // The tasks stay alive while the call runs.
    ParameterServers* Now() {
      {
        absl::MutexLock lock(&test_->tasks_mu_);
        held_ = test_->tasks_;
      }
      std::vector<PsTask*> tasks;
      for (auto& t : held_) tasks.push_back(t.get());
      servers_ =
          std::make_unique<InProcessParameterServers>(tasks, ComputeShardLayout(*test_->model_, 2));
      return servers_.get();
    }
    CheckpointerTest* const test_;
    std::vector<std::shared_ptr<PsTask>> held_;
    std::unique_ptr<ParameterServers> servers_;
  };

  std::unique_ptr<Checkpointer> NewCheckpointer() {
    return std::make_unique<Checkpointer>(&env_, job_, model_.get(), Servers(), &stop_);
  }

  std::unique_ptr<Checkpointer> NewLiveCheckpointer() {
    return std::make_unique<Checkpointer>(&env_, job_, model_.get(),
                                          std::make_unique<LiveServers>(this), &stop_);
  }

  PsTask* Task(int i) {
    absl::MutexLock lock(&tasks_mu_);
    return tasks_[i].get();
  }

  std::vector<std::shared_ptr<PsTask>> Tasks() {
    absl::MutexLock lock(&tasks_mu_);
    return tasks_;
  }

  // `n` async steps of replica 0 on every chunk.
  void Step(int n) {
    for (int k = 0; k < n; ++k) {
      for (auto& task : Tasks()) {
        for (ParameterShard* shard : task->shards()) {
          std::vector<float> grads(shard->size(), 0.0f);
          std::vector<float> stats(shard->options().num_state, 0.0f);
          shard->Push(0, shard->GetStats().global_step, grads, stats,
                      [](absl::Status s, PushResult) { ASSERT_TRUE(s.ok()) << s; });
        }
      }
    }
  }

  int64_t Step() { return Task(0)->Status().global_step; }

  std::vector<int64_t> Steps() { return *ListCheckpointSteps(&env_, "/job"); }

  // Waits up to 10 s for `done`.
  template <typename Done>
  bool Eventually(Done done) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (!done()) {
      if (absl::Now() > give_up) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return true;
  }

  JobConfig job_;
  std::unique_ptr<Model> model_;
  MemEnv env_;
  ManualTerminationNotice stop_;
  absl::Mutex tasks_mu_;
  std::vector<std::shared_ptr<PsTask>> tasks_ ABSL_GUARDED_BY(tasks_mu_);
};

TEST_F(CheckpointerTest, InitializesAnEmptyJobDirThenJoinsRunningPs) {
  auto checkpointer = NewCheckpointer();
  ASSERT_EQ(*checkpointer->RestoreOrInitialize(), 0);
  for (auto& task : Tasks()) EXPECT_TRUE(task->Status().initialized);
  Step(3);
  // A restarted chief joins the job the ps are still running.
  EXPECT_EQ(*NewCheckpointer()->RestoreOrInitialize(), 3);
}

TEST_F(CheckpointerTest, PeriodicByCheckpointSteps) {
  job_.training.checkpoint_steps = 10;
  auto checkpointer = NewCheckpointer();
  ASSERT_TRUE(checkpointer->RestoreOrInitialize().ok());
  checkpointer->Start(0);
  Step(6);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_TRUE(Steps().empty());  // not due yet
  Step(6);
  ASSERT_TRUE(Eventually([&] { return !Steps().empty(); }));
  checkpointer->Stop();
  const std::vector<int64_t> steps = Steps();
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_GE(steps[0], 10);
  absl::StatusOr<std::string> state = env_.ReadFile("/job/checkpoint");
  ASSERT_TRUE(state.ok());
  EXPECT_NE(state->find(CheckpointPrefix(steps[0])), std::string::npos) << *state;
  EXPECT_TRUE(checkpointer->background_status().ok());
  EXPECT_FALSE(checkpointer->stopped_early());
}

TEST_F(CheckpointerTest, PeriodicByCheckpointSecs) {
  job_.training.checkpoint_secs = 0.3;
  auto checkpointer = NewCheckpointer();
  ASSERT_TRUE(checkpointer->RestoreOrInitialize().ok());
  checkpointer->Start(0);
  Step(2);
  ASSERT_TRUE(Eventually([&] { return !Steps().empty(); }));
  Step(2);
  // Another one a checkpoint_secs later, at the step reached by then.
  ASSERT_TRUE(Eventually([&] { return Steps().size() >= 2; }));
  checkpointer->Stop();
  EXPECT_EQ(Steps().front(), 4);  // newest first
}

TEST_F(CheckpointerTest, KeepsTheNewestKeepCheckpointMax) {
  job_.training.keep_checkpoint_max = 2;
  auto checkpointer = NewCheckpointer();
  ASSERT_TRUE(checkpointer->RestoreOrInitialize().ok());
  for (int i = 1; i <= 4; ++i) {
    Step(1);
    absl::StatusOr<std::string> prefix = checkpointer->SaveNow(absl::ZeroDuration());
    ASSERT_TRUE(prefix.ok()) << prefix.status();
    EXPECT_EQ(*prefix, "/job/" + CheckpointPrefix(i));
  }
  EXPECT_EQ(Steps(), (std::vector<int64_t>{4, 3}));
  EXPECT_FALSE(env_.FileExists("/job/model.ckpt-2.index"));
  EXPECT_FALSE(env_.FileExists("/job/model.ckpt-2.shard-0-of-2"));
  EXPECT_TRUE(env_.FileExists("/job/model.ckpt-3.shard-1-of-2"));
  const std::string state = *env_.ReadFile("/job/checkpoint");
  EXPECT_NE(state.find("model_checkpoint_path: \"model.ckpt-4\""), std::string::npos) << state;
  EXPECT_EQ(state.find("model.ckpt-2"), std::string::npos) << state;
}

TEST_F(CheckpointerTest, RestoreSkipsADamagedNewestCheckpoint) {
  auto checkpointer = NewCheckpointer();
  ASSERT_TRUE(checkpointer->RestoreOrInitialize().ok());
  Step(2);
  ASSERT_TRUE(checkpointer->SaveNow(absl::ZeroDuration()).ok());
  std::unique_ptr<ParameterServers> servers = Servers();
  const ParameterView at2 = *servers->Read();
  const std::vector<float> expected(at2.params, at2.params + model_->num_params());
  Step(2);
  ASSERT_TRUE(checkpointer->SaveNow(absl::ZeroDuration()).ok());
  std::string bytes = *env_.ReadFile("/job/model.ckpt-4.shard-1-of-2");
  bytes[bytes.size() / 2] ^= 0x01;
  ASSERT_TRUE(env_.WriteFileAtomic("/job/model.ckpt-4.shard-1-of-2", bytes).ok());

  StartTasks();  // every ps restarted with nothing
  checkpointer = NewCheckpointer();
  absl::StatusOr<int64_t> restored = checkpointer->RestoreOrInitialize();
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(*restored, 2);
  servers = Servers();
  const ParameterView view = *servers->Read();
  EXPECT_EQ(view.global_step, 2);
  EXPECT_EQ(std::vector<float>(view.params, view.params + model_->num_params()), expected);
}

TEST_F(CheckpointerTest, StopRequestSavesAndEndsTheJob) {
  auto checkpointer = NewCheckpointer();
  ASSERT_TRUE(checkpointer->RestoreOrInitialize().ok());
  checkpointer->Start(0);
  Step(5);
  stop_.Request(SIGTERM);
  ASSERT_TRUE(Eventually([&] { return checkpointer->stopped_early(); }));
  checkpointer->Stop();
  EXPECT_TRUE(checkpointer->background_status().ok()) << checkpointer->background_status();
  EXPECT_EQ(Steps(), (std::vector<int64_t>{5}));
  for (auto& task : Tasks()) EXPECT_TRUE(task->Status().shutting_down);
}

TEST_F(CheckpointerTest, PreemptedPsSavesAndEndsTheJob) {
  auto checkpointer = NewCheckpointer();
  ASSERT_TRUE(checkpointer->RestoreOrInitialize().ok());
  checkpointer->Start(0);
  Step(3);
  Task(1)->SetPreempting();
  ASSERT_TRUE(Eventually([&] { return checkpointer->stopped_early(); }));
  checkpointer->Stop();
  EXPECT_EQ(Steps(), (std::vector<int64_t>{3}));
  EXPECT_TRUE(Task(0)->Status().shutting_down);
}

TEST_F(CheckpointerTest, SavesWhenAReplicaLeaves) {
  auto checkpointer = NewCheckpointer();
  ASSERT_TRUE(checkpointer->RestoreOrInitialize().ok());
  checkpointer->Start(0);
  Step(4);
  absl::SleepFor(absl::Milliseconds(250));  // the first poll sets the baseline
  for (auto& task : Tasks()) ASSERT_TRUE(task->Leave(1, "test", /*input_ended=*/false).ok());
  ASSERT_TRUE(Eventually([&] { return !Steps().empty(); }));
  checkpointer->Stop();
  EXPECT_EQ(Steps(), (std::vector<int64_t>{4}));
  EXPECT_FALSE(checkpointer->stopped_early());  // the job goes on
}

// Chunk 0's values and generation, read as a replica pulls them.
struct Pulled {
  std::vector<float> params;
  PushResult at;
};
Pulled PullChunk0(PsTask* task) {
  std::string params, state;
  Pulled p;
  p.at = *task->Read(0, &params, &state);
  p.params.resize(params.size() / sizeof(float));
  std::memcpy(p.params.data(), params.data(), params.size());
  return p;
}

TEST_F(CheckpointerTest, ARestartedPsRollsTheJobBackToTheLastCheckpoint) {
  auto checkpointer = NewLiveCheckpointer();
  ASSERT_TRUE(checkpointer->RestoreOrInitialize().ok());
  checkpointer->Start(0);
  Step(5);
  ASSERT_TRUE(checkpointer->SaveNow(absl::ZeroDuration()).ok());
  const Pulled at5 = PullChunk0(Task(0));
  Step(3);
  const Pulled at8 = PullChunk0(Task(0));
  ASSERT_EQ(at8.at.global_step, 8);
  ASSERT_EQ(at8.at.generation, at5.at.generation);

  RestartTask(1);  // up again, without its parameters
  ASSERT_TRUE(Eventually(
      [&] { return Task(1)->Status().initialized && Task(0)->Status().global_step == 5; }));
  // Every ps is back at the checkpoint (the one that kept running too), in a
  // new generation.
  for (auto& task : Tasks()) EXPECT_EQ(task->Status().max_global_step, 5);
  const Pulled restored = PullChunk0(Task(0));
  EXPECT_EQ(restored.params, at5.params);
  EXPECT_NE(restored.at.generation, at8.at.generation);
  // A replica's push computed before the rollback is refused, even for a
  // step the ps holds again; one from the restored values is applied.
  ParameterShard* shard = Task(0)->shards()[0];
  std::vector<float> grads(shard->size(), 0.5f), stats(shard->options().num_state, 0.0f);
  absl::Status old_push, new_push;
  shard->Push(
      0, 5, grads, stats, [&](absl::Status s, PushResult) { old_push = s; }, at5.at.generation);
  EXPECT_TRUE(absl::IsAborted(old_push)) << old_push;
  EXPECT_NE(old_push.message().find("rolled back"), std::string::npos) << old_push;
  EXPECT_EQ(shard->GetStats().global_step, 5);
  shard->Push(
      0, 5, grads, stats, [&](absl::Status s, PushResult) { new_push = s; },
      restored.at.generation);
  EXPECT_TRUE(new_push.ok()) << new_push;
  EXPECT_EQ(shard->GetStats().global_step, 6);
  checkpointer->Stop();
  EXPECT_FALSE(checkpointer->stopped_early());
}

TEST_F(CheckpointerTest, TheWatchdogRollsBackAJobThatMakesNoProgress) {
  job_.training.sync_timeout = 0.1;
  job_.training.watchdog_secs = 0.5;
  auto checkpointer = NewCheckpointer();
  // A replicated job's failover watch hears of it: before, then after.
  absl::Mutex mu;
  std::vector<bool> told;
  checkpointer->SetRollBackListener([&](bool done) {
    absl::MutexLock lock(&mu);
    told.push_back(done);
  });
  ASSERT_TRUE(checkpointer->RestoreOrInitialize().ok());
  checkpointer->Start(0);
  Step(4);
  ASSERT_TRUE(checkpointer->SaveNow(absl::ZeroDuration()).ok());
  Step(2);
  const absl::Time stalled = absl::Now();
  // Nothing pushes from now on: half a second later the job is at 4 again.
  ASSERT_TRUE(Eventually([&] { return Step() == 4; }));
  EXPECT_GE(absl::Now() - stalled, absl::Milliseconds(400));
  // The listener hears "done" once the restore returns, which may be a moment
  // after the step reads 4 again.
  EXPECT_TRUE(Eventually([&] {
    absl::MutexLock lock(&mu);
    return told.size() >= 2;
  }));
  checkpointer->SetRollBackListener(nullptr);
  checkpointer->Stop();
  EXPECT_TRUE(checkpointer->background_status().ok());
  absl::MutexLock lock(&mu);
  ASSERT_GE(told.size(), 2u);
  EXPECT_FALSE(told[0]);
  EXPECT_TRUE(told[1]);
}

}  // namespace
}  // namespace pstrain
