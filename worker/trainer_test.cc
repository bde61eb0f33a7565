#include "worker/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "input/model_input.h"
#include "models/dense.h"
#include "models/registry.h"
#include "ps/in_process_client.h"
#include "worker/evaluation.h"
#include "worker/local_training.h"

namespace pstrain {
namespace {

// A tiny learnable dataset: the label is which quadrant of the 28x28 image
// is bright (4 classes of the 10).
Dataset QuadrantDataset(int64_t n, uint64_t seed) {
  Dataset d;
  d.height = 28;
  d.width = 28;
  d.channels = 1;
  d.images.assign(n * 784, 0);
  d.labels.resize(n);
  uint64_t x = seed;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const int q = static_cast<int>((x >> 33) % 4);
    d.labels[i] = q;
    for (int r = 0; r < 14; ++r) {
      for (int c = 0; c < 14; ++c) {
        d.images[i * 784 + (r + (q / 2) * 14) * 28 + c + (q % 2) * 14] =
            static_cast<uint8_t>(128 + ((x >> (r + c)) & 127));
      }
    }
  }
  return d;
}

TEST(TrainerTest, DataThatDoesNotFitTheModelIsRefusedNamingBoth) {
  absl::StatusOr<std::unique_ptr<Model>> model = BuildModelFromSpecText(
      "name: four\ninput: [28, 28, 1]\nclasses: 4\nlayers: [flatten, {dense: {units: 4}}]\n",
      "four.yaml");
  ASSERT_TRUE(model.ok()) << model.status();
  Dataset data = QuadrantDataset(20, 1);
  EXPECT_TRUE(CheckModelInput(**model, data, "/data").ok());
  data.labels[7] = 9;
  absl::Status s = CheckModelInput(**model, data, "/data");
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("/data has an example of class 9, but model four has classes: 4"),
            std::string::npos)
      << s;
  data.labels[7] = 0;
  data.channels = 3;
  s = CheckModelInput(**model, data, "/data");
  EXPECT_NE(s.message().find("takes 28x28x1 images, but /data holds 28x28x3"), std::string::npos)
      << s;
}

TEST(TrainerTest, LearnsASimpleTaskInProcess) {
  auto model = *BuildModel("mnist_cnn", {});
  OptimizerConfig config;  // Adam 1e-3
  auto client = InProcessClient::Create(*model, config, 0.99f, 3);
  ASSERT_TRUE(client.ok()) << client.status();
  Dataset train = QuadrantDataset(400, 1);
  Dataset test = QuadrantDataset(200, 2);
  auto batches = BatchIterator::Create(&train, 20, 0, 1, true, 5);
  ASSERT_TRUE(batches.ok());

  auto before = EvaluateDataset(model.get(), *(*client)->Pull(), test, 64);
  TrainerOptions options;
  options.train_steps = 30;
  options.log_every_n_steps = 10;
  Trainer trainer(model.get(), client->get(), batches->get(), options);
  auto step = trainer.Run();
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 30);
  auto after = EvaluateDataset(model.get(), *(*client)->Pull(), test, 64);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->global_step, 30);
  EXPECT_EQ(after->examples, 200);
  EXPECT_LT(before->accuracy, 0.5);
  EXPECT_GT(after->accuracy, 0.9);
  EXPECT_LT(after->loss, before->loss);
}

TEST(TrainerTest, RecordsItsPhasesAndEveryLayerInsideTheTraceWindow) {
  auto model = *BuildModel("mnist_cnn", {});
  auto client = InProcessClient::Create(*model, OptimizerConfig(), 0.99f, 3);
  ASSERT_TRUE(client.ok()) << client.status();
  Dataset train = QuadrantDataset(100, 1);
  auto batches = BatchIterator::Create(&train, 10, 0, 1, true, 5);
  ASSERT_TRUE(batches.ok());
  TraceRecorder trace("worker:0", TraceSteps{2, 3});
  TrainerOptions options;
  options.train_steps = 6;
  options.trace = &trace;
  Trainer trainer(model.get(), client->get(), batches->get(), options);
  ASSERT_TRUE(trainer.Run().ok());
  EXPECT_TRUE(trace.finished());
  const std::string json = trace.ToJson();
  for (const char* name : {"\"train step\"", "\"next batch\"", "\"wait for push answers\"",
                           "\"forward conv2d\"", "\"backward conv2d\"", "\"pull\""}) {
    EXPECT_NE(json.find(name), std::string::npos) << name;
  }
  // Two steps: per step, 3 phases + a pull + forward and backward per layer.
  model->EnableProfiling(true);  // to count the layers
  EXPECT_EQ(trace.size(), 2 * (4 + 2 * model->timings().size()));
}

