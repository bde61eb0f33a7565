#include <string_view>

#include "absl/strings/str_cat.h"
#include "config/cluster_config.h"
#include "config/training_fields.h"
#include "yaml-cpp/yaml.h"

namespace pstrain {
namespace {

// The spec text (ModelSpecToYaml's) as a node to write inside the job's YAML.
YAML::Node ModelSpecNode(const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception&) {
    // Not one of ModelSpecToYaml's texts (only a caller's bug makes one):
    // written as a string, which reading back refuses as no model.
    return YAML::Node(text);
  }
}

}  // namespace

std::string JobConfigToYaml(const JobConfig& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "cluster" << YAML::Value << YAML::BeginMap;
  for (const char* job : {"chief", "worker", "ps"}) {
    const std::vector<std::string>& tasks = *job == 'c'   ? config.cluster.chief
                                            : *job == 'w' ? config.cluster.worker
                                                          : config.cluster.ps;
    out << YAML::Key << job << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& address : tasks) out << YAML::DoubleQuoted << address;
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  // A spec is written as the model section (it holds the model's name).
  const bool spec = config.training.model_spec.has_value();
  if (spec) {
    out << YAML::Key << "model" << YAML::Value
        << ModelSpecNode(ModelSpecToYaml(config.training.model_spec->spec));
  }
  out << YAML::Key << "training" << YAML::Value << YAML::BeginMap;
  for (const config_internal::Field& field : config_internal::TrainingFields()) {
    if (spec && std::string_view(field.name) == "model") continue;
    const std::string value = config_internal::FormatField(config.training, field);
    out << YAML::Key << field.name << YAML::Value;
    // Strings are quoted so "true", "123" or "" read back as strings.
    if (config_internal::IsStringField(field)) out << YAML::DoubleQuoted;
    out << value;
  }
  out << YAML::EndMap;
  out << YAML::EndMap;
  return absl::StrCat(out.c_str(), "\n");
}

}  // namespace pstrain
