// ValidateJobConfig and ValidateTask (config_validation.cc): what a parsed
// job config may hold, and the messages that say what is wrong.
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "config/cluster_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/config_test_util.h"

namespace pstrain {
namespace {

using config_test::ExpectInvalid;
using config_test::GoodConfig;
using config_test::Message;

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
      {"failover_secs", "0", "training.failover_secs = 0 must be positive"},
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

TEST(ValidateJobConfigTest, PsReplicationIsOneToTheNumberOfPs) {
  JobConfig config = GoodConfig();
  const int num_ps = static_cast<int>(config.cluster.ps.size());
  config.training.ps_replication = num_ps;
  EXPECT_TRUE(ValidateJobConfig(config).ok()) << ValidateJobConfig(config);
  config.training.ps_replication = num_ps + 1;
  ExpectInvalid(ValidateJobConfig(config), {absl::StrCat("training.ps_replication = ", num_ps + 1,
                                                         " must be in [1, ", num_ps, "]"),
                                            "each on its own ps task"});
  config.training.ps_replication = 0;
  ExpectInvalid(ValidateJobConfig(config), {"training.ps_replication = 0 must be in [1, "});
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

}  // namespace
}  // namespace pstrain
