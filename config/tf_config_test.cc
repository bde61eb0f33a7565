// TensorFlow's TF_CONFIG (tf_config.cc).
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "config/config_test_util.h"
#include "config/config_yaml_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using config_test::ExpectInvalid;
using config_test::GoodConfig;
using config_test::Message;
using ::testing::HasSubstr;
using ::testing::Not;

// ---------------------------------------------------------------------------
// TF_CONFIG.

TEST(TfConfigTest, Parses) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(R"({
    "cluster": {"chief": ["c:1"], "worker": ["w:1", "w:2"], "ps": ["p:1"]},
    "task": {"type": "worker", "index": 1},
    "environment": "cloud"})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->cluster.chief, std::vector<std::string>{"c:1"});
  EXPECT_EQ(config->cluster.worker, (std::vector<std::string>{"w:1", "w:2"}));
  EXPECT_EQ(config->cluster.ps, std::vector<std::string>{"p:1"});
  EXPECT_EQ(config->task, (TaskSpec{"worker", 1}));
}

TEST(TfConfigTest, MasterAndCloudMlEngineExtras) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(
      R"({"cluster": {"master": ["m:1"], "ps": ["p:1"]},
          "task": {"type": "master", "index": 0, "trial": "", "cloud": "abc"},
          "job": {"scale_tier": "CUSTOM"}, "environment": "cloud"})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->cluster.chief, std::vector<std::string>{"m:1"});
  EXPECT_EQ(config->task, (TaskSpec{"chief", 0}));

  config = ParseTfConfig(R"({"cluster": {"chief": ["c:1"]}, "task": {"type": "chief"}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task.task_index, 0);
}

TEST(TfConfigTest, Errors) {
  ExpectInvalid(ParseTfConfig("").status(), {"TF_CONFIG: is empty"});
  ExpectInvalid(ParseTfConfig(R"({"cluster": {"chief": ["c:1"]}})").status(),
                {"TF_CONFIG: no \"task\""});
  ExpectInvalid(ParseTfConfig(R"({"task": {"type": "chief"}})").status(),
                {"TF_CONFIG: no \"cluster\""});
  ExpectInvalid(
      ParseTfConfig(R"({"cluster": {"chief": ["c:1"]}, "task": {"type": "evaluator"}})").status(),
      {"TF_CONFIG: task.type: \"evaluator\" is not a job name"});
  ExpectInvalid(ParseTfConfig(R"({"cluster": {"chief": ["c:1"]}, "task": {"index": 0}})").status(),
                {"TF_CONFIG: task has no \"type\""});
  ExpectInvalid(ParseTfConfig(R"({"cluster": {"chief": ["c:1"], "worker": ["w:1"]},
                                  "task": {"type": "worker", "index": 1}})")
                    .status(),
                {"TF_CONFIG: task worker:1 is not in the cluster", "task_index 0..0"});
  ExpectInvalid(
      ParseTfConfig(R"({"cluster": {"chief": ["c:1"]}, "task": {"type": "chief", "index": "x"}})")
          .status(),
      {"TF_CONFIG: task.index: \"x\" is not an integer"});
  ExpectInvalid(
      ParseTfConfig(R"({"cluster": {"chef": ["c:1"]}, "task": {"type": "chief"}})").status(),
      {"TF_CONFIG: unknown key cluster.chef (did you mean chief?)"});
  ExpectInvalid(ParseTfConfig(R"({"clusters": {}, "task": {"type": "chief"}})").status(),
                {"TF_CONFIG: unknown key clusters (did you mean cluster?)"});
  ExpectInvalid(ParseTfConfig(R"({"cluster": {"chief": ["c:1"]}, "task": "chief"})").status(),
                {"TF_CONFIG: task must be an object"});
  ExpectInvalid(ParseTfConfig(R"({"cluster": {"chief": ["c:1"]}, "task": {)").status(),
                {"TF_CONFIG: JSON syntax error"});
  ExpectInvalid(ParseTfConfig("[1, 2]").status(), {"TF_CONFIG: "});
  // No line numbers in TF_CONFIG messages: it is usually one line.
  EXPECT_THAT(Message(ParseTfConfig(R"({"cluster": {"x": []}, "task": {}})").status()),
              Not(HasSubstr("line")));
}

}  // namespace
}  // namespace pstrain
