// Cloud ML Engine trainingInput (ml_engine_config.cc).
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "config/config_yaml_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/config_test_util.h"

namespace pstrain {
namespace {

using config_test::ExpectInvalid;
using config_test::GoodConfig;
using config_test::Message;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------
// Cloud ML Engine trainingInput.

TEST(TrainingInputTest, CustomAssignsConsecutiveLoopbackPorts) {
  absl::StatusOr<JobConfig> config = ParseJobConfig(R"(
trainingInput:
  scaleTier: CUSTOM
  masterType: complex_model_m
  workerType: standard
  parameterServerType: large_model
  workerCount: 3
  parameterServerCount: 2
training:
  train_steps: 10
)",
                                                    "mlengine.yaml", 5000);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->cluster.chief, std::vector<std::string>{"127.0.0.1:5000"});
  EXPECT_EQ(config->cluster.worker,
            (std::vector<std::string>{"127.0.0.1:5001", "127.0.0.1:5002", "127.0.0.1:5003"}));
  EXPECT_EQ(config->cluster.ps, (std::vector<std::string>{"127.0.0.1:5004", "127.0.0.1:5005"}));
  EXPECT_EQ(config->training.train_steps, 10);
}

TEST(TrainingInputTest, DefaultBasePort) {
  absl::StatusOr<JobConfig> config = ParseJobConfig(
      "trainingInput: {scaleTier: CUSTOM, workerCount: 1, parameterServerCount: 1}\n", "m.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->cluster.chief, std::vector<std::string>{"127.0.0.1:23450"});
  EXPECT_EQ(config->cluster.worker, std::vector<std::string>{"127.0.0.1:23451"});
  EXPECT_EQ(config->cluster.ps, std::vector<std::string>{"127.0.0.1:23452"});
}

TEST(TrainingInputTest, BasicIsOneChiefAndNothingElse) {
  absl::StatusOr<JobConfig> config = ParseJobConfig("trainingInput: {scaleTier: BASIC}\n", "m");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->cluster.chief, std::vector<std::string>{"127.0.0.1:23450"});
  EXPECT_TRUE(config->cluster.worker.empty());
  EXPECT_TRUE(config->cluster.ps.empty());
  config->training.job_dir = "j";
  config->training.train_steps = 1;
  ExpectInvalid(ValidateJobConfig(*config), {"cluster.ps is empty"});

  ExpectInvalid(ParseJobConfig("trainingInput: {scaleTier: BASIC, workerCount: 2}\n", "m").status(),
                {"need scaleTier: CUSTOM"});
}

TEST(TrainingInputTest, StandardAndPremiumTiersKeepTheirShapeScaledToTheMachine) {
  int workers = 0, ps = 0;
  ASSERT_TRUE(config_internal::TierTaskCounts("STANDARD_1", 2, &workers, &ps));
  EXPECT_EQ(workers, 1);
  EXPECT_EQ(ps, 1);
  ASSERT_TRUE(config_internal::TierTaskCounts("STANDARD_1", 16, &workers, &ps));
  EXPECT_EQ(workers, 4);  // Cloud ML Engine's counts
  EXPECT_EQ(ps, 3);
  ASSERT_TRUE(config_internal::TierTaskCounts("PREMIUM_1", 8, &workers, &ps));
  EXPECT_EQ(workers, 7);
  EXPECT_EQ(ps, 4);
  ASSERT_TRUE(config_internal::TierTaskCounts("PREMIUM_1", 64, &workers, &ps));
  EXPECT_EQ(workers, 19);
  EXPECT_EQ(ps, 11);
  EXPECT_FALSE(config_internal::TierTaskCounts("BASIC_GPU", 8, &workers, &ps));

  // A job config written for Cloud ML Engine runs as it is.
  absl::StatusOr<JobConfig> config = ParseJobConfig(
      "trainingInput: {scaleTier: STANDARD_1, jobDir: /tmp/j, args: [--train-steps=5]}\n", "m");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->cluster.chief.size(), 1u);
  EXPECT_GE(config->cluster.worker.size(), 1u);
  EXPECT_LE(config->cluster.worker.size(), 4u);
  EXPECT_GE(config->cluster.ps.size(), 1u);
  EXPECT_LE(config->cluster.ps.size(), 3u);
  EXPECT_TRUE(ValidateJobConfig(*config).ok());
  EXPECT_TRUE(ParseJobConfig("trainingInput: {scaleTier: PREMIUM_1}\n", "m").ok());
  ExpectInvalid(
      ParseJobConfig("trainingInput: {scaleTier: STANDARD_1, workerCount: 2}\n", "m").status(),
      {"need scaleTier: CUSTOM (STANDARD_1 sets its own task counts)"});
}

