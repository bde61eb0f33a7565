// TensorFlow's TF_CONFIG (tf_config.cc).
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
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

// Exactly what Kubeflow's training operator sets in a TFJob pod's
// "tensorflow" container (genTFConfigJSONStr: Go's json.Marshal of
// {Cluster, Task, Environment}, so compact, with the cluster's keys sorted
// and the index a JSON number).
std::string OperatorTfConfig(const std::string& type, int index,
                             const std::string& domain = ".default.svc") {
  return absl::StrCat(R"({"cluster":{"chief":["mnist-chief-0)", domain,
                      R"(:2222"],"ps":["mnist-ps-0)", domain, R"(:2222","mnist-ps-1)", domain,
                      R"(:2222"],"worker":["mnist-worker-0)", domain, R"(:2222","mnist-worker-1)",
                      domain, R"(:2222"]},"task":{"type":")", type, R"(","index":)", index,
                      R"(},"environment":"cloud"})");
}

TEST(TfConfigTest, EveryTaskOfATrainingOperatorTfJob) {
  for (const auto& [type, index] : std::vector<std::pair<std::string, int>>{
           {"chief", 0}, {"ps", 0}, {"ps", 1}, {"worker", 0}, {"worker", 1}}) {
    SCOPED_TRACE(absl::StrCat(type, ":", index));
    absl::StatusOr<TfConfig> config = ParseTfConfig(OperatorTfConfig(type, index));
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->task, (TaskSpec{type, index}));
    EXPECT_EQ(config->cluster.chief, std::vector<std::string>{"mnist-chief-0.default.svc:2222"});
    EXPECT_EQ(config->cluster.ps, (std::vector<std::string>{"mnist-ps-0.default.svc:2222",
                                                            "mnist-ps-1.default.svc:2222"}));
    EXPECT_EQ(config->cluster.worker,
              (std::vector<std::string>{"mnist-worker-0.default.svc:2222",
                                        "mnist-worker-1.default.svc:2222"}));
  }
  // CUSTOM_CLUSTER_DOMAIN on the operator appends the cluster's domain.
  absl::StatusOr<TfConfig> config =
      ParseTfConfig(OperatorTfConfig("worker", 1, ".team-a.svc.cluster.local"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->cluster.worker[1], "mnist-worker-1.team-a.svc.cluster.local:2222");
}

TEST(TfConfigTest, TrainingOperatorMasterPortsAndIndexTypes) {
  // A TFJob whose chief replica type is Master, on another tfjob-port.
  absl::StatusOr<TfConfig> config = ParseTfConfig(
      R"({"cluster":{"master":["j-master-0.ns.svc:2223"],"ps":["j-ps-0.ns.svc:2223"],)"
      R"("worker":["j-worker-0.ns.svc:2223"]},"task":{"type":"master","index":0},)"
      R"("environment":"cloud"})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task, (TaskSpec{"chief", 0}));
  EXPECT_EQ(config->cluster.chief, std::vector<std::string>{"j-master-0.ns.svc:2223"});
  EXPECT_EQ(config->cluster.worker, std::vector<std::string>{"j-worker-0.ns.svc:2223"});

  // The index as a JSON number or as a string (hand-written TF_CONFIGs).
  for (const char* index : {"1", "\"1\""}) {
    config = ParseTfConfig(
        absl::StrCat(R"({"cluster":{"chief":["c:1"],"ps":["p:1"],"worker":["w:1","w:2"]},)",
                     R"("task":{"type":"worker","index":)", index, "}}"));
    ASSERT_TRUE(config.ok()) << index << ": " << config.status();
    EXPECT_EQ(config->task, (TaskSpec{"worker", 1})) << index;
  }
  ExpectInvalid(
      ParseTfConfig(R"({"cluster":{"chief":["c:1"]},"task":{"type":"chief","index":0.5}})")
          .status(),
      {"TF_CONFIG: task.index: \"0.5\" is not an integer"});
}

TEST(TfConfigTest, TrainingOperatorEvaluatorAndDynamicWorkers) {
  // Evaluator replicas are listed in the cluster the operator writes; they
  // are not part of the training cluster.
  absl::StatusOr<TfConfig> config = ParseTfConfig(
      R"({"cluster":{"chief":["j-chief-0.ns.svc:2222"],"evaluator":["j-evaluator-0.ns.svc:2222"],)"
      R"("ps":["j-ps-0.ns.svc:2222"],"worker":["j-worker-0.ns.svc:2222"]},)"
      R"("task":{"type":"ps","index":0},"environment":"cloud"})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task, (TaskSpec{"ps", 0}));
  EXPECT_EQ(config->cluster.num_tasks("chief") + config->cluster.num_tasks("worker") +
                config->cluster.num_tasks("ps"),
            3);
  // The evaluator itself is told what to do instead.
  ExpectInvalid(ParseTfConfig(R"({"cluster":{"chief":["c:1"],"evaluator":["e:1"],"ps":["p:1"]},)"
                              R"("task":{"type":"evaluator","index":0},"environment":"cloud"})")
                    .status(),
                {"TF_CONFIG: task.type: \"evaluator\" is not a job name", "the chief evaluates",
                 "remove the TFJob's Evaluator replicas"});
  // enableDynamicWorker: a worker sees itself as {"index": address} and a ps
  // sees only itself; pstrain refuses, saying which TFJob setting to change.
  ExpectInvalid(ParseTfConfig(R"({"cluster":{"worker":{"1":"j-worker-1.ns.svc:2222"},)"
                              R"("ps":["j-ps-0.ns.svc:2222"]},"task":{"type":"worker","index":1}})")
                    .status(),
                {"TF_CONFIG: cluster.worker is an object of index: address", "enableDynamicWorker",
                 "set it to false"});
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

// JSON's object keys should be unique; one given twice is refused, not
// merged (yaml-cpp, which reads TF_CONFIG, keeps both).
TEST(TfConfigTest, AKeyGivenTwiceIsAnError) {
  ExpectInvalid(ParseTfConfig(R"({"cluster": {"chief": ["c:1"]}, "cluster": {"chief": ["c:2"]},)"
                              R"( "task": {"type": "chief"}})")
                    .status(),
                {"TF_CONFIG: cluster is given twice"});
  ExpectInvalid(ParseTfConfig(R"({"cluster": {"chief": ["c:1"], "evaluator": ["e:1"],)"
                              R"( "evaluator": ["e:2"]}, "task": {"type": "chief"}})")
                    .status(),
                {"TF_CONFIG: cluster.evaluator is given twice"});
  ExpectInvalid(ParseTfConfig(R"({"cluster": {"chief": ["c:1"], "ps": ["p:1"], "ps": ["p:2"]},)"
                              R"( "task": {"type": "chief", "type": "ps"}})")
                    .status(),
                {"TF_CONFIG: cluster.ps is given twice"});
  ExpectInvalid(ParseTfConfig(R"({"cluster": {"chief": ["c:1"]}, "task": {"type": "chief",)"
                              R"( "type": "ps"}})")
                    .status(),
                {"TF_CONFIG: task.type is given twice"});
}

}  // namespace
}  // namespace pstrain
