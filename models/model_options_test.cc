#include "models/model_options.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(ModelOptionsTest, EffectiveOptimizerIsTheModelsDefaultUnlessGiven) {
  TrainingSpec t;
  EXPECT_EQ(t.optimizer, "");
  EXPECT_EQ(EffectiveOptimizer(t), "adam");
  TrainingSpec resnet;
  resnet.model = "cifar10_resnet";
  EXPECT_EQ(EffectiveOptimizer(resnet), "momentum");
  resnet.optimizer = "sgd";
  EXPECT_EQ(EffectiveOptimizer(resnet), "sgd");
}

TEST(ModelOptionsTest, Cifar10ScheduleIsTheEstimatorsAndMnistHasNone) {
  // 45000 / (128 x 1) = 351 batches per epoch.
  EXPECT_EQ(DefaultLearningRateSchedule("cifar10_resnet", 128, 1),
            "28782:0.1,43173:0.01,105300:0.002");
  // 45000 / (128 x 2) = 175.
  EXPECT_EQ(DefaultLearningRateSchedule("cifar10_resnet", 128, 2),
            "14350:0.1,21525:0.01,52500:0.002");
  EXPECT_EQ(DefaultLearningRateSchedule("mnist_cnn", 100, 2), "");
}

TEST(ModelOptionsTest, BuildJobModelRefusesADepthThatIsNot6nPlus2) {
  TrainingSpec t;
  t.model = "cifar10_resnet";
  t.num_layers = 21;
  absl::StatusOr<std::unique_ptr<Model>> model = BuildJobModel(t);
  ASSERT_FALSE(model.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(model.status()));
  EXPECT_NE(model.status().message().find("training.num_layers = 21"), std::string::npos)
      << model.status();
  t.num_layers = 8;
  ASSERT_TRUE(BuildJobModel(t).ok());
  t.model = "nope";
  EXPECT_NE(BuildJobModel(t).status().message().find("unknown model"), std::string::npos);
}

}  // namespace
}  // namespace pstrain
