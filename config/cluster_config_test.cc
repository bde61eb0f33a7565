#include "config/cluster_config.h"

#include <random>
#include <string>
#include <vector>

#include "config/config_yaml_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/config_test_util.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using config_test::ExpectInvalid;
using config_test::GoodConfig;
using config_test::kGoodYaml;
using config_test::Message;

// ---------------------------------------------------------------------------
// Parsing.

TEST(ParseJobConfigTest, FullConfig) {
  constexpr char kYaml[] = R"(
cluster:
  chief: ["10.0.0.1:2222"]
  worker: ["10.0.0.2:2222", "10.0.0.3:2222"]
  ps: ["10.0.0.4:2222", "10.0.0.5:2222"]
training:
  model: cifar10_resnet
  data_dir: /data/cifar
  job_dir: gs-free/job
  update: sync
  replicas_to_aggregate: 2
  total_replicas: 3
  chief_trains: false
  optimizer: momentum
  learning_rate: 0.1
  learning_rate_schedule: "1000:0.1,2000:0.01"
  momentum: 0.95
  nesterov: true
  weight_decay: 1e-4
  weight_decay_exclusions: bias,batch_norm
  batch_size: 128
  eval_batch_size: 500
  train_steps: 64000
  eval_steps: 50
  log_every_n_steps: 10
  seed: 18446744073709551615
  sync_timeout: 12.5
  startup_timeout: 60
  threads: 4
)";
  absl::StatusOr<JobConfig> config = ParseJobConfig(kYaml, "cluster.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->cluster.chief, std::vector<std::string>{"10.0.0.1:2222"});
  EXPECT_EQ(config->cluster.worker, (std::vector<std::string>{"10.0.0.2:2222", "10.0.0.3:2222"}));
  EXPECT_EQ(config->cluster.ps, (std::vector<std::string>{"10.0.0.4:2222", "10.0.0.5:2222"}));
  const TrainingSpec& t = config->training;
  EXPECT_EQ(t.model, "cifar10_resnet");
  EXPECT_EQ(t.data_dir, "/data/cifar");
  EXPECT_EQ(t.job_dir, "gs-free/job");
  EXPECT_EQ(t.update, UpdateMode::kSync);
  EXPECT_EQ(t.replicas_to_aggregate, 2);
  EXPECT_EQ(t.total_replicas, 3);
  EXPECT_FALSE(t.chief_trains);
  EXPECT_EQ(t.optimizer, "momentum");
  EXPECT_DOUBLE_EQ(t.learning_rate, 0.1);
  EXPECT_EQ(t.learning_rate_schedule, "1000:0.1,2000:0.01");
  EXPECT_DOUBLE_EQ(t.momentum, 0.95);
  EXPECT_TRUE(t.nesterov);
  EXPECT_DOUBLE_EQ(t.weight_decay, 1e-4);
  EXPECT_EQ(t.weight_decay_exclusions, "bias,batch_norm");
  EXPECT_EQ(t.batch_size, 128);
  EXPECT_EQ(t.eval_batch_size, 500);
  EXPECT_EQ(t.train_steps, 64000);
  EXPECT_EQ(t.eval_steps, 50);
  EXPECT_EQ(t.log_every_n_steps, 10);
  EXPECT_EQ(t.seed, 18446744073709551615ULL);
  EXPECT_DOUBLE_EQ(t.sync_timeout, 12.5);
  EXPECT_DOUBLE_EQ(t.startup_timeout, 60);
  EXPECT_EQ(t.threads, 4);
  // The chief does not train, so T = 2 workers and N = 3 is refused.
  EXPECT_EQ(NumTrainingReplicas(*config), 2);
  ExpectInvalid(ValidateJobConfig(*config), {"training.total_replicas = 3"});
  config->training.total_replicas = 2;
  EXPECT_TRUE(ValidateJobConfig(*config).ok()) << ValidateJobConfig(*config);
}

