// Progressive validation: metrics over a sliding window of the examples
// trained on, from the logits each was predicted with before its update.
#include "worker/progressive_validation.h"

#include <cmath>
#include <vector>

#include "data/batcher.h"
#include "data/binary_metrics.h"
#include "gtest/gtest.h"
#include "models/registry.h"
#include "ps/in_process_client.h"
#include "testing/data_test_util.h"
#include "worker/trainer.h"

namespace pstrain {
namespace {

double BinaryLoss(double z, int y) { return std::log1p(std::exp(-z)) + (y == 0 ? z : 0); }

TEST(ProgressiveValidationTest, ABinaryHeadsWindowHoldsTheLastExamples) {
  ProgressiveValidation p(/*window=*/4, /*classes=*/1);
  EXPECT_EQ(p.Compute().examples, 0);
  const std::vector<float> logits = {5, -5, 0.5f, -1, 2, -0.25f};
  const std::vector<float> labels = {0, 0, 1, 0, 1, 1};
  p.Add(logits.data(), labels.data(), 2);
  p.Add(logits.data() + 2, labels.data() + 2, 4);
  const ProgressiveMetrics m = p.Compute();
  EXPECT_EQ(m.examples, 4);
  // The last 4: (0.5, 1) (-1, 0) (2, 1) (-0.25, 1).
  double loss = 0;
  for (int i = 2; i < 6; ++i) loss += BinaryLoss(logits[i], labels[i]);
  EXPECT_NEAR(m.loss, loss / 4, 1e-9);
  EXPECT_DOUBLE_EQ(m.accuracy, 3.0 / 4);
  const std::vector<float> scores(logits.begin() + 2, logits.end());
  const std::vector<float> ys = {1, 0, 1, 1};
  ASSERT_TRUE(m.auc.has_value());
  EXPECT_DOUBLE_EQ(*m.auc, *BinaryAuc(scores, ys));
  EXPECT_NE(FormatProgressive(m).find("(last 4 examples): loss = "), std::string::npos);
  // One class in the window: no AUC.
  ProgressiveValidation one(2, 1);
  one.Add(logits.data(), labels.data(), 2);
  EXPECT_FALSE(one.Compute().auc.has_value());
  EXPECT_EQ(FormatProgressive(one.Compute()).find("auc"), std::string::npos);
}

TEST(ProgressiveValidationTest, SoftmaxLossIsTheCrossEntropyOfTheLabel) {
  ProgressiveValidation p(10, 3);
  const std::vector<float> logits = {1, 2, 3, 0, 0, 4};
  const std::vector<float> labels = {0, 2};
  p.Add(logits.data(), labels.data(), 2);
  const double a = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 1;
  const double b = std::log(2 + std::exp(4.0)) - 4;
  const ProgressiveMetrics m = p.Compute();
  EXPECT_NEAR(m.loss, (a + b) / 2, 1e-6);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.5);
  EXPECT_FALSE(m.auc.has_value());
}

// A regression head (classes 0): the window's squared and absolute errors,
// no accuracy.
TEST(ProgressiveValidationTest, ARegressionHeadsWindowHasItsSquaredAndAbsoluteErrors) {
  ProgressiveValidation p(/*window=*/3, /*classes=*/0);
  const std::vector<float> predictions = {100, 1.5f, -2, 4};
  const std::vector<float> labels = {0, 1, 1, 4};  // the last 3 are off by 0.5, -3, 0
  p.Add(predictions.data(), labels.data(), 1);
  p.Add(predictions.data() + 1, labels.data() + 1, 3);
  const ProgressiveMetrics m = p.Compute();
  EXPECT_EQ(m.examples, 3);
  EXPECT_NEAR(m.loss, (0.25 + 9) / 3, 1e-9);
  ASSERT_TRUE(m.mae.has_value());
  EXPECT_NEAR(*m.mae, 3.5 / 3, 1e-7);
  EXPECT_FALSE(m.auc.has_value());
  EXPECT_EQ(FormatProgressive(m),
            "progressive validation (last 3 examples): loss = 3.0833, mae = 1.1667");
}

// In a trainer, the window's loss is the training loss of the same steps:
// the predictions are the training pass's, made before each update.
TEST(ProgressiveValidationTest, TheTrainerAddsEachBatchBeforeItsUpdate) {
  auto model = *BuildModel("mnist_cnn", {});
  auto client = InProcessClient::Create(*model, OptimizerConfig(), 0.99f, 3);
  ASSERT_TRUE(client.ok()) << client.status();
  Dataset train = testutil::MakeDataset(400, 28, 28, 1);
  for (int64_t i = 0; i < train.size(); ++i) train.labels[i] = static_cast<float>(i % 10);
  auto batches = BatchIterator::Create(&train, 20, 0, 1, true, 5);
  ASSERT_TRUE(batches.ok());
  ProgressiveValidation progressive(/*window=*/200, model->num_logits());
  std::vector<ProgressiveMetrics> seen;
  TrainerOptions options;
  options.train_steps = 30;
  options.log_every_n_steps = 10;
  options.progressive = &progressive;
  options.on_progressive = [&](int64_t, const ProgressiveMetrics& m) { seen.push_back(m); };
  Trainer trainer(model.get(), client->get(), batches->get(), options);
  ASSERT_TRUE(trainer.Run().ok());
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].examples, 200);
  EXPECT_EQ(seen[2].examples, 200);
  // The last 200 examples are the last 10 steps' batches.
  EXPECT_NEAR(seen[2].loss, trainer.last_loss(), 1e-4);
}

}  // namespace
}  // namespace pstrain