TEST(TrainingInputTest, Errors) {
  ExpectInvalid(ParseJobConfig("trainingInput: {scaleTier: BASIC_GPU}\n", "m.yaml").status(),
                {"m.yaml: trainingInput.scaleTier: \"BASIC_GPU\" is not supported"});
  ExpectInvalid(
      ParseJobConfig("trainingInput: {scaleTier: CUSTOM, workerCount: -1}\n", "m").status(),
      {"trainingInput.workerCount: \"-1\" is not a task count"});
  ExpectInvalid(
      ParseJobConfig("trainingInput: {scaleTier: CUSTOM, parameterServerCount: x}\n", "m").status(),
      {"trainingInput.parameterServerCount"});
  ExpectInvalid(
      ParseJobConfig("trainingInput: {scaleTier: CUSTOM, workerCount: 10}\n", "m", 65530).status(),
      {"ports 65530..65540"});
  ExpectInvalid(ParseJobConfig("trainingInput: {scaleTier: BASIC}\n", "m", 0).status(),
                {"outside 1..65535"});
}

TEST(TrainingInputTest, JobDirAndArgsSetTrainingFields) {
  absl::StatusOr<JobConfig> config = ParseJobConfig(R"(
trainingInput:
  scaleTier: CUSTOM
  workerCount: 1
  parameterServerCount: 1
  jobDir: /jobs/a
  args: ["--train-steps=20", "--batch_size", "32", "--nesterov", "--update=sync"]
  region: us-central1
  runtimeVersion: "1.15"
training:
  optimizer: momentum
)",
                                                    "m.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->training.job_dir, "/jobs/a");
  EXPECT_EQ(config->training.train_steps, 20);
  EXPECT_EQ(config->training.batch_size, 32);
  EXPECT_TRUE(config->training.nesterov);
  EXPECT_EQ(config->training.update, UpdateMode::kSync);
  EXPECT_EQ(config->training.optimizer, "momentum");
  EXPECT_TRUE(ValidateJobConfig(*config).ok()) << ValidateJobConfig(*config);

  ExpectInvalid(ParseJobConfig("trainingInput: {scaleTier: BASIC, jobDir: /a}\n"
                               "training: {job_dir: /b}\n",
                               "m")
                    .status(),
                {"training.job_dir is set twice"});
  ExpectInvalid(
      ParseJobConfig("trainingInput: {scaleTier: BASIC, args: [--train_steps]}\n", "m").status(),
      {"trainingInput.args[0]: --train_steps has no value"});
  ExpectInvalid(
      ParseJobConfig("trainingInput: {scaleTier: BASIC, args: [--bach_size=1]}\n", "m").status(),
      {"trainingInput.args[0]: unknown key training.bach_size (did you mean "
       "batch_size?)"});
  ExpectInvalid(
      ParseJobConfig("trainingInput: {scaleTier: BASIC, args: [train_steps=1]}\n", "m").status(),
      {"is not a flag"});
  ExpectInvalid(
      ParseJobConfig("trainingInput: {scaleTier: BASIC, args: [--seed=-3]}\n", "m").status(),
      {"training.seed: \"-3\" is not a non-negative integer"});
}

}  // namespace
}  // namespace pstrain
