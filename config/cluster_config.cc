#include "config/cluster_config.h"

#include <optional>
#include <set>

#include "absl/strings/str_split.h"
#include "config/config_yaml_util.h"
#include "config/model_spec.h"
#include "config/training_fields.h"

// The cluster YAML form (TensorFlow's ClusterSpec plus a training section);
// trainingInput is in ml_engine_config.cc.

namespace pstrain {
namespace config_internal {

// Parses a cluster map {chief|master, worker, ps: [addresses]} at `path`.
absl::Status ParseCluster(const Source& source, const YAML::Node& node, std::string_view path,
                          ClusterSpec* cluster) {
  static const std::vector<std::string>* const kJobs =
      new std::vector<std::string>{"chief", "master", "worker", "ps"};
  std::set<std::string> seen;
  return ForEachEntry(
      source, node, path,
      [&](const std::string& key, const YAML::Node& key_node,
          const YAML::Node& value) -> absl::Status {
        const std::string key_path = ChildPath(path, key);
        absl::StatusOr<std::string> job = CanonicalJobName(key);
        if (!job.ok()) {
          return ErrorAt(source, key_node,
                         UnknownKeyMessage(absl::StrCat(Sv(path), "."), key, *kJobs));
        }
        if (!seen.insert(*job).second) {
          return ErrorAt(
              source, key_node,
              absl::StrCat(key_path, ": the ", *job, " job is given twice",
                           *job == "chief" ? " (master is another name for chief)" : ""));
        }
        std::vector<std::string>* addresses = *job == "chief"    ? &cluster->chief
                                              : *job == "worker" ? &cluster->worker
                                                                 : &cluster->ps;
        addresses->clear();
        if (value.IsNull()) return absl::OkStatus();
        if (!value.IsSequence()) {
          return ErrorAt(
              source, value,
              absl::StrCat(key_path, " must be a list of \"host:port\" addresses, e.g. [\"",
                           "127.0.0.1:2222\"]"));
        }
        for (size_t i = 0; i < value.size(); ++i) {
          if (!value[i].IsScalar()) {
            return ErrorAt(source, value[i],
                           absl::StrCat(key_path, "[", i, "] must be a \"host:port\" address"));
          }
          addresses->push_back(value[i].Scalar());
        }
        return absl::OkStatus();
      });
}

// The text of the model spec map `node` as it stands in source.text, with
// the lines before it left blank, so that a message about the spec names
// the line of the job's file; the node emitted as YAML when the text is not
// known or the map is not a block map.
std::string NestedMapText(const Source& source, const YAML::Node& node) {
  // The first key's position: the map's own is before an anchor or a tag.
  const YAML::Mark mark = node.size() > 0 ? node.begin()->first.Mark() : node.Mark();
  const std::vector<absl::string_view> lines = absl::StrSplit(Sv(source.text), '\n');
  if (source.text.empty() || mark.is_null() || node.Style() == YAML::EmitterStyle::Flow ||
      mark.line >= static_cast<int>(lines.size()) ||
      mark.column >= static_cast<int>(lines[mark.line].size())) {
    YAML::Emitter out;
    out << node;
    return absl::StrCat(std::string(mark.is_null() ? 0 : mark.line, '\n'), out.c_str(), "\n");
  }
  // A block map: its first line from the key on, then every line indented
  // as far (blank lines and comments too), up to the first one that is not.
  std::string text(mark.line, '\n');
  absl::StrAppend(&text, std::string(mark.column, ' '), lines[mark.line].substr(mark.column), "\n");
  for (size_t i = mark.line + 1; i < lines.size(); ++i) {
    const absl::string_view line = lines[i];
    const size_t first = line.find_first_not_of(" \t\r");
    if (first != absl::string_view::npos && line[first] != '#' &&
        first < static_cast<size_t>(mark.column)) {
      break;
    }
    absl::StrAppend(&text, line, "\n");
  }
  return text;
}

// A model spec given in the job's YAML (`model:` at the top or in training):
// read and checked now, kept as a value, and `model` set to its name.
absl::Status SetInlineModelSpec(const Source& source, const YAML::Node& node,
                                TrainingSpec* training) {
  PSTRAIN_ASSIGN_OR_RETURN(JobModelSpec spec,
                           ParseJobModelSpec(NestedMapText(source, node), source.name));
  if (spec.spec.name.empty()) spec.spec.name = "model";
  training->model = spec.spec.name;
  training->model_spec = std::move(spec);
  return absl::OkStatus();
}

// Sets training fields from a YAML map, recording each in `set_keys` (a
// field given twice, e.g. as train_steps and train-steps, is an error).
absl::Status ParseTraining(const Source& source, const YAML::Node& node, TrainingSpec* training,
                           std::set<std::string>* set_keys) {
  return ForEachEntry(
      source, node, "training",
      [&](const std::string& key, const YAML::Node& key_node,
          const YAML::Node& value) -> absl::Status {
        const Field* field = FindField(key);
        if (field == nullptr) {
          return ErrorAt(source, key_node, UnknownTrainingKey(key).message());
        }
        if (!set_keys->insert(field->name).second) {
          return ErrorAt(source, key_node, absl::StrCat("training.", field->name, " is set twice"));
        }
        if (value.IsMap() && std::string_view(field->name) == "model") {
          return SetInlineModelSpec(source, value, training);
        }
        PSTRAIN_ASSIGN_OR_RETURN(std::string text,
                                 ScalarOf(source, value, absl::StrCat("training.", key)));
        absl::Status status = SetTrainingField(training, key, text);
        if (!status.ok()) return ErrorAt(source, value, status.message());
        return absl::OkStatus();
      });
}

// Applies trainingInput.args: "--key=value", "--key value", or "--flag" for

namespace {

absl::StatusOr<JobConfig> ParseJobConfigImpl(std::string_view yaml_text, const Source& source,
                                             int base_port) {
  PSTRAIN_ASSIGN_OR_RETURN(YAML::Node root, LoadYaml(yaml_text, source.name, "YAML"));
  if (root.IsNull()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source.name, ": is empty; it needs a cluster or trainingInput section"));
  }
  static const std::vector<std::string>* const kKeys =
      new std::vector<std::string>{"cluster", "training", "trainingInput", "gce", "model"};
  std::optional<YAML::Node> cluster, training, training_input, gce, model;
  PSTRAIN_RETURN_IF_ERROR(
      ForEachEntry(source, root, "",
                   [&](const std::string& key, const YAML::Node& key_node,
                       const YAML::Node& value) -> absl::Status {
                     // gce: the Compute Engine section, pstrain-gce's (launch/gce_plan.h).
                     std::optional<YAML::Node>* section = key == "cluster"         ? &cluster
                                                          : key == "training"      ? &training
                                                          : key == "trainingInput" ? &training_input
                                                          : key == "gce"           ? &gce
                                                          : key == "model"         ? &model
                                                                                   : nullptr;
                     if (section == nullptr) {
                       return ErrorAt(source, key_node, UnknownKeyMessage("", key, *kKeys));
                     }
                     section->emplace(value);
                     return absl::OkStatus();
                   }));
  if (cluster.has_value() == training_input.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source.name,
        cluster ? ": give either cluster or trainingInput, not both"
        : gce   ? ": no cluster section: a config with a gce section runs on Compute Engine "
                  "with pstrain-gce up"
                : ": no cluster section (or Cloud ML Engine trainingInput section)"));
  }
  JobConfig config;
  std::set<std::string> set_keys;
  if (training) {
    PSTRAIN_RETURN_IF_ERROR(ParseTraining(source, *training, &config.training, &set_keys));
  }
  if (cluster) {
    PSTRAIN_RETURN_IF_ERROR(ParseCluster(source, *cluster, "cluster", &config.cluster));
  } else {
    PSTRAIN_RETURN_IF_ERROR(
        ParseTrainingInput(source, *training_input, base_port, &config, &set_keys));
  }
  // The model section: a spec, or the name or file training.model takes.
  if (model) {
    if (set_keys.count("model") != 0) {
      return ErrorAt(source, *model,
                     "the model is given twice, as the model section and as training.model "
                     "(or --model in trainingInput.args); keep one");
    }
    if (model->IsMap()) {
      PSTRAIN_RETURN_IF_ERROR(SetInlineModelSpec(source, *model, &config.training));
    } else {
      PSTRAIN_ASSIGN_OR_RETURN(std::string name, ScalarOf(source, *model, "model"));
      absl::Status status = SetTrainingField(&config.training, "model", name);
      if (!status.ok()) return ErrorAt(source, *model, status.message());
    }
  }
  return config;
}

}  // namespace
}  // namespace config_internal

using config_internal::CatchYamlExceptions;
using config_internal::Source;

absl::StatusOr<JobModelSpec> ParseJobModelSpec(std::string_view yaml, std::string_view source) {
  PSTRAIN_ASSIGN_OR_RETURN(ModelSpec spec, ParseModelSpec(yaml, source));
  return JobModelSpec{std::move(spec), std::string(source)};
}

absl::StatusOr<JobConfig> ParseJobConfig(std::string_view yaml_text, std::string_view source,
                                         int base_port) {
  const Source src{std::string(source), /*show_lines=*/true, yaml_text};
  return CatchYamlExceptions<JobConfig>(
      source, [&] { return config_internal::ParseJobConfigImpl(yaml_text, src, base_port); });
}

absl::StatusOr<JobConfig> LoadJobConfig(Env* env, const std::string& path, int base_port) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
  return ParseJobConfig(text, path, base_port);
}
}  // namespace pstrain
