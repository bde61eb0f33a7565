#include "config/cluster_config.h"

#include <limits>
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
// Validation.

TEST(ValidateJobConfigTest, GoodConfigIsValid) {
  JobConfig config = GoodConfig();
  EXPECT_TRUE(ValidateJobConfig(config).ok()) << ValidateJobConfig(config);
  config.training.update = UpdateMode::kSync;
  EXPECT_TRUE(ValidateJobConfig(config).ok()) << ValidateJobConfig(config);
  config.cluster.worker = {"[::1]:1", "[fe80::1]:65535"};
  EXPECT_TRUE(ValidateJobConfig(config).ok()) << ValidateJobConfig(config);
}

TEST(ValidateJobConfigTest, NeedsAPs) {
  JobConfig config = GoodConfig();
  config.cluster.ps.clear();
  ExpectInvalid(ValidateJobConfig(config), {"cluster.ps is empty", "at least one"});
}

TEST(ValidateJobConfigTest, NeedsExactlyOneChief) {
  JobConfig config = GoodConfig();
  config.cluster.chief.clear();
  ExpectInvalid(ValidateJobConfig(config),
                {"cluster.chief is empty", "exactly one chief", "worker 0", "not supported"});
  config.cluster.chief = {"h:1", "h:2"};
  ExpectInvalid(ValidateJobConfig(config), {"cluster.chief has 2 tasks", "exactly one chief"});
}

TEST(ValidateJobConfigTest, BadAddresses) {
  struct Case {
    std::string address;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"localhost", "cluster.worker[1] = \"localhost\" is not \"host:port\""},
      {":2222", "cluster.worker[1] = \":2222\" has no host"},
      {"h:0", "cluster.worker[1] = \"h:0\": the port must be a number in 1..65535"},
      {"h:65536", "the port must be a number in 1..65535"},
      {"h:", "the port must be a number in 1..65535"},
      {"h:22x", "the port must be a number in 1..65535"},
      {"h:-1", "the port must be a number in 1..65535"},
      {"h:000001", "the port must be a number in 1..65535"},
      {"::1:2222", "IPv6"},
      {"[::1:2222", "unclosed"},
      {"[]:1", "has no host"},
      {"my host:1", "space"},
  };
  for (const Case& c : cases) {
    JobConfig config = GoodConfig();
    config.cluster.worker[1] = c.address;
    SCOPED_TRACE(c.address);
    ExpectInvalid(ValidateJobConfig(config), {"cluster.worker[1]", c.message});
  }
}

TEST(ValidateJobConfigTest, NoAddressUsedTwice) {
  JobConfig config = GoodConfig();
  config.cluster.ps[0] = "127.0.0.1:23451";
  ExpectInvalid(ValidateJobConfig(config),
                {"cluster.ps[0] = \"127.0.0.1:23451\" is also cluster.worker[0]"});
}