TEST(ParseJobConfigTest, EveryTrainingDefault) {
  absl::StatusOr<JobConfig> config =
      ParseJobConfig("cluster:\n  chief: [\"h:1\"]\n  ps: [\"h:2\"]\n", "cluster.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const TrainingSpec& t = config->training;
  EXPECT_EQ(t, TrainingSpec());
  EXPECT_EQ(t.model, "mnist_cnn");
  EXPECT_EQ(t.data_dir, "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(t.job_dir, "");
  EXPECT_EQ(t.update, UpdateMode::kAsync);
  EXPECT_EQ(t.replicas_to_aggregate, 0);
  EXPECT_EQ(t.total_replicas, 0);
  EXPECT_TRUE(t.chief_trains);
  EXPECT_EQ(t.optimizer, "");
  EXPECT_DOUBLE_EQ(t.learning_rate, 0.001);
  EXPECT_EQ(t.learning_rate_schedule, "");
  EXPECT_DOUBLE_EQ(t.momentum, 0.9);
  EXPECT_FALSE(t.nesterov);
  EXPECT_DOUBLE_EQ(t.weight_decay, 0.0);
  EXPECT_EQ(t.weight_decay_exclusions, "bias");
  EXPECT_EQ(t.embedding_optimizer, "adagrad");
  EXPECT_DOUBLE_EQ(t.embedding_learning_rate, 0.05);
  EXPECT_EQ(t.embedding_l1, 0.0);
  EXPECT_EQ(t.embedding_l2, 0.0);
  EXPECT_EQ(t.embedding_ttl_steps, 0);
  EXPECT_EQ(t.embedding_min_count, 0);
  EXPECT_EQ(t.batch_size, 100);
  EXPECT_EQ(t.eval_batch_size, 200);
  EXPECT_EQ(t.train_steps, 0);
  EXPECT_EQ(t.eval_steps, 1000);
  EXPECT_EQ(t.log_every_n_steps, 100);
  EXPECT_EQ(t.seed, 1u);
  EXPECT_DOUBLE_EQ(t.sync_timeout, 30);
  EXPECT_DOUBLE_EQ(t.startup_timeout, 300);
  EXPECT_DOUBLE_EQ(t.ps_retry_secs, 60);
  EXPECT_EQ(t.threads, 0);
  EXPECT_TRUE(config->cluster.worker.empty());
}

TEST(ParseJobConfigTest, EmptyTrainingSectionAndEmptyJobListsAreAllowed) {
  absl::StatusOr<JobConfig> config = ParseJobConfig(
      "cluster:\n  chief: [\"h:1\"]\n  worker: []\n  ps:\n    - h:2\ntraining:\n", "cluster.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->cluster.worker.empty());
  EXPECT_EQ(config->cluster.ps, std::vector<std::string>{"h:2"});
}

TEST(ParseJobConfigTest, HyphenKeys) {
  absl::StatusOr<JobConfig> config = ParseJobConfig(R"(
cluster: {chief: ["h:1"], ps: ["h:2"]}
training:
  job-dir: /tmp/j
  train-steps: 7
  replicas-to-aggregate: 1
  log-every-n-steps: 3
)",
                                                    "cluster.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->training.job_dir, "/tmp/j");
  EXPECT_EQ(config->training.train_steps, 7);
  EXPECT_EQ(config->training.replicas_to_aggregate, 1);
  EXPECT_EQ(config->training.log_every_n_steps, 3);
}

TEST(ParseJobConfigTest, SameKeyWithBothSpellingsIsAnError) {
  absl::StatusOr<JobConfig> config = ParseJobConfig(
      "cluster: {chief: [\"h:1\"], ps: [\"h:2\"]}\ntraining:\n  train_steps: 1\n  train-steps: 2\n",
      "cluster.yaml");
  ExpectInvalid(config.status(), {"cluster.yaml: ", "training.train_steps is set twice", "line 4"});
}

TEST(ParseJobConfigTest, MasterIsAnAliasOfChief) {
  absl::StatusOr<JobConfig> config =
      ParseJobConfig("cluster:\n  master: [\"h:1\"]\n  ps: [\"h:2\"]\n", "cluster.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->cluster.chief, std::vector<std::string>{"h:1"});
  EXPECT_EQ(config->cluster.num_tasks("master"), 1);
  EXPECT_EQ(*config->cluster.address("master", 0), "h:1");

  config = ParseJobConfig("cluster:\n  master: [\"h:1\"]\n  chief: [\"h:3\"]\n", "cluster.yaml");
  ExpectInvalid(config.status(), {"cluster.chief", "given twice"});
}

TEST(ParseJobConfigTest, UnknownKeysNameThePathAndSuggest) {
  absl::StatusOr<JobConfig> config = ParseJobConfig(R"(cluster:
  chief: ["h:1"]
training:
  learning_rat: 0.1
)",
                                                    "cluster.yaml");
  EXPECT_TRUE(absl::IsInvalidArgument(config.status()));
  EXPECT_EQ(Message(config.status()),
            "cluster.yaml: unknown key training.learning_rat (did you mean learning_rate?), "
            "line 4");

  config = ParseJobConfig("cluster:\n  wroker: [\"h:1\"]\n", "c.yaml");
  ExpectInvalid(config.status(), {"c.yaml: unknown key cluster.wroker (did you mean worker?)"});

  config = ParseJobConfig("clustr:\n  chief: [\"h:1\"]\n", "c.yaml");
  ExpectInvalid(config.status(), {"c.yaml: unknown key clustr (did you mean cluster?)"});

  config = ParseJobConfig("cluster: {}\ntraining: {completely_different: 1}\n", "c.yaml");
  ExpectInvalid(config.status(), {"unknown key training.completely_different"});
  EXPECT_THAT(Message(config.status()), Not(HasSubstr("did you mean")));

  config = ParseJobConfig("trainingInput: {scaleTier: CUSTOM, workercount: 2}\n", "c.yaml");
  ExpectInvalid(config.status(),
                {"unknown key trainingInput.workercount (did you mean workerCount?)"});
}

TEST(ParseJobConfigTest, ValueErrorsNameTheKeyAndLine) {
  absl::StatusOr<JobConfig> config =
      ParseJobConfig("cluster: {}\ntraining:\n  batch_size: abc\n", "cluster.yaml");
  ExpectInvalid(config.status(),
                {"cluster.yaml: training.batch_size: \"abc\" is not an integer", "line 3"});

  config = ParseJobConfig("cluster: {}\ntraining:\n  batch_size: [1, 2]\n", "cluster.yaml");
  ExpectInvalid(config.status(), {"training.batch_size must be a single value"});

  config = ParseJobConfig("cluster:\n  worker: h:1\n", "cluster.yaml");
  ExpectInvalid(config.status(), {"cluster.worker must be a list"});

  config = ParseJobConfig("cluster:\n  worker: [[h, 1]]\n", "cluster.yaml");
  ExpectInvalid(config.status(), {"cluster.worker[0]"});

  config = ParseJobConfig("cluster: [a, b]\n", "cluster.yaml");
  ExpectInvalid(config.status(), {"cluster must be a map"});

  config = ParseJobConfig("- a\n- b\n", "cluster.yaml");
  ExpectInvalid(config.status(), {"top level must be a map"});
}

TEST(ParseJobConfigTest, YamlSyntaxErrorNamesTheLine) {
  absl::StatusOr<JobConfig> config =
      ParseJobConfig("cluster:\n  chief: [\"h:1\"]\n  worker: [\"h:2\"\n", "cluster.yaml");
  ExpectInvalid(config.status(), {"cluster.yaml: YAML syntax error at line "});

  config = ParseJobConfig("cluster:\n  chief: [\"h:1\"]\ntraining:\n  a: b\n   c: d\n", "x.yaml");
  ExpectInvalid(config.status(), {"x.yaml: YAML syntax error at line 5"});
}

TEST(ParseJobConfigTest, NeedsExactlyOneOfClusterAndTrainingInput) {
  ExpectInvalid(ParseJobConfig("", "c.yaml").status(), {"c.yaml: is empty"});
  ExpectInvalid(ParseJobConfig("training: {train_steps: 1}\n", "c.yaml").status(),
                {"no cluster section"});
  ExpectInvalid(
      ParseJobConfig("cluster: {}\ntrainingInput: {scaleTier: BASIC}\n", "c.yaml").status(),
      {"not both"});
  ExpectInvalid(ParseJobConfig("cluster: {}\ncluster: {}\n", "c.yaml").status(),
                {"cluster is given twice (first at line 1), line 2"});
}

// YAML's keys are unique; yaml-cpp keeps both entries, pstrain refuses them.
TEST(ParseJobConfigTest, AKeyGivenTwiceIsAnError) {
  ExpectInvalid(ParseJobConfig("cluster:\n  ps: [\"h:1\"]\n  ps: [\"h:2\"]\n", "c.yaml").status(),
                {"cluster.ps is given twice (first at line 2), line 3"});
  ExpectInvalid(ParseJobConfig("cluster: {chief: [\"h:1\"]}\ntraining:\n  train_steps: 10\n"
                               "  train_steps: 20\n",
                               "c.yaml")
                    .status(),
                {"training.train_steps is given twice (first at line 3), line 4"});
}

TEST(LoadJobConfigTest, ReadsThroughEnv) {
  MemEnv env;
  ASSERT_TRUE(env.WriteFileAtomic("/cfg/cluster.yaml", kGoodYaml).ok());
  absl::StatusOr<JobConfig> config = LoadJobConfig(&env, "/cfg/cluster.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(*config, GoodConfig());

  ASSERT_TRUE(env.WriteFileAtomic("/cfg/bad.yaml", "cluster:\n  cheif: []\n").ok());
  ExpectInvalid(LoadJobConfig(&env, "/cfg/bad.yaml").status(),
                {"/cfg/bad.yaml: unknown key cluster.cheif (did you mean chief?)"});

  EXPECT_TRUE(absl::IsNotFound(LoadJobConfig(&env, "/cfg/missing.yaml").status()));
}

TEST(LoadJobConfigTest, ShippedExamplesAreValid) {
  Env* env = Env::Default();
  absl::StatusOr<JobConfig> local =
      LoadJobConfig(env, std::string(PSTRAIN_SOURCE_DIR) + "/deploy/local/cluster.yaml");
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_TRUE(ValidateJobConfig(*local).ok()) << ValidateJobConfig(*local);
  EXPECT_EQ(local->cluster.chief, std::vector<std::string>{"127.0.0.1:23450"});
  EXPECT_EQ(local->cluster.worker,
            (std::vector<std::string>{"127.0.0.1:23451", "127.0.0.1:23452"}));
  EXPECT_EQ(local->cluster.ps, std::vector<std::string>{"127.0.0.1:23453"});
  EXPECT_EQ(local->training.update, UpdateMode::kSync);
  EXPECT_EQ(local->training.train_steps, 2000);
  EXPECT_EQ(local->training.job_dir, "jobs/local");

  absl::StatusOr<JobConfig> mlengine =
      LoadJobConfig(env, std::string(PSTRAIN_SOURCE_DIR) + "/deploy/local/mlengine.yaml");
  ASSERT_TRUE(mlengine.ok()) << mlengine.status();
  EXPECT_TRUE(ValidateJobConfig(*mlengine).ok()) << ValidateJobConfig(*mlengine);
  EXPECT_EQ(mlengine->cluster, local->cluster);
  EXPECT_EQ(mlengine->training.train_steps, 3000);
  EXPECT_EQ(mlengine->training.job_dir, "jobs/mlengine");
}

// ---------------------------------------------------------------------------
// The cluster.

TEST(ClusterSpecTest, NumTasksAndAddress) {
  const ClusterSpec cluster = GoodConfig().cluster;
  EXPECT_EQ(cluster.num_tasks("chief"), 1);
  EXPECT_EQ(cluster.num_tasks("worker"), 2);
  EXPECT_EQ(cluster.num_tasks("ps"), 1);
  EXPECT_EQ(cluster.num_tasks("evaluator"), 0);
  EXPECT_EQ(*cluster.address("worker", 1), "127.0.0.1:23452");
  EXPECT_EQ(*cluster.address("ps", 0), "127.0.0.1:23453");
  ExpectInvalid(cluster.address("worker", 2).status(), {"worker:2", "task_index 0..1"});
  ExpectInvalid(cluster.address("nope", 0).status(), {"\"nope\" is not a job name"});
}

TEST(RobustnessTest, DamagedInputIsAnErrorOrAConfigNeverACrash) {
  // Flips, drops and duplicates bytes of valid inputs; every result must be a
  // Status (yaml-cpp's exceptions must not escape).
  const std::string inputs[] = {
      kGoodYaml, "trainingInput: {scaleTier: CUSTOM, workerCount: 2, args: [--train-steps, '5']}\n",
      R"({"cluster": {"chief": ["c:1"], "worker": ["w:1"]}, "task": {"type": "worker"}})"};
  const char kBytes[] = "{}[]:,-'\"\n #&*!|>%@`?\t\\x0";
  std::mt19937 rng(1234);
  for (const std::string& input : inputs) {
    for (int trial = 0; trial < 500; ++trial) {
      std::string damaged = input;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits && !damaged.empty(); ++e) {
        const size_t at = rng() % damaged.size();
        switch (rng() % 3) {
          case 0:
            damaged[at] = kBytes[rng() % (sizeof(kBytes) - 1)];
            break;
          case 1:
            damaged.erase(at, 1 + rng() % 4);
            break;
          default:
            damaged.insert(at, damaged.substr(at, 1 + rng() % 8));
        }
      }
      absl::StatusOr<JobConfig> config = ParseJobConfig(damaged, "fuzz.yaml");
      if (config.ok()) {
        (void)ValidateJobConfig(*config);
      } else {
        EXPECT_TRUE(absl::IsInvalidArgument(config.status())) << config.status();
      }
      absl::StatusOr<TfConfig> tf_config = ParseTfConfig(damaged);
      if (!tf_config.ok()) {
        EXPECT_TRUE(absl::IsInvalidArgument(tf_config.status())) << tf_config.status();
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Round trip.

TEST(JobConfigToYamlTest, RoundTrip) {
  JobConfig config = GoodConfig();
  config.cluster.worker.push_back("[::1]:9");
  TrainingSpec& t = config.training;
  t.model = "true";  // strings that look like other types stay strings
  t.data_dir = "/path with spaces/and: colon/\"quoted\"/#hash";
  t.job_dir = "123";
  t.learning_rate_schedule = "";
  t.weight_decay_exclusions = "null";
  t.update = UpdateMode::kSync;
  t.replicas_to_aggregate = 2;
  t.chief_trains = false;
  t.learning_rate = 0.1 + 0.2;  // not exactly 0.3: needs all digits
  t.momentum = 1e-300;
  t.weight_decay = 5e-4;
  t.nesterov = true;
  t.seed = 18446744073709551615ULL;
  t.train_steps = int64_t{1} << 40;
  t.sync_timeout = 0.25;
  t.embedding_optimizer = "ftrl";
  t.embedding_learning_rate = 0.1 + 0.2;
  t.embedding_l1 = 1e-300;
  t.embedding_l2 = 2.5;
  t.embedding_ttl_steps = int64_t{1} << 50;
  t.embedding_min_count = 3;
  const std::string yaml = JobConfigToYaml(config);
  absl::StatusOr<JobConfig> parsed = ParseJobConfig(yaml, "roundtrip.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << yaml;
  EXPECT_EQ(*parsed, config) << yaml;

  // Defaults and an empty cluster survive too.
  JobConfig empty;
  parsed = ParseJobConfig(JobConfigToYaml(empty), "roundtrip.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, empty);
}

TEST(JobConfigToYamlTest, WritesEveryField) {
  const std::string yaml = JobConfigToYaml(GoodConfig());
  for (const std::string& name : TrainingFieldNames()) {
    EXPECT_THAT(yaml, HasSubstr(name + ":"));
  }
  EXPECT_THAT(yaml, HasSubstr("cluster:"));
  EXPECT_THAT(yaml, HasSubstr("\"127.0.0.1:23453\""));
}

TEST(UpdateModeTest, ParseAndName) {
  EXPECT_EQ(*ParseUpdateMode("async"), UpdateMode::kAsync);
  EXPECT_EQ(*ParseUpdateMode("sync"), UpdateMode::kSync);
  EXPECT_EQ(UpdateModeName(UpdateMode::kAsync), "async");
  EXPECT_EQ(UpdateModeName(UpdateMode::kSync), "sync");
  EXPECT_EQ(*ParseUpdateMode("ssp"), UpdateMode::kSsp);
  EXPECT_EQ(UpdateModeName(UpdateMode::kSsp), "ssp");
  ExpectInvalid(ParseUpdateMode("bsp").status(), {"\"bsp\" is not an update mode"});
}

TEST(CanonicalJobNameTest, MasterIsChief) {
  EXPECT_EQ(*CanonicalJobName("master"), "chief");
  EXPECT_EQ(*CanonicalJobName("chief"), "chief");
  EXPECT_EQ(*CanonicalJobName("worker"), "worker");
  EXPECT_EQ(*CanonicalJobName("ps"), "ps");
  EXPECT_FALSE(CanonicalJobName("Worker").ok());
}

}  // namespace
}  // namespace pstrain
