#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "config/cluster_config.h"
#include "config/config_yaml_util.h"

// TensorFlow's TF_CONFIG JSON (read with the YAML parser: JSON is YAML), in
// every form Kubeflow's training operator writes for a TFJob (see
// genTFConfigJSONStr in its pkg/controller.v1/tensorflow/tensorflow.go):
// "environment": "cloud", "master" for the chief, addresses
// "<job>-<type>-<i>.<namespace>.svc[.<domain>]:<port>", an "evaluator" list
// when the TFJob has Evaluator replicas (not part of the training cluster,
// as in TensorFlow), and a clear refusal of its enableDynamicWorker form.

namespace pstrain {
namespace config_internal {
namespace {

// The training cluster of TF_CONFIG's "cluster" object `node`: the operator
// lists Evaluator replicas under "evaluator", which TensorFlow keeps out of
// the training cluster; pstrain does too (its chief evaluates). A job given
// as an object of "index": "address" is enableDynamicWorker's sparse form,
// which names only this task's peers: pstrain needs every task.
absl::StatusOr<YAML::Node> TrainingClusterNode(const Source& source, const YAML::Node& node) {
  bool has_evaluator = false;
  // ForEachEntry refuses a key given twice here, before the evaluator is
  // removed (yaml-cpp's remove takes only the first of two).
  PSTRAIN_RETURN_IF_ERROR(ForEachEntry(
      source, node, "cluster",
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> absl::Status {
        if (key == "evaluator") {
          has_evaluator = true;
        } else if (value.IsMap()) {
          return ErrorAt(
              source, value,
              absl::StrCat("cluster.", key,
                           " is an object of index: address, the training operator's "
                           "enableDynamicWorker form, which gives a task only part of the "
                           "cluster; pstrain needs every task's address (its layout depends on "
                           "the ps count): remove enableDynamicWorker from the TFJob, or set it "
                           "to false"));
        }
        return absl::OkStatus();
      }));
  if (!has_evaluator) return node;
  YAML::Node training = YAML::Clone(node);
  training.remove("evaluator");
  return training;
}

absl::StatusOr<TfConfig> ParseTfConfigImpl(std::string_view json) {
  const Source source{"TF_CONFIG", /*show_lines=*/false};
  if (absl::StripAsciiWhitespace(Sv(json)).empty()) {
    return absl::InvalidArgumentError("TF_CONFIG: is empty");
  }
  PSTRAIN_ASSIGN_OR_RETURN(YAML::Node root, LoadYaml(json, source.name, "JSON"));
  static const std::vector<std::string>* const kKeys =
      new std::vector<std::string>{"cluster", "task", "environment", "job", "rpc_layer"};
  TfConfig config;
  bool has_cluster = false;
  std::optional<YAML::Node> task;
  PSTRAIN_RETURN_IF_ERROR(ForEachEntry(
      source, root, "",
      [&](const std::string& key, const YAML::Node& key_node,
          const YAML::Node& value) -> absl::Status {
        if (key == "cluster") {
          has_cluster = true;
          if (!value.IsMap()) return ErrorAt(source, value, "cluster must be an object");
          PSTRAIN_ASSIGN_OR_RETURN(YAML::Node training, TrainingClusterNode(source, value));
          return ParseCluster(source, training, "cluster", &config.cluster);
        }
        if (key == "task") {
          task.emplace(value);
          return absl::OkStatus();
        }
        if (key == "environment" || key == "job" || key == "rpc_layer") {
          return absl::OkStatus();
        }
        return ErrorAt(source, key_node, UnknownKeyMessage("", key, *kKeys));
      }));
  if (!has_cluster) return absl::InvalidArgumentError("TF_CONFIG: no \"cluster\"");
  if (!task) {
    return absl::InvalidArgumentError(
        "TF_CONFIG: no \"task\"; add e.g. \"task\": {\"type\": \"worker\", \"index\": 0}");
  }
  if (!task->IsMap()) return ErrorAt(source, *task, "task must be an object");
  static const std::vector<std::string>* const kTaskKeys =
      new std::vector<std::string>{"type", "index", "trial", "cloud"};
  bool has_type = false;
  PSTRAIN_RETURN_IF_ERROR(ForEachEntry(
      source, *task, "task",
      [&](const std::string& key, const YAML::Node& key_node,
          const YAML::Node& value) -> absl::Status {
        if (key == "type") {
          has_type = true;
          PSTRAIN_ASSIGN_OR_RETURN(std::string type, ScalarOf(source, value, "task.type"));
          if (type == "evaluator") {
            return ErrorAt(
                source, value,
                "task.type: \"evaluator\" is not a job name: pstrain has no evaluator task "
                "(the chief evaluates on the test set every training.eval_steps); remove the "
                "TFJob's Evaluator replicas");
          }
          absl::StatusOr<std::string> job = CanonicalJobName(type);
          if (!job.ok()) {
            return ErrorAt(source, value, absl::StrCat("task.type: ", job.status().message()));
          }
          config.task.job_name = *job;
        } else if (key == "index") {
          PSTRAIN_ASSIGN_OR_RETURN(std::string index, ScalarOf(source, value, "task.index"));
          if (!absl::SimpleAtoi(index, &config.task.task_index)) {
            return ErrorAt(source, value,
                           absl::StrCat("task.index: ", Quoted(index), " is not an integer"));
          }
        } else if (key != "trial" && key != "cloud") {
          return ErrorAt(source, key_node, UnknownKeyMessage("task.", key, *kTaskKeys));
        }
        return absl::OkStatus();
      }));
  if (!has_type) return absl::InvalidArgumentError("TF_CONFIG: task has no \"type\"");
  absl::Status task_status = ValidateTask(config.cluster, config.task);
  if (!task_status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG: ", task_status.message()));
  }
  return config;
}

}  // namespace
}  // namespace config_internal

absl::StatusOr<TfConfig> ParseTfConfig(std::string_view json) {
  return config_internal::CatchYamlExceptions<TfConfig>(
      "TF_CONFIG", [&] { return config_internal::ParseTfConfigImpl(json); });
}

}  // namespace pstrain
