#include <algorithm>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "config/config_yaml_util.h"
#include "config/training_fields.h"

// Cloud ML Engine's job form (trainingInput): a loopback cluster of the
// asked-for task counts, jobDir and args.

namespace pstrain {
namespace config_internal {
namespace {

// Applies trainingInput.args: "--key=value", "--key value", or "--flag" for
// a bool field.
absl::Status ApplyArgs(const Source& source, const YAML::Node& args, TrainingSpec* training,
                       std::set<std::string>* set_keys) {
  if (args.IsNull()) return absl::OkStatus();
  if (!args.IsSequence()) {
    return ErrorAt(source, args,
                   "trainingInput.args must be a list of flags, e.g. [\"--train_steps=3000\"]");
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string where = absl::StrCat("trainingInput.args[", i, "]");
    PSTRAIN_ASSIGN_OR_RETURN(std::string arg, ScalarOf(source, args[i], where));
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      return ErrorAt(source, args[i],
                     absl::StrCat(where, " = ", Quoted(arg), " is not a flag (--name=value)"));
    }
    std::string key = arg.substr(2);
    std::string value;
    const size_t equals = key.find('=');
    const Field* field = FindField(key.substr(0, equals));
    if (field == nullptr) {
      return ErrorAt(
          source, args[i],
          absl::StrCat(where, ": ", UnknownTrainingKey(key.substr(0, equals)).message()));
    }
    if (equals != std::string::npos) {
      value = key.substr(equals + 1);
      key.resize(equals);
    } else if (i + 1 < args.size() && args[i + 1].IsScalar() &&
               args[i + 1].Scalar().rfind("--", 0) != 0) {
      value = args[++i].Scalar();
    } else if (IsBoolField(*field)) {
      value = "true";
    } else {
      return ErrorAt(source, args[i], absl::StrCat(where, ": ", arg, " has no value"));
    }
    if (!set_keys->insert(field->name).second) {
      return ErrorAt(source, args[i],
                     absl::StrCat(where, ": training.", field->name, " is set twice"));
    }
    absl::Status status = SetTrainingField(training, key, value);
    if (!status.ok()) {
      return ErrorAt(source, args[i], absl::StrCat(where, ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

// Parses a non-negative task count of trainingInput.
absl::StatusOr<int> ParseCount(const Source& source, const YAML::Node& node,
                               std::string_view path) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string text, ScalarOf(source, node, path));
  int count = 0;
  if (!absl::SimpleAtoi(text, &count) || count < 0 || count > 65535) {
    return ErrorAt(source, node,
                   absl::StrCat(Sv(path), ": ", Quoted(text), " is not a task count (0 or more)"));
  }
  return count;
}

// The entries of a trainingInput map that pstrain reads.
struct TrainingInputEntries {
  std::string scale_tier = "BASIC";  // Cloud ML Engine's default
  // std::optional, not YAML::Node assignment: assigning to a bound YAML::Node
  // rewrites the node it refers to.
  std::optional<YAML::Node> scale_tier_node, worker_count, ps_count, job_dir, args;
};

absl::StatusOr<TrainingInputEntries> ReadTrainingInputEntries(const Source& source,
                                                              const YAML::Node& node) {
  static const std::vector<std::string>* const kKeys =
      new std::vector<std::string>{"scaleTier",
                                   "workerCount",
                                   "parameterServerCount",
                                   "jobDir",
                                   "args",
                                   "masterType",
                                   "workerType",
                                   "parameterServerType",
                                   "masterConfig",
                                   "workerConfig",
                                   "parameterServerConfig",
                                   "region",
                                   "runtimeVersion",
                                   "pythonVersion",
                                   "pythonModule",
                                   "packageUris"};
  TrainingInputEntries entries;
  PSTRAIN_RETURN_IF_ERROR(ForEachEntry(
      source, node, "trainingInput",
      [&](const std::string& key, const YAML::Node& key_node,
          const YAML::Node& value) -> absl::Status {
        if (std::find(kKeys->begin(), kKeys->end(), key) == kKeys->end()) {
          return ErrorAt(source, key_node, UnknownKeyMessage("trainingInput.", key, *kKeys));
        }
        if (key == "scaleTier") {
          PSTRAIN_ASSIGN_OR_RETURN(entries.scale_tier,
                                   ScalarOf(source, value, "trainingInput.scaleTier"));
          entries.scale_tier_node.emplace(value);
        } else if (key == "workerCount") {
          entries.worker_count.emplace(value);
        } else if (key == "parameterServerCount") {
          entries.ps_count.emplace(value);
        } else if (key == "jobDir") {
          entries.job_dir.emplace(value);
        } else if (key == "args") {
          entries.args.emplace(value);
        }
        return absl::OkStatus();
      }));
  return entries;
}

// The worker and ps counts the scale tier asks for.
absl::Status TaskCounts(const Source& source, const YAML::Node& node, const TrainingInputEntries& e,
                        int* workers, int* ps) {
  *workers = 0;
  *ps = 0;
  if (e.scale_tier == "CUSTOM") {
    if (e.worker_count) {
      PSTRAIN_ASSIGN_OR_RETURN(*workers,
                               ParseCount(source, *e.worker_count, "trainingInput.workerCount"));
    }
    if (e.ps_count) {
      PSTRAIN_ASSIGN_OR_RETURN(
          *ps, ParseCount(source, *e.ps_count, "trainingInput.parameterServerCount"));
    }
    return absl::OkStatus();
  }
  if (e.worker_count || e.ps_count) {
    return ErrorAt(source, e.worker_count ? *e.worker_count : *e.ps_count,
                   absl::StrCat("trainingInput.workerCount and parameterServerCount need "
                                "scaleTier: CUSTOM (",
                                e.scale_tier, " sets its own task counts)"));
  }
  if (e.scale_tier == "BASIC") return absl::OkStatus();
  if (TierTaskCounts(e.scale_tier, static_cast<int>(std::thread::hardware_concurrency()), workers,
                     ps)) {
    return absl::OkStatus();
  }
  return ErrorAt(source, e.scale_tier_node.value_or(node),
                 absl::StrCat("trainingInput.scaleTier: ", Quoted(e.scale_tier),
                              " is not supported (pstrain trains on CPUs); use BASIC, STANDARD_1, "
                              "PREMIUM_1, or CUSTOM with workerCount and parameterServerCount"));
}

}  // namespace

bool TierTaskCounts(const std::string& tier, int cores, int* workers, int* ps) {
  struct Tier {
    const char* name;
    int workers;
    int ps;
  };
  // Cloud ML Engine's CPU tiers (besides a master).
  constexpr Tier kTiers[] = {{"STANDARD_1", 4, 3}, {"PREMIUM_1", 19, 11}};
  for (const Tier& t : kTiers) {
    if (tier != t.name) continue;
    // Every task runs on this machine: no more workers than cores beside the
    // chief's, no more ps than half the cores, at least one of each.
    const int c = std::max(cores, 1);
    *workers = std::clamp(c - 1, 1, t.workers);
    *ps = std::clamp(c / 2, 1, t.ps);
    return true;
  }
  return false;
}

// The Cloud ML Engine form: builds a loopback cluster from trainingInput.
absl::Status ParseTrainingInput(const Source& source, const YAML::Node& node, int base_port,
                                JobConfig* config, std::set<std::string>* set_keys) {
  PSTRAIN_ASSIGN_OR_RETURN(TrainingInputEntries entries, ReadTrainingInputEntries(source, node));
  int workers = 0, ps = 0;
  PSTRAIN_RETURN_IF_ERROR(TaskCounts(source, node, entries, &workers, &ps));
  const int tasks = 1 + workers + ps;
  if (base_port < 1 || base_port > 65535 - (tasks - 1)) {
    return ErrorAt(
        source, node,
        absl::StrCat("trainingInput: ", tasks, " tasks need ports ", base_port, "..",
                     base_port + tasks - 1, ", outside 1..65535; choose another base port"));
  }
  int port = base_port;
  auto next_address = [&port] { return absl::StrCat("127.0.0.1:", port++); };
  config->cluster = ClusterSpec();
  config->cluster.chief.push_back(next_address());
  for (int i = 0; i < workers; ++i) config->cluster.worker.push_back(next_address());
  for (int i = 0; i < ps; ++i) config->cluster.ps.push_back(next_address());

  if (entries.job_dir) {
    PSTRAIN_ASSIGN_OR_RETURN(std::string dir,
                             ScalarOf(source, *entries.job_dir, "trainingInput.jobDir"));
    if (!set_keys->insert("job_dir").second) {
      return ErrorAt(source, *entries.job_dir,
                     "trainingInput.jobDir: training.job_dir is set twice (give one of them)");
    }
    config->training.job_dir = dir;
  }
  if (entries.args) {
    PSTRAIN_RETURN_IF_ERROR(ApplyArgs(source, *entries.args, &config->training, set_keys));
  }
  return absl::OkStatus();
}

}  // namespace config_internal
}  // namespace pstrain