TEST(ValidateJobConfigTest, TrainingRanges) {
  struct Case {
    std::string key;
    std::string value;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"train_steps", "0", "training.train_steps = 0 must be positive"},
      {"train_steps", "-5", "training.train_steps = -5 must be positive"},
      {"num_epochs", "-1", "training.num_epochs = -1: passes over train_files"},
      {"max_bad_records", "-1", "training.max_bad_records = -1: bad records skipped"},
      {"num_epochs", "2", "training.num_epochs = 2 counts passes over training.train_files, which"},
      {"follow", "true", "training.follow follows the files training.train_files matches"},
      {"poll_secs", "0", "training.poll_secs = 0 must be positive"},
      {"progressive_window", "0", "training.progressive_window = 0 must be positive"},
      {"export_steps", "-1", "training.export_steps = -1, training.export_secs = 0: exports"},
      {"batch_size", "0", "training.batch_size = 0 must be positive"},
      {"eval_batch_size", "-1", "training.eval_batch_size = -1 must be positive"},
      {"eval_steps", "-1", "training.eval_steps = -1 must be 0 or more"},
      {"log_every_n_steps", "-1", "training.log_every_n_steps = -1"},
      {"job_dir", "", "training.job_dir is empty"},
      {"model", "", "training.model is empty"},
      {"data_dir", "", "training.data_dir is empty"},
      {"optimizer", "rmsprop", "training.optimizer = \"rmsprop\": use sgd, momentum or adam"},
      {"learning_rate", "0", "training.learning_rate = 0 must be positive"},
      {"momentum", "-0.5", "training.momentum = -0.5"},
      {"weight_decay", "-1e-4", "training.weight_decay = -1e-04 must be 0 or more"},
      {"sync_timeout", "0", "training.sync_timeout = 0 must be positive"},
      {"startup_timeout", "-1", "training.startup_timeout = -1 must be positive"},
      {"ps_retry_secs", "0", "training.ps_retry_secs = 0 must be positive"},
      {"watchdog_secs", "20", "training.watchdog_secs = 20 must be 0 (off) or more than"},
      {"watchdog_secs", "-1", "training.watchdog_secs = -1 must be 0 (off)"},
      {"threads", "-2", "training.threads = -2"},
      {"embedding_optimizer", "sgd",
       "training.embedding_optimizer = \"sgd\": use adagrad, ftrl (FTRL-Proximal) or adam"},
      {"embedding_optimizer", "Adagrad", "training.embedding_optimizer = \"Adagrad\""},
      {"embedding_learning_rate", "0", "training.embedding_learning_rate = 0 must be positive"},
      {"embedding_learning_rate", "-0.1", "training.embedding_learning_rate = -0.1"},
      {"embedding_l1", "-1", "training.embedding_l1 = -1 must be a finite number, 0 or more"},
      {"embedding_l2", "-1e-3", "training.embedding_l2 = -0.001 must be"},
      {"embedding_ttl_steps", "-1", "training.embedding_ttl_steps = -1 must be 0 (never evict)"},
      {"embedding_min_count", "-2", "training.embedding_min_count = -2 must be 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key + "=" + c.value);
    JobConfig config = GoodConfig();
    ASSERT_TRUE(SetTrainingField(&config.training, c.key, c.value).ok());
    ExpectInvalid(ValidateJobConfig(config), {c.message});
  }
  JobConfig config = GoodConfig();
  config.training.eval_steps = 0;  // no evaluation is allowed
  EXPECT_TRUE(ValidateJobConfig(config).ok());
  // num_epochs over train_files ends the job without train_steps.
  config.training.train_steps = 0;
  config.training.train_files = "/data/part-*.tfrecord.gz";
  config.training.num_epochs = 3;
  EXPECT_TRUE(ValidateJobConfig(config).ok());
  config.training.num_epochs = 0;
  ExpectInvalid(ValidateJobConfig(config),
                {"training.train_steps = 0 must be positive", "set num_epochs with train_files"});
  // An online job (follow) runs until stopped, each file read once.
  config.training.follow = true;
  EXPECT_TRUE(ValidateJobConfig(config).ok());
  config.training.num_epochs = 2;
  ExpectInvalid(ValidateJobConfig(config),
                {"training.num_epochs = 2 with training.follow, which trains on each file once"});
}