// Parameters that never change, a step that goes up by one per push, and
// once, the pull after step `at`'s push reports the job rolled back to `to`.
class RollingBackClient : public ParameterClient {
 public:
  RollingBackClient(const Model& model, int64_t at, int64_t to)
      : params_(model.num_params()), state_(model.num_state()), at_(at), to_(to) {
    model.InitializeVariables(1, params_.data(), state_.data());
  }
  absl::StatusOr<ParameterView> Pull() override {
    ParameterView view;
    view.params = params_.data();
    view.state = state_.data();
    view.global_step = step_;
    return view;
  }
  absl::StatusOr<PushOutcome> Push(int64_t step, const float*, const float*) override {
    pushed_.push_back(step);
    step_ = step + 1;
    if (step == at_ && !rolled_back_) {
      rolled_back_ = true;
      step_ = to_;
    }
    PushOutcome outcome;
    outcome.global_step = step + 1;  // as the push's own answer said
    return outcome;
  }
  std::vector<int64_t> pushed_;

 private:
  std::vector<float> params_, state_;
  const int64_t at_, to_;
  int64_t step_ = 0;
  bool rolled_back_ = false;
};

TEST(TrainerTest, ARollbackRewindsTheBatchesToTheRestoredStep) {
  auto model = *BuildModel("mnist_cnn", {});
  Dataset train = QuadrantDataset(200, 1);
  auto batches = BatchIterator::Create(&train, 10, 0, 1, true, 5);
  ASSERT_TRUE(batches.ok());
  RollingBackClient client(*model, /*at=*/6, /*to=*/3);
  std::vector<int64_t> rewound_to;
  TrainerOptions options;
  options.train_steps = 10;
  options.log_every_n_steps = 0;
  options.rewind = [&](int64_t step) -> absl::StatusOr<std::unique_ptr<BatchIterator>> {
    rewound_to.push_back(step);
    return BatchIterator::Create(&train, 10, 0, 1, true, 5);
  };
  Trainer trainer(model.get(), &client, batches->get(), options);
  absl::StatusOr<int64_t> step = trainer.Run();
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 10);
  EXPECT_EQ(rewound_to, (std::vector<int64_t>{3}));
  EXPECT_EQ(client.pushed_, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 3, 4, 5, 6, 7, 8, 9}));
}

// The progress lines the trainer logs while it is alive.
class ProgressLines : public google::LogSink {
 public:
  ProgressLines() { google::AddLogSink(this); }
  ~ProgressLines() override { google::RemoveLogSink(this); }
  void send(google::LogSeverity, const char*, const char*, int, const struct ::tm*,
            const char* message, size_t message_len) override {
    std::string line(message, message_len);
    if (line.find("global_step/sec = ") == std::string::npos) return;
    absl::MutexLock lock(&mu_);
    lines_.push_back(std::move(line));
  }
  std::vector<std::string> lines() {
    absl::MutexLock lock(&mu_);
    return lines_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

// After a rollback the global step goes back (7 to 3 here): the rate window
// restarts there instead of counting a negative global_step/sec.
TEST(TrainerTest, ARollbackRestartsTheRateWindowSoTheRateIsNeverNegative) {
  auto model = *BuildModel("mnist_cnn", {});
  Dataset train = QuadrantDataset(200, 1);
  auto batches = BatchIterator::Create(&train, 10, 0, 1, true, 5);
  ASSERT_TRUE(batches.ok());
  RollingBackClient client(*model, /*at=*/6, /*to=*/3);
  TrainerOptions options;
  options.train_steps = 10;
  options.log_every_n_steps = 1;
  options.rewind = [&](int64_t) -> absl::StatusOr<std::unique_ptr<BatchIterator>> {
    return BatchIterator::Create(&train, 10, 0, 1, true, 5);
  };
  ProgressLines progress;
  Trainer trainer(model.get(), &client, batches->get(), options);
  absl::StatusOr<int64_t> step = trainer.Run();
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(client.pushed_, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 3, 4, 5, 6, 7, 8, 9}));
  const std::vector<std::string> lines = progress.lines();
  EXPECT_GE(lines.size(), 10u);
  for (const std::string& line : lines) {
    const size_t at = line.find("global_step/sec = ") + std::strlen("global_step/sec = ");
    EXPECT_NE(line[at], '-') << line;
  }
  // The first line after the rollback counts from step 3 (to step 4).
  bool after_rollback = false;
  for (const std::string& line : lines) after_rollback |= line.rfind("step = 4,", 0) == 0;
  EXPECT_TRUE(after_rollback) << absl::StrJoin(lines, "\n");
}

