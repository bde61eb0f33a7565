#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "config/cluster_config.h"
#include "config/config_yaml_util.h"

// TensorFlow's TF_CONFIG JSON (read with the YAML parser: JSON is YAML).

namespace pstrain {
namespace config_internal {
namespace {

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
  PSTRAIN_RETURN_IF_ERROR(
      ForEachEntry(source, root, "",
                   [&](const std::string& key, const YAML::Node& key_node,
                       const YAML::Node& value) -> absl::Status {
                     if (key == "cluster") {
                       if (has_cluster) return ErrorAt(source, key_node, "cluster is given twice");
                       has_cluster = true;
                       if (!value.IsMap())
                         return ErrorAt(source, value, "cluster must be an object");
                       return ParseCluster(source, value, "cluster", &config.cluster);
                     }
                     if (key == "task") {
                       if (task) return ErrorAt(source, key_node, "task is given twice");
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