TEST(ValidateJobConfigTest, EmbeddingOptimizerSettings) {
  absl::StatusOr<JobConfig> config = ParseJobConfig(
      "cluster:\n  chief: [\"h:1\"]\n  ps: [\"h:2\"]\ntraining:\n  job_dir: /j\n"
      "  train_steps: 5\n  embedding_optimizer: ftrl\n  embedding_learning_rate: 0.1\n"
      "  embedding_l1: 0.5\n  embedding_l2: 1e-3\n  embedding_ttl_steps: 100000\n"
      "  embedding_min_count: 2\n",
      "c.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(ValidateJobConfig(*config).ok()) << ValidateJobConfig(*config);
  const TrainingSpec& t = config->training;
  EXPECT_EQ(t.embedding_optimizer, "ftrl");
  EXPECT_DOUBLE_EQ(t.embedding_learning_rate, 0.1);
  EXPECT_DOUBLE_EQ(t.embedding_l1, 0.5);
  EXPECT_DOUBLE_EQ(t.embedding_l2, 1e-3);
  EXPECT_EQ(t.embedding_ttl_steps, 100000);
  EXPECT_EQ(t.embedding_min_count, 2);

  // L1 and L2 are FTRL's alone.
  JobConfig other = *config;
  other.training.embedding_optimizer = "adagrad";
  ExpectInvalid(ValidateJobConfig(other),
                {"training.embedding_l1 = 0.5: embedding_l1 applies to embedding_optimizer: ftrl "
                 "only",
                 "training.embedding_optimizer is \"adagrad\"", "set embedding_l1 to 0"});
  other.training.embedding_l1 = 0;
  other.training.embedding_optimizer = "adam";
  ExpectInvalid(ValidateJobConfig(other),
                {"training.embedding_l2 = 0.001: embedding_l2 applies to embedding_optimizer: ftrl "
                 "only",
                 "\"adam\""});
  other.training.embedding_l2 = 0;
  EXPECT_TRUE(ValidateJobConfig(other).ok()) << ValidateJobConfig(other);

  // Values a YAML scalar cannot give (SetTrainingField refuses them) but code can.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  JobConfig bad = *config;
  bad.training.embedding_learning_rate = nan;
  ExpectInvalid(ValidateJobConfig(bad),
                {"training.embedding_learning_rate = nan must be positive and finite"});
  bad.training.embedding_learning_rate = inf;
  ExpectInvalid(ValidateJobConfig(bad), {"training.embedding_learning_rate = inf"});
  bad = *config;
  bad.training.embedding_l1 = nan;
  ExpectInvalid(ValidateJobConfig(bad), {"training.embedding_l1 = nan must be a finite number"});
  bad = *config;
  bad.training.embedding_l2 = inf;
  ExpectInvalid(ValidateJobConfig(bad), {"training.embedding_l2 = inf must be a finite number"});
}

TEST(ValidateJobConfigTest, NeedsATrainingReplica) {
  JobConfig config = GoodConfig();
  config.cluster.worker.clear();
  EXPECT_TRUE(ValidateJobConfig(config).ok()) << ValidateJobConfig(config);  // the chief trains
  config.training.chief_trains = false;
  ExpectInvalid(ValidateJobConfig(config), {"no training replicas", "training.chief_trains"});
}

TEST(ValidateJobConfigTest, SyncReplicaCounts) {
  JobConfig config = GoodConfig();  // 2 workers + training chief: T = 3
  config.training.update = UpdateMode::kSync;
  EXPECT_EQ(NumTrainingReplicas(config), 3);
  EXPECT_EQ(EffectiveReplicasToAggregate(config), 3);
  EXPECT_EQ(EffectiveTotalReplicas(config), 3);

  config.training.replicas_to_aggregate = 2;  // one backup replica
  EXPECT_TRUE(ValidateJobConfig(config).ok()) << ValidateJobConfig(config);
  EXPECT_EQ(EffectiveReplicasToAggregate(config), 2);
  config.training.total_replicas = 3;
  EXPECT_TRUE(ValidateJobConfig(config).ok()) << ValidateJobConfig(config);

  config.training.replicas_to_aggregate = 5;
  EXPECT_EQ(Message(ValidateJobConfig(config)),
            "training.replicas_to_aggregate = 5 is more than training.total_replicas = 3");
  config.training.total_replicas = 0;
  ExpectInvalid(ValidateJobConfig(config),
                {"training.replicas_to_aggregate = 5 is more than training.total_replicas = 3",
                 "0 means every training replica", "T = 3"});

  config.training.replicas_to_aggregate = -1;
  ExpectInvalid(ValidateJobConfig(config), {"training.replicas_to_aggregate = -1"});

  config.training.replicas_to_aggregate = 0;
  config.training.total_replicas = 4;
  ExpectInvalid(ValidateJobConfig(config),
                {"training.total_replicas = 4 must equal the number of training replicas", "T = 3",
                 "2 in cluster.worker + 1 chief", "training.chief_trains is true", "set it to 3"});
  config.training.total_replicas = 2;
  ExpectInvalid(ValidateJobConfig(config), {"training.total_replicas = 2"});

  config.training.chief_trains = false;  // T = 2 now
  EXPECT_TRUE(ValidateJobConfig(config).ok()) << ValidateJobConfig(config);
  config.training.total_replicas = 3;
  ExpectInvalid(ValidateJobConfig(config),
                {"training.total_replicas = 3", "T = 2", "training.chief_trains is false"});
  config.training.total_replicas = -1;
  ExpectInvalid(ValidateJobConfig(config), {"training.total_replicas = -1"});

  // Async ignores R and N.
  config.training.update = UpdateMode::kAsync;
  EXPECT_TRUE(ValidateJobConfig(config).ok()) << ValidateJobConfig(config);
}

TEST(ValidateTaskTest, TaskMustBeInTheCluster) {
  const ClusterSpec cluster = GoodConfig().cluster;
  EXPECT_TRUE(ValidateTask(cluster, {"chief", 0}).ok());
  EXPECT_TRUE(ValidateTask(cluster, {"master", 0}).ok());
  EXPECT_TRUE(ValidateTask(cluster, {"worker", 1}).ok());
  EXPECT_TRUE(ValidateTask(cluster, {"ps", 0}).ok());
  ExpectInvalid(
      ValidateTask(cluster, {"worker", 2}),
      {"task worker:2 is not in the cluster", "cluster.worker has 2 task(s)", "task_index 0..1"});
  ExpectInvalid(ValidateTask(cluster, {"ps", -1}), {"task ps:-1"});
  ExpectInvalid(ValidateTask(cluster, {"evaluator", 0}),
                {"\"evaluator\" is not a job name", "chief (or master), worker or ps"});
  ClusterSpec no_workers = cluster;
  no_workers.worker.clear();
  ExpectInvalid(ValidateTask(no_workers, {"worker", 0}), {"cluster.worker is empty"});
}

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

TEST(ValidateJobConfigTest, WireFormatIsFloat32OrBf16) {
  absl::StatusOr<JobConfig> config = ParseJobConfig(
      "cluster:\n  chief: [\"h:1\"]\n  ps: [\"h:2\"]\ntraining:\n  job_dir: /j\n"
      "  train_steps: 5\n  wire_format: bf16\n",
      "c.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(ValidateJobConfig(*config).ok()) << ValidateJobConfig(*config);
  ASSERT_TRUE(SetTrainingField(&config->training, "wire-format", "fp8").ok());
  ExpectInvalid(ValidateJobConfig(*config), {"training.wire_format = \"fp8\""});
}

TEST(ValidateJobConfigTest, SspCompressionAndTraceSettings) {
  absl::StatusOr<JobConfig> config = ParseJobConfig(
      "cluster:\n  chief: [\"h:1\"]\n  ps: [\"h:2\"]\ntraining:\n  job_dir: /j\n"
      "  train_steps: 5\n  update: ssp\n  staleness: 0\n  compression: topk\n"
      "  compression_ratio: 0.05\n  trace_steps: \"2:4\"\n",
      "c.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(ValidateJobConfig(*config).ok()) << ValidateJobConfig(*config);
  EXPECT_EQ(config->training.update, UpdateMode::kSsp);
  EXPECT_EQ(config->training.trace_steps, "2:4");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"staleness", "-1"},        {"compression", "gzip"}, {"compression_ratio", "0"},
      {"compression_ratio", "2"}, {"trace_steps", "4:2"},  {"trace_steps", "10"}};
  for (const auto& [key, value] : bad) {
    JobConfig copy = *config;
    ASSERT_TRUE(SetTrainingField(&copy.training, key, value).ok()) << key;
    ExpectInvalid(ValidateJobConfig(copy), {"training." + key});
  }
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
