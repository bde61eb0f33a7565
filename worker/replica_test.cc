// The input a replica and the evaluation read: each stream's format is told
// by its own files' names (data/formats/example_format.h), never by the text of
// another setting's pattern.

#include "worker/replica.h"

#include <memory>
#include <string>

#include "common/env.h"
#include "data/synthetic/synthetic_ctr.h"
#include "gtest/gtest.h"
#include "input/eval_input.h"
#include "input/job_input.h"
#include "models/registry.h"
#include "worker/evaluation.h"

namespace pstrain {
namespace {

constexpr char kClickSpec[] = R"(name: tiny_click
input: [13]
head: binary
layers:
  - dense: {units: 1}
)";

class ReplicaInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticCtrConfig config;
    config.num_categorical = 2;
    config.num_dense = 4;
    config.vocabulary = {10};
    absl::StatusOr<SyntheticCtr> data = SyntheticCtr::Create(config);
    ASSERT_TRUE(data.ok()) << data.status();
    ASSERT_TRUE(data->WriteTsv(&env_, "/data/test.tsv", 250, kSyntheticTestStream).ok());
    absl::StatusOr<std::unique_ptr<Model>> model = BuildModelFromSpecText(kClickSpec, "the test");
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    // An online job whose pattern names no extension ("stream/*" of .tsv
    // files).
    t_.follow = true;
    t_.train_files = "/stream/*";
    t_.job_dir = "/job";
    t_.eval_batch_size = 100;
  }

  MemEnv env_;
  std::unique_ptr<Model> model_;
  TrainingSpec t_;
};

// Issue 52: with follow, the eval files' format came from train_files' text,
// and test.tsv was read as TFRecord ("record at offset 0 has a corrupted
// length").
TEST_F(ReplicaInputTest, ATsvEvalFileIsReadAsTsvWhateverTrainFilesSays) {
  t_.eval_files = "/data/test.tsv";
  absl::StatusOr<std::unique_ptr<EvalInput>> eval = EvalInput::Open(&env_, t_, *model_);
  ASSERT_TRUE(eval.ok()) << eval.status();
  std::vector<float> params(model_->num_params()), state(model_->num_state());
  model_->InitializeVariables(1, params.data(), state.data());
  ParameterView view;
  view.params = params.data();
  view.state = state.data();
  absl::StatusOr<EvalMetrics> metrics = EvaluateInput(model_.get(), view, **eval);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->examples, 250);
  EXPECT_TRUE(metrics->binary);
}

TEST_F(ReplicaInputTest, AFollowedStreamsFormatIsItsListedFiles) {
  ReplicaSpec one;
  absl::StatusOr<ExampleStreamOptions> o =
      StreamOptionsOf(&env_, t_, *model_, one, {"/stream/part-0.tsv", "/stream/part-1.tsv"},
                      "training.train_files");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->format, ExampleFormat::kCriteoTsv);
  // Files of two formats are refused, naming both.
  o = StreamOptionsOf(&env_, t_, *model_, one, {"/stream/part-0.tsv", "/stream/part-1.tfrecord"},
                      "training.train_files");
  ASSERT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << o.status();
  EXPECT_NE(o.status().message().find("/stream/part-1.tfrecord"), std::string::npos) << o.status();
}

}  // namespace
}  // namespace pstrain
