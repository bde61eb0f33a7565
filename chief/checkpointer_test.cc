#include "chief/checkpointer.h"

#include <csignal>

#include "gtest/gtest.h"
#include "models/dense.h"
#include "models/flatten.h"
#include "models/registry.h"
#include "ps/ps_task.h"
#include "ps/shard_layout.h"
#include "worker/in_process_parameter_servers.h"

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
    tasks_.clear();
    for (int i = 0; i < 2; ++i) tasks_.push_back(*PsTask::Create(job_, *model_, i, &env_));
  }

  std::unique_ptr<ParameterServers> Servers() {
    std::vector<PsTask*> tasks;
    for (auto& t : tasks_) tasks.push_back(t.get());
    return std::make_unique<InProcessParameterServers>(tasks, ComputeShardLayout(*model_, 2));
  }

  std::unique_ptr<Checkpointer> NewCheckpointer() {
    return std::make_unique<Checkpointer>(&env_, job_, model_.get(), Servers(), &stop_);
  }

  // `n` async steps of replica 0 on every chunk.
  void Step(int n) {
    for (int k = 0; k < n; ++k) {
      for (auto& task : tasks_) {
        for (ParameterShard* shard : task->shards()) {
          std::vector<float> grads(shard->size(), 0.0f);
          std::vector<float> stats(shard->options().num_state, 0.0f);
          shard->Push(0, shard->GetStats().global_step, grads, stats,
                      [](absl::Status s, PushResult) { ASSERT_TRUE(s.ok()) << s; });
        }
      }
    }
  }

  int64_t Step() const { return tasks_[0]->Status().global_step; }

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
  std::vector<std::unique_ptr<PsTask>> tasks_;
};

TEST_F(CheckpointerTest, InitializesAnEmptyJobDirThenJoinsRunningPs) {
  auto checkpointer = NewCheckpointer();
  ASSERT_EQ(*checkpointer->RestoreOrInitialize(), 0);
  for (auto& task : tasks_) EXPECT_TRUE(task->Status().initialized);
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
  for (auto& task : tasks_) EXPECT_TRUE(task->Status().shutting_down);
}

TEST_F(CheckpointerTest, PreemptedPsSavesAndEndsTheJob) {
  auto checkpointer = NewCheckpointer();
  ASSERT_TRUE(checkpointer->RestoreOrInitialize().ok());
  checkpointer->Start(0);
  Step(3);
  tasks_[1]->SetPreempting();
  ASSERT_TRUE(Eventually([&] { return checkpointer->stopped_early(); }));
  checkpointer->Stop();
  EXPECT_EQ(Steps(), (std::vector<int64_t>{3}));
  EXPECT_TRUE(tasks_[0]->Status().shutting_down);
}

TEST_F(CheckpointerTest, SavesWhenAReplicaLeaves) {
  auto checkpointer = NewCheckpointer();
  ASSERT_TRUE(checkpointer->RestoreOrInitialize().ok());
  checkpointer->Start(0);
  Step(4);
  absl::SleepFor(absl::Milliseconds(250));  // the first poll sets the baseline
  for (auto& task : tasks_) ASSERT_TRUE(task->Leave(1, "test").ok());
  ASSERT_TRUE(Eventually([&] { return !Steps().empty(); }));
  checkpointer->Stop();
  EXPECT_EQ(Steps(), (std::vector<int64_t>{4}));
  EXPECT_FALSE(checkpointer->stopped_early());  // the job goes on
}

}  // namespace
}  // namespace pstrain
