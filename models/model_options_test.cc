#include "models/model_options.h"

#include <fstream>
#include <map>
#include <sstream>

#include "config/model_spec.h"
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

TEST(ModelOptionsTest, BuiltInsAreTheirSpecFiles) {
  std::ifstream file(PSTRAIN_SOURCE_DIR "/models/specs/mnist_cnn.yaml");
  std::stringstream text;
  text << file.rdbuf();
  absl::StatusOr<std::string> spec = BuiltinModelSpec("mnist_cnn", ModelOptions());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(*spec, text.str());
  EXPECT_NE(BuiltinModelSpec("nope", ModelOptions()).status().message().find("mnist_cnn"),
            std::string::npos);
}

TEST(ModelOptionsTest, TheJobsModelCarriesItsSpecAndResolvingWritesItOut) {
  TrainingSpec t;
  absl::StatusOr<std::unique_ptr<Model>> model = BuildJobModel(t);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->name(), "mnist_cnn");
  EXPECT_FALSE((*model)->spec_yaml().empty());
  ASSERT_TRUE(ResolveJobModel(&t).ok());
  EXPECT_EQ(t.model, "mnist_cnn");
  ASSERT_TRUE(t.model_spec.has_value());
  EXPECT_EQ(ModelSpecToYaml(t.model_spec->spec), (*model)->spec_yaml());
  // Resolved, the job builds the same model from the spec alone.
  absl::StatusOr<std::unique_ptr<Model>> again = BuildJobModel(t);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ((*again)->variables().size(), (*model)->variables().size());
  for (size_t i = 0; i < (*model)->variables().size(); ++i) {
    EXPECT_EQ((*again)->variables()[i].name, (*model)->variables()[i].name);
    EXPECT_EQ((*again)->variables()[i].shape, (*model)->variables()[i].shape);
  }
}

TEST(ModelOptionsTest, AJobWithASpecBuildsItAndNotTheRegistrysModel) {
  TrainingSpec t;
  t.model = "mnist_cnn";  // a spec of the same name is still the spec
  t.model_spec = *ParseJobModelSpec(R"(name: mnist_cnn
input: [6, 6, 1]
classes: 4
layers: [flatten, {dense: {units: 4}}]
)",
                                    "spec.yaml");
  absl::StatusOr<std::unique_ptr<Model>> model = BuildJobModel(t);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->num_params(), 36 * 4 + 4);
  EXPECT_EQ((*model)->num_classes(), 4);
}

TEST(ModelOptionsTest, TrainableFalseAndMomentumReachTheVariables) {
  TrainingSpec t;
  t.model_spec = *ParseJobModelSpec(R"(name: frozen
input: [6, 6, 1]
classes: 2
layers:
  - conv2d: {filters: 2, kernel: 3, trainable: false}
  - batch_norm: {momentum: 0.9}
  - flatten
  - dense: {units: 2}
)",
                                    "spec.yaml");
  absl::StatusOr<std::unique_ptr<Model>> model = BuildJobModel(t);
  ASSERT_TRUE(model.ok()) << model.status();
  std::map<std::string, const VariableInfo*> by_name;
  for (const VariableInfo& v : (*model)->variables()) by_name[v.name] = &v;
  EXPECT_TRUE(by_name.at("conv2d/kernel")->spec.frozen);
  EXPECT_TRUE(by_name.at("conv2d/bias")->spec.frozen);
  EXPECT_FALSE(by_name.at("dense/kernel")->spec.frozen);
  EXPECT_FALSE(by_name.at("batch_normalization/gamma")->spec.frozen);
  EXPECT_FLOAT_EQ(by_name.at("batch_normalization/moving_mean")->spec.decay, 0.9f);
  EXPECT_FLOAT_EQ(by_name.at("batch_normalization/moving_variance")->spec.decay, 0.9f);
}

TEST(ModelOptionsTest, AModelWithNothingToTrainIsRefused) {
  TrainingSpec t;
  t.model_spec = *ParseJobModelSpec(R"(name: still
input: [2, 2, 1]
classes: 4
layers: [flatten]
)",
                                    "spec.yaml");
  absl::Status s = BuildJobModel(t).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("has no trainable variable"), std::string::npos) << s;
  t.model_spec = *ParseJobModelSpec(R"(name: frozen_all
input: [2, 2, 1]
classes: 2
layers: [flatten, {dense: {units: 2, trainable: false}}]
)",
                                    "spec.yaml");
  s = BuildJobModel(t).status();
  EXPECT_NE(s.message().find("trainable: false"), std::string::npos) << s;
}

}  // namespace
}  // namespace pstrain
