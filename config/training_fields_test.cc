// The training fields: SetTrainingField, GetTrainingField, their names
// (training_fields.cc).
#include <algorithm>
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/config_test_util.h"

namespace pstrain {
namespace {

using config_test::ExpectInvalid;
using config_test::Message;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------
// SetTrainingField / GetTrainingField.

TEST(SetTrainingFieldTest, EveryType) {
  TrainingSpec t;
  ASSERT_TRUE(SetTrainingField(&t, "batch_size", "64").ok());  // int
  EXPECT_EQ(t.batch_size, 64);
  ASSERT_TRUE(SetTrainingField(&t, "train_steps", "5000000000").ok());  // int64
  EXPECT_EQ(t.train_steps, 5000000000);
  ASSERT_TRUE(SetTrainingField(&t, "seed", "42").ok());  // uint64
  EXPECT_EQ(t.seed, 42u);
  ASSERT_TRUE(SetTrainingField(&t, "learning_rate", "1e-2").ok());  // double
  EXPECT_DOUBLE_EQ(t.learning_rate, 0.01);
  ASSERT_TRUE(SetTrainingField(&t, "sync_timeout", "5").ok());
  EXPECT_DOUBLE_EQ(t.sync_timeout, 5);
  ASSERT_TRUE(SetTrainingField(&t, "nesterov", "true").ok());  // bool
  EXPECT_TRUE(t.nesterov);
  ASSERT_TRUE(SetTrainingField(&t, "nesterov", "false").ok());
  EXPECT_FALSE(t.nesterov);
  ASSERT_TRUE(SetTrainingField(&t, "chief_trains", "False").ok());
  EXPECT_FALSE(t.chief_trains);
  ASSERT_TRUE(SetTrainingField(&t, "chief_trains", "1").ok());
  EXPECT_TRUE(t.chief_trains);
  ASSERT_TRUE(SetTrainingField(&t, "optimizer", "sgd").ok());  // string
  EXPECT_EQ(t.optimizer, "sgd");
  ASSERT_TRUE(SetTrainingField(&t, "learning_rate_schedule", "").ok());
  EXPECT_EQ(t.learning_rate_schedule, "");
  ASSERT_TRUE(SetTrainingField(&t, "update", "sync").ok());  // update mode
  EXPECT_EQ(t.update, UpdateMode::kSync);
  ASSERT_TRUE(SetTrainingField(&t, "update", "async").ok());
  EXPECT_EQ(t.update, UpdateMode::kAsync);
  ASSERT_TRUE(SetTrainingField(&t, "job-dir", "/j").ok());  // hyphen spelling
  EXPECT_EQ(t.job_dir, "/j");
  ASSERT_TRUE(SetTrainingField(&t, "eval-batch-size", "7").ok());
  EXPECT_EQ(t.eval_batch_size, 7);
}

TEST(SetTrainingFieldTest, BadValuesNameTheKeyAndLeaveTheSpecAlone) {
  struct Case {
    std::string key;
    std::string value;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"batch_size", "abc", "training.batch_size: \"abc\" is not an integer"},
      {"batch_size", "1.5", "training.batch_size: \"1.5\" is not an integer"},
      {"batch_size", "", "training.batch_size: \"\" is not an integer"},
      {"batch_size", "99999999999", "training.batch_size: \"99999999999\" is not an integer"},
      {"train-steps", "1e3", "training.train_steps: \"1e3\" is not an integer"},
      {"seed", "-1", "training.seed: \"-1\" is not a non-negative integer"},
      {"learning_rate", "fast", "training.learning_rate: \"fast\" is not a finite number"},
      {"learning_rate", "inf", "training.learning_rate: \"inf\" is not a finite number"},
      {"momentum", "nan", "training.momentum: \"nan\" is not a finite number"},
      {"nesterov", "maybe", "training.nesterov: \"maybe\" is not true or false"},
      {"update", "bsp", "training.update: \"bsp\" is not an update mode (async, sync or ssp)"},
      {"update", "SYNC", "training.update: \"SYNC\" is not an update mode"},
      {"threads", "two", "training.threads: \"two\" is not an integer"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key + "=" + c.value);
    TrainingSpec t;
    ExpectInvalid(SetTrainingField(&t, c.key, c.value), {c.message});
    EXPECT_EQ(t, TrainingSpec());
  }
}

TEST(SetTrainingFieldTest, UnknownKeySuggestsTheClosest) {
  TrainingSpec t;
  EXPECT_EQ(Message(SetTrainingField(&t, "learning_rat", "1")),
            "unknown key training.learning_rat (did you mean learning_rate?)");
  ExpectInvalid(SetTrainingField(&t, "batchsize", "1"),
                {"unknown key training.batchsize (did you mean batch_size?)"});
  ExpectInvalid(SetTrainingField(&t, "train-step", "1"),
                {"unknown key training.train-step (did you mean train_steps?)"});
  ExpectInvalid(SetTrainingField(&t, "Seed", "1"), {"(did you mean seed?)"});
  absl::Status far = SetTrainingField(&t, "beta1", "0.9");
  ExpectInvalid(far, {"unknown key training.beta1"});
  EXPECT_THAT(Message(far), Not(HasSubstr("did you mean")));
}

TEST(GetTrainingFieldTest, ReadsBackWhatWasSet) {
  TrainingSpec t;
  for (const std::string& name : TrainingFieldNames()) {
    absl::StatusOr<std::string> value = GetTrainingField(t, name);
    ASSERT_TRUE(value.ok()) << name;
    TrainingSpec copy;
    copy.job_dir = "changed";  // a string field that differs from the default
    ASSERT_TRUE(SetTrainingField(&copy, name, *value).ok()) << name << "=" << *value;
    EXPECT_EQ(*GetTrainingField(copy, name), *value) << name;
  }
  EXPECT_EQ(*GetTrainingField(t, "learning_rate"), "0.001");
  EXPECT_EQ(*GetTrainingField(t, "update"), "async");
  EXPECT_EQ(*GetTrainingField(t, "chief-trains"), "true");
  EXPECT_EQ(*GetTrainingField(t, "sync_timeout"), "30");
  ExpectInvalid(GetTrainingField(t, "nope").status(), {"unknown key training.nope"});
}

TEST(TrainingFieldNamesTest, AllFieldsInOrder) {
  const std::vector<std::string> names = TrainingFieldNames();
  ASSERT_EQ(names.size(), 72u);
  EXPECT_EQ(names.front(), "model");
  EXPECT_EQ(names.back(), "insecure");
  // The streamed input's fields follow data_dir.
  const auto data = std::find(names.begin(), names.end(), "data_dir");
  ASSERT_LT(data + 13, names.end());
  EXPECT_EQ(std::vector<std::string>(data + 1, data + 14),
            (std::vector<std::string>{
                "train_files", "eval_files", "input_compression", "shuffle_buffer", "shuffle_files",
                "cycle_length", "num_epochs", "csv_schema", "max_bad_records", "follow",
                "poll_secs", "progressive_validation", "progressive_window"}));
  // The exports' fields, together.
  const auto exports = std::find(names.begin(), names.end(), "exports_to_keep");
  ASSERT_LT(exports + 3, names.end());
  EXPECT_EQ(std::vector<std::string>(exports + 1, exports + 4),
            (std::vector<std::string>{"export_steps", "export_secs", "full_export_every"}));
  // The replicated ps' follow the ps watchdog.
  const auto watchdog = std::find(names.begin(), names.end(), "watchdog_secs");
  ASSERT_LT(watchdog + 2, names.end());
  EXPECT_EQ(std::vector<std::string>(watchdog + 1, watchdog + 3),
            (std::vector<std::string>{"ps_replication", "failover_secs"}));
  // TensorBoard's: summaries, then the projector's rows.
  const auto summaries = std::find(names.begin(), names.end(), "save_summary_steps");
  ASSERT_LT(summaries + 2, names.end());
  EXPECT_EQ(std::vector<std::string>(summaries + 1, summaries + 3),
            (std::vector<std::string>{"histogram_steps", "projector_rows"}));
  // The embedding tables' fields follow the dense optimizer's, together.
  const auto at = std::find(names.begin(), names.end(), "weight_decay_exclusions");
  ASSERT_NE(at, names.end());
  EXPECT_EQ(
      std::vector<std::string>(at + 1, at + 7),
      (std::vector<std::string>{"embedding_optimizer", "embedding_learning_rate", "embedding_l1",
                                "embedding_l2", "embedding_ttl_steps", "embedding_min_count"}));
}

TEST(TrainingFieldTest, EmbeddingFields) {
  TrainingSpec t;
  EXPECT_EQ(t.embedding_optimizer, "adagrad");
  EXPECT_DOUBLE_EQ(t.embedding_learning_rate, 0.05);
  EXPECT_EQ(t.embedding_l1, 0.0);
  EXPECT_EQ(t.embedding_l2, 0.0);
  EXPECT_EQ(t.embedding_ttl_steps, 0);
  EXPECT_EQ(t.embedding_min_count, 0);
  ASSERT_TRUE(SetTrainingField(&t, "embedding-optimizer", "ftrl").ok());
  EXPECT_EQ(t.embedding_optimizer, "ftrl");
  ASSERT_TRUE(SetTrainingField(&t, "embedding_learning_rate", "0.1").ok());
  EXPECT_DOUBLE_EQ(t.embedding_learning_rate, 0.1);
  ASSERT_TRUE(SetTrainingField(&t, "embedding_l1", "1e-3").ok());
  EXPECT_DOUBLE_EQ(t.embedding_l1, 1e-3);
  ASSERT_TRUE(SetTrainingField(&t, "embedding-l2", "0.5").ok());
  EXPECT_DOUBLE_EQ(t.embedding_l2, 0.5);
  ASSERT_TRUE(SetTrainingField(&t, "embedding_ttl_steps", "10000000000").ok());
  EXPECT_EQ(t.embedding_ttl_steps, 10000000000);
  ASSERT_TRUE(SetTrainingField(&t, "embedding-min-count", "3").ok());
  EXPECT_EQ(t.embedding_min_count, 3);
  ExpectInvalid(SetTrainingField(&t, "embedding_learning_rate", "nan"),
                {"training.embedding_learning_rate: \"nan\" is not a finite number"});
  ExpectInvalid(SetTrainingField(&t, "embedding_ttl_steps", "1.5"),
                {"training.embedding_ttl_steps: \"1.5\" is not an integer"});
  ExpectInvalid(SetTrainingField(&t, "embeding_l1", "0"), {"(did you mean embedding_l1?)"});
}

TEST(TrainingFieldTest, CheckpointKeysAndTensorFlowSpellings) {
  TrainingSpec t;
  EXPECT_EQ(t.checkpoint_steps, 1000);
  EXPECT_EQ(t.keep_checkpoint_max, 5);
  ASSERT_TRUE(SetTrainingField(&t, "checkpoint-num-steps", "250").ok());
  EXPECT_EQ(t.checkpoint_steps, 250);
  ASSERT_TRUE(SetTrainingField(&t, "save_checkpoints_steps", "300").ok());
  EXPECT_EQ(t.checkpoint_steps, 300);
  ASSERT_TRUE(SetTrainingField(&t, "save_checkpoints_secs", "60").ok());
  EXPECT_DOUBLE_EQ(t.checkpoint_secs, 60);
  ASSERT_TRUE(SetTrainingField(&t, "keep_checkpoint_max", "2").ok());
  EXPECT_EQ(t.keep_checkpoint_max, 2);
  JobConfig config;
  config.cluster.chief = {"h:1"};
  config.cluster.ps = {"h:2"};
  config.training.job_dir = "/j";
  config.training.train_steps = 5;
  config.training.checkpoint_steps = -1;
  ExpectInvalid(ValidateJobConfig(config), {"training.checkpoint_steps = -1"});
  config.training.checkpoint_steps = 0;
  config.training.shutdown_grace_secs = 0;
  ExpectInvalid(ValidateJobConfig(config), {"training.shutdown_grace_secs = 0"});
}

}  // namespace
}  // namespace pstrain