// A client whose push of step `slow_at` takes `pause` (a failover, a slow ps).
class SlowPushClient : public RollingBackClient {
 public:
  SlowPushClient(const Model& model, int64_t slow_at, absl::Duration pause)
      : RollingBackClient(model, /*at=*/-1, /*to=*/0), slow_at_(slow_at), pause_(pause) {}
  absl::StatusOr<PushOutcome> Push(int64_t step, const float* grads, const float* stats) override {
    if (step == slow_at_) absl::SleepFor(pause_);
    return RollingBackClient::Push(step, grads, stats);
  }

 private:
  const int64_t slow_at_;
  const absl::Duration pause_;
};

TEST(TrainerTest, SaysHowLongItsSlowestStepTookAgainstTheMedian) {
  auto model = *BuildModel("mnist_cnn", {});
  Dataset train = QuadrantDataset(200, 1);
  auto batches = BatchIterator::Create(&train, 10, 0, 1, true, 5);
  ASSERT_TRUE(batches.ok());
  SlowPushClient client(*model, /*slow_at=*/4, absl::Milliseconds(400));
  TrainerOptions options;
  options.train_steps = 10;
  options.log_every_n_steps = 0;
  Trainer trainer(model.get(), &client, batches->get(), options);
  EXPECT_EQ(trainer.StepTimeSummary(), "no steps");
  absl::StatusOr<int64_t> step = trainer.Run();
  ASSERT_TRUE(step.ok()) << step.status();
  // "steps took: median M ms, slowest S ms (to global step 5) over 10 steps"
  const std::string summary = trainer.StepTimeSummary();
  double median = 0, slowest = 0;
  int to_step = 0, steps = 0;
  ASSERT_EQ(std::sscanf(summary.c_str(),
                        "steps took: median %lf ms, slowest %lf ms (to global step %d) over %d",
                        &median, &slowest, &to_step, &steps),
            4)
      << summary;
  EXPECT_EQ(to_step, 5) << summary;
  EXPECT_EQ(steps, 10) << summary;
  EXPECT_GE(slowest, 400) << summary;
  EXPECT_LT(median, slowest) << summary;
}

// A client that overlaps its pulls: every view after the first says its
// parameters may still be arriving, and they do arrive only when waited for
// (until then they are NaN; await_params records what the forward pass
// waits for); the push of step `discard_at` is discarded once.
class OverlappedClient : public ParameterClient {
 public:
  OverlappedClient(const Model& model, int64_t discard_at)
      : params_(model.num_params()),
        arrived_(model.num_params()),
        state_(model.num_state()),
        discard_at_(discard_at) {
    model.InitializeVariables(1, params_.data(), state_.data());
  }
  absl::StatusOr<ParameterView> Pull() override {
    ++full_pulls_;
    ParameterView view;
    view.params = params_.data();
    view.state = state_.data();
    view.global_step = step_;
    return view;
  }
  absl::StatusOr<ParameterView> PullOverlapped() override {
    if (fresh_) {
      fresh_ = false;
      std::fill(arrived_.begin(), arrived_.end(), std::numeric_limits<float>::quiet_NaN());
      ParameterView view;
      view.params = arrived_.data();
      view.state = state_.data();
      view.global_step = step_;
      view.await_params = [this](int64_t end) {
        waits_.back().push_back(end);
        std::copy(params_.begin(), params_.begin() + std::min<int64_t>(end, params_.size()),
                  arrived_.begin());
      };
      waits_.emplace_back();
      return view;
    }
    return Pull();
  }
  absl::StatusOr<PushOutcome> Push(int64_t step, const float*, const float*) override {
    PushOutcome outcome;
    if (step == discard_at_ && !discarded_) {
      discarded_ = true;
      outcome.discarded = true;  // nothing sent: the trainer pulls again
      outcome.global_step = step_;
      return outcome;
    }
    pushed_.push_back(step);
    step_ = step + 1;
    fresh_ = true;
    outcome.global_step = step_;
    return outcome;
  }
  std::vector<int64_t> pushed_;
  std::vector<std::vector<int64_t>> waits_;  // per overlapped view, the ends waited for
  int full_pulls_ = 0;

 private:
  std::vector<float> params_, arrived_, state_;
  const int64_t discard_at_;
  int64_t step_ = 0;
  bool fresh_ = false;
  bool discarded_ = false;
};

