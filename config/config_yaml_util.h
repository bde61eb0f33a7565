#ifndef PSTRAIN_CONFIG_CONFIG_YAML_UTIL_H_
#define PSTRAIN_CONFIG_CONFIG_YAML_UTIL_H_

// Internal to config/'s YAML readers (the cluster YAML, Cloud ML Engine's
// trainingInput, TF_CONFIG, the training fields and their validation, the
// model spec): YAML helpers that turn yaml-cpp's nodes and exceptions into
// absl::Status with the source and line, and key suggestions. For config/,
// launch/gce_plan.cc and data/formats/csv_schema.cc (the CSV schema's YAML form)
// only.
//
// yaml-cpp reports parse errors by throwing YAML::Exception. Every parsing
// entry point of these readers (and of launch/gce_plan.cc, which reads the
// gce section with these helpers, and of data/formats/csv_schema.cc) runs its body
// inside CatchYamlExceptions, which turns them into absl::Status.
// (YAML::Emitter, used by JobConfigToYaml, does not throw.) Nothing is
// thrown out of config/.

#include <exception>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "config/cluster_config.h"
#include "yaml-cpp/yaml.h"

namespace pstrain {
namespace config_internal {

// Debian's abseil has its own string_view type; absl functions get this.
inline absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// The value as it appears in a message: quoted, control characters escaped.
std::string Quoted(std::string_view value);

// "unknown key <prefix><key>" plus " (did you mean X?)" for the closest of
// `known` within edit distance 2.
std::string UnknownKeyMessage(std::string_view path_prefix, std::string_view key,
                              const std::vector<std::string>& known);

// Where a YAML document comes from, for messages.
struct Source {
  std::string name;  // begins every message
  bool show_lines;   // append ", line N" for nodes with a position
  // The document's text when known, so that a document nested in it (an
  // inline model spec) is read with the lines it has there.
  std::string_view text = {};
};

absl::Status ErrorAt(const Source& source, const YAML::Node& node, absl::string_view message);

// Runs `body`, turning a yaml-cpp exception into InvalidArgument and any
// other exception (which would be a bug here or in yaml-cpp) into Internal.
template <typename T, typename Body>
absl::StatusOr<T> CatchYamlExceptions(std::string_view source, Body body) {
  try {
    return body();
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(source), ": ", e.msg, " at line ", e.mark.line + 1));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(Sv(source), ": ", e.what()));
  }
}

absl::StatusOr<YAML::Node> LoadYaml(std::string_view text, std::string_view source,
                                    std::string_view syntax);

// The scalar text of `node`; "" for null (a key with no value).
absl::StatusOr<std::string> ScalarOf(const Source& source, const YAML::Node& node,
                                     std::string_view path);

std::string ChildPath(std::string_view path, std::string_view key);

// The error for `key` of the map at `path` given a second time at `again`
// (YAML's keys are unique; yaml-cpp keeps both entries).
absl::Status KeyGivenTwice(const Source& source, std::string_view path, std::string_view key,
                           const YAML::Mark& first, const YAML::Node& again);

// Calls visit(key, key_node, value_node) for each entry of map `node` at
// `path` ("" for the top level), refusing a key given twice. A null node is
// an empty map.
template <typename Visit>
absl::Status ForEachEntry(const Source& source, const YAML::Node& node, std::string_view path,
                          Visit visit) {
  if (node.IsNull()) return absl::OkStatus();
  if (!node.IsMap()) {
    return ErrorAt(source, node,
                   path.empty() ? std::string("the top level must be a map of keys to values")
                                : absl::StrCat(Sv(path), " must be a map of keys to values"));
  }
  std::map<std::string, YAML::Mark> seen;
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) {
      return ErrorAt(
          source, entry.first,
          absl::StrCat("a key", path.empty() ? "" : " in ", Sv(path), " is not a plain name"));
    }
    const auto [first, inserted] = seen.emplace(entry.first.Scalar(), entry.first.Mark());
    if (!inserted) {
      return KeyGivenTwice(source, path, entry.first.Scalar(), first->second, entry.first);
    }
    PSTRAIN_RETURN_IF_ERROR(visit(entry.first.Scalar(), entry.first, entry.second));
  }
  return absl::OkStatus();
}

// Parses a cluster map {chief|master, worker, ps: [addresses]} at `path`.
absl::Status ParseCluster(const Source& source, const YAML::Node& node, std::string_view path,
                          ClusterSpec* cluster);

// Sets training fields from a YAML map, recording each in `set_keys` (a
// field given twice, e.g. as train_steps and train-steps, is an error).
absl::Status ParseTraining(const Source& source, const YAML::Node& node, TrainingSpec* training,
                           std::set<std::string>* set_keys);

// The Cloud ML Engine form: builds a loopback cluster from trainingInput
// (ml_engine_config.cc).
//
// Scale tiers: BASIC is a single chief; CUSTOM takes workerCount and
// parameterServerCount; STANDARD_1 (on Cloud ML Engine 4 workers and 3 ps)
// and PREMIUM_1 (19 workers, 11 ps) keep that shape scaled to this machine,
// since every task of a trainingInput job runs here (TierTaskCounts).
absl::Status ParseTrainingInput(const Source& source, const YAML::Node& node, int base_port,
                                JobConfig* config, std::set<std::string>* set_keys);

// The worker and ps counts of Cloud ML Engine's CPU tier `tier` on a machine
// of `cores` cores: the tier's counts, capped at cores - 1 workers and
// cores / 2 ps, at least one of each. False for any other tier.
bool TierTaskCounts(const std::string& tier, int cores, int* workers, int* ps);

}  // namespace config_internal
}  // namespace pstrain

#endif  // PSTRAIN_CONFIG_CONFIG_YAML_UTIL_H_