TEST(TrainerTest, TheForwardPassWaitsLayerByLayerAndADiscardedStepIsComputedAnew) {
  auto model = *BuildModel("mnist_cnn", {});
  Dataset train = QuadrantDataset(100, 1);
  auto batches = BatchIterator::Create(&train, 10, 0, 1, true, 5);
  ASSERT_TRUE(batches.ok());
  OverlappedClient client(*model, /*discard_at=*/3);
  TrainerOptions options;
  options.train_steps = 6;
  options.log_every_n_steps = 0;
  Trainer trainer(model.get(), &client, batches->get(), options);
  absl::StatusOr<int64_t> step = trainer.Run();
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 6);
  // No layer read a parameter before waiting for it (they were NaN until then).
  EXPECT_TRUE(std::isfinite(trainer.last_loss())) << trainer.last_loss();
  // Step 3 was computed twice and pushed once, from a full pull.
  EXPECT_EQ(client.pushed_, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(client.full_pulls_, 2);  // the first view, and the one after the discarded step
  // Every overlapped view that was trained on: one wait per layer with
  // parameters, each for more of the vector (first layers first), and the
  // whole vector before the backward pass.
  ASSERT_EQ(client.waits_.size(), 5u);  // after the pushes of steps 0-4 (5 ended the job)
  for (std::vector<int64_t> waits : client.waits_) {
    // The loop's end waits for every answer of its last push.
    if (waits.back() == std::numeric_limits<int64_t>::max()) waits.pop_back();
    ASSERT_GE(waits.size(), 3u);
    EXPECT_GT(waits.front(), 0);
    EXPECT_LT(waits.front(), model->num_params());  // conv1 alone, not the whole vector
    EXPECT_TRUE(std::is_sorted(waits.begin(), waits.end()));
    EXPECT_EQ(waits.back(), model->num_params());
  }
}

// A regression head's evaluation: its loss, and the mean absolute and root
// mean squared errors, over predictions 2x of labels whose errors are 1, 0
// and -3; a label that is not a finite number is refused.
TEST(TrainerTest, ARegressionHeadIsEvaluatedByItsErrors) {
  std::vector<std::unique_ptr<Layer>> layers;
  DenseOptions out;
  out.units = 1;
  layers.push_back(std::make_unique<Dense>("out", out));
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create("line", {1}, 0, std::move(layers), {}, Head::kRegression);
  ASSERT_TRUE(model.ok()) << model.status();
  Dataset data;
  data.tabular = true;
  data.num_dense = 1;
  data.dense = {1, 2, 3};
  data.labels = {1, 4, 9};
  EXPECT_TRUE(CheckModelInput(**model, data, "/data").ok());
  const float params[] = {2.0f, 0.0f};  // kernel, bias
  ParameterView view;
  view.params = params;
  view.global_step = 7;
  absl::StatusOr<EvalMetrics> m = EvaluateDataset(model->get(), view, data, 2);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->regression);
  EXPECT_EQ(m->examples, 3);
  EXPECT_DOUBLE_EQ(m->loss, 10.0 / 3);  // mse
  EXPECT_DOUBLE_EQ(m->mae, 4.0 / 3);
  EXPECT_DOUBLE_EQ(m->rmse, std::sqrt(10.0 / 3));
  EXPECT_EQ(FormatEvalLine(*m),
            "Saving dict for global step 7: loss = 3.33333, mae = 1.33333, rmse = 1.82574, "
            "global_step = 7");
  data.labels[1] = std::numeric_limits<float>::infinity();
  const absl::Status bad = CheckModelInput(**model, data, "/data");
  EXPECT_NE(bad.message().find("/data has an example labelled inf; a regression label is a "
                               "finite number"),
            std::string::npos)
      << bad;
}

TEST(TrainerTest, EvalLineHasEstimatorFormat) {
  EvalMetrics m;
  m.global_step = 3000;
  m.accuracy = 0.91234;
  m.loss = 0.25;
  EXPECT_EQ(FormatEvalLine(m),
            "Saving dict for global step 3000: accuracy = 0.9123, global_step = 3000, "
            "loss = 0.25000");
}

TEST(LocalTrainingTest, ClearErrorsForBadConfig) {
  MemEnv env;
  TrainingSpec config;
  config.job_dir = "/job";
  config.data_dir = "/nowhere";
  config.train_steps = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(RunLocalTraining(&env, config).status()));
  config.train_steps = 10;
  config.model = "nope";
  auto r = RunLocalTraining(&env, config);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
  EXPECT_NE(r.status().message().find("mnist_cnn"), std::string::npos);
  config.model = "mnist_cnn";
  r = RunLocalTraining(&env, config);
  EXPECT_TRUE(absl::IsNotFound(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("/nowhere"), std::string::npos);
  config.job_dir = "";
  EXPECT_TRUE(absl::IsInvalidArgument(RunLocalTraining(&env, config).status()));
}

}  // namespace
}  // namespace pstrain
