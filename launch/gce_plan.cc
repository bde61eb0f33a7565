#include "launch/gce_plan.h"

#include <optional>
#include <regex>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "config/config_yaml_util.h"

namespace pstrain {
namespace {

using config_internal::ErrorAt;
using config_internal::ForEachEntry;
using config_internal::ScalarOf;
using config_internal::Source;
using config_internal::UnknownKeyMessage;

const char* const kRoles[] = {"chief", "worker", "ps"};

bool IsName(const std::string& s) {
  static const std::regex kName("[a-z]([-a-z0-9]{0,40}[a-z0-9])?");
  return std::regex_match(s, kName);
}

absl::Status ParseInt(const Source& source, const YAML::Node& node, const std::string& path, int lo,
                      int hi, int* out) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string text, ScalarOf(source, node, path));
  if (!absl::SimpleAtoi(text, out) || *out < lo || *out > hi) {
    return ErrorAt(source, node,
                   absl::StrCat(path, ": \"", text, "\" is not a number in ", lo, "..", hi));
  }
  return absl::OkStatus();
}

absl::Status ParseBool(const Source& source, const YAML::Node& node, const std::string& path,
                       bool* out) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string text, ScalarOf(source, node, path));
  if (text == "true") {
    *out = true;
  } else if (text == "false") {
    *out = false;
  } else {
    return ErrorAt(source, node, absl::StrCat(path, ": \"", text, "\" is not true or false"));
  }
  return absl::OkStatus();
}

// A value for every role, or a map {chief, worker, ps} of values.
template <typename T, typename ParseOne>
absl::Status ParsePerRole(const Source& source, const YAML::Node& node, const std::string& path,
                          T (&out)[3], ParseOne parse_one) {
  if (!node.IsMap()) {
    T value{};
    PSTRAIN_RETURN_IF_ERROR(parse_one(node, path, &value));
    for (T& o : out) o = value;
    return absl::OkStatus();
  }
  static const std::vector<std::string> kKeys = {"chief", "worker", "ps"};
  return ForEachEntry(source, node, path,
                      [&](const std::string& key, const YAML::Node& key_node,
                          const YAML::Node& value) -> absl::Status {
                        for (int r = 0; r < 3; ++r) {
                          if (key == kRoles[r]) {
                            return parse_one(value, absl::StrCat(path, ".", key), &out[r]);
                          }
                        }
                        return ErrorAt(source, key_node, UnknownKeyMessage(path + ".", key, kKeys));
                      });
}

absl::Status ParseSpecEntry(const Source& source, const std::string& key,
                            const YAML::Node& key_node, const YAML::Node& value, GceSpec* spec) {
  const std::string path = "gce." + key;
  std::string* text = key == "project"         ? &spec->project
                      : key == "zone"          ? &spec->zone
                      : key == "job"           ? &spec->job
                      : key == "bucket"        ? &spec->bucket
                      : key == "job_dir"       ? &spec->job_dir
                      : key == "data_dir"      ? &spec->data_dir
                      : key == "package"       ? &spec->package
                      : key == "image_family"  ? &spec->image_family
                      : key == "image_project" ? &spec->image_project
                      : key == "network"       ? &spec->network
                      : key == "tag"           ? &spec->tag
                                               : nullptr;
  if (text != nullptr) {
    PSTRAIN_ASSIGN_OR_RETURN(*text, ScalarOf(source, value, path));
    return absl::OkStatus();
  }
  if (key == "workers") return ParseInt(source, value, path, 0, 1000, &spec->workers);
  if (key == "ps") return ParseInt(source, value, path, 1, 1000, &spec->ps);
  if (key == "port") return ParseInt(source, value, path, 1, 65535, &spec->port);
  if (key == "machine_type") {
    return ParsePerRole(source, value, path, spec->machine_type,
                        [&](const YAML::Node& n, const std::string& p, std::string* out) {
                          absl::StatusOr<std::string> s = ScalarOf(source, n, p);
                          if (s.ok()) *out = *s;
                          return s.status();
                        });
  }
  if (key == "preemptible") {
    return ParsePerRole(source, value, path, spec->preemptible,
                        [&](const YAML::Node& n, const std::string& p, bool* out) {
                          return ParseBool(source, n, p, out);
                        });
  }
  static const std::vector<std::string> kKeys = {
      "project", "zone",         "job",           "bucket",       "workers",     "ps",
      "job_dir", "data_dir",     "package",       "machine_type", "preemptible", "network",
      "tag",     "image_family", "image_project", "port"};
  return ErrorAt(source, key_node, UnknownKeyMessage("gce.", key, kKeys));
}

absl::Status CheckSpec(const Source& source, GceSpec* spec) {
  auto bad = [&](const std::string& message) {
    return absl::InvalidArgumentError(absl::StrCat(source.name, ": ", message));
  };
  for (const auto& [value, key] : {std::pair{&spec->project, "project"},
                                   {&spec->zone, "zone"},
                                   {&spec->job, "job"},
                                   {&spec->bucket, "bucket"}}) {
    if (value->empty()) return bad(absl::StrCat("gce.", key, " is required"));
  }
  if (!IsName(spec->job)) {
    return bad(absl::StrCat("gce.job = \"", spec->job,
                            "\": use a lowercase name (letters, digits, '-'), e.g. mnist-1"));
  }
  if (spec->bucket.rfind("gs://", 0) != 0 || spec->bucket.size() <= 5) {
    return bad(absl::StrCat("gce.bucket = \"", spec->bucket, "\" is not gs://bucket"));
  }
  while (spec->bucket.back() == '/') spec->bucket.pop_back();
  if (spec->tag.empty()) spec->tag = spec->job;
  if (!IsName(spec->tag)) return bad(absl::StrCat("gce.tag = \"", spec->tag, "\" is not a name"));
  if (spec->job_dir.empty()) spec->job_dir = absl::StrCat(spec->bucket, "/", spec->job);
  if (spec->job_dir.rfind("gs://", 0) != 0) {
    return bad(absl::StrCat("gce.job_dir = \"", spec->job_dir,
                            "\": VMs share the job dir through a bucket; use gs://..."));
  }
  if (spec->package.empty()) {
    spec->package = absl::StrCat(spec->bucket, "/pstrain_", kVersion, "_amd64.deb");
  }
  return absl::OkStatus();
}

std::string InstanceName(const GceSpec& spec, int role, int index) {
  return absl::StrCat(spec.job, "-", kRoles[role], "-", index);
}

int Count(const GceSpec& spec, int role) {
  return role == kGceChief ? 1 : role == kGceWorker ? spec.workers : spec.ps;
}

absl::StatusOr<GcePlan> ParseGcePlanImpl(std::string_view yaml_text, const Source& source) {
  PSTRAIN_ASSIGN_OR_RETURN(YAML::Node root,
                           config_internal::LoadYaml(yaml_text, source.name, "YAML"));
  GcePlan plan;
  std::optional<YAML::Node> gce, training;
  PSTRAIN_RETURN_IF_ERROR(ForEachEntry(
      source, root, "",
      [&](const std::string& key, const YAML::Node& key_node,
          const YAML::Node& value) -> absl::Status {
        if (key == "gce") {
          gce.emplace(value);
        } else if (key == "training") {
          training.emplace(value);
        } else if (key == "cluster" || key == "trainingInput") {
          return ErrorAt(source, key_node,
                         absl::StrCat(key,
                                      ": pstrain-gce makes the cluster of instance names "
                                      "from gce.workers and gce.ps; remove this section"));
        } else {
          return ErrorAt(source, key_node, UnknownKeyMessage("", key, {"gce", "training"}));
        }
        return absl::OkStatus();
      }));
  if (!gce) return absl::InvalidArgumentError(absl::StrCat(source.name, ": no gce section"));
  PSTRAIN_RETURN_IF_ERROR(ForEachEntry(
      source, *gce, "gce",
      [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& value) {
        return ParseSpecEntry(source, key, key_node, value, &plan.spec);
      }));
  PSTRAIN_RETURN_IF_ERROR(CheckSpec(source, &plan.spec));
  std::set<std::string> keys;
  if (training) {
    PSTRAIN_RETURN_IF_ERROR(
        config_internal::ParseTraining(source, *training, &plan.job.training, &keys));
  }
  if (keys.count("job_dir") > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(source.name, ": training.job_dir: give gce.job_dir (a gs:// path) instead"));
  }
  plan.job.training.job_dir = plan.spec.job_dir;
  if (!plan.spec.data_dir.empty()) plan.job.training.data_dir = plan.spec.data_dir;
  const TrainingSpec& t = plan.job.training;
  if (!t.token_file.empty() && t.tls_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source.name,
        ": training.token_file without training.tls_dir: pstrain-gce makes the job's "
        "certificates and token and hands each VM its own (drop token_file), or give both "
        "(credentials already on the VMs' image)"));
  }
  if (!t.insecure && t.tls_dir.empty()) {
    plan.spec.credentials = absl::StrCat(plan.spec.job_dir, "/credentials");
  }
  for (int role = 0; role < 3; ++role) {
    std::vector<std::string>* tasks = role == kGceChief    ? &plan.job.cluster.chief
                                      : role == kGceWorker ? &plan.job.cluster.worker
                                                           : &plan.job.cluster.ps;
    for (int i = 0; i < Count(plan.spec, role); ++i) {
      tasks->push_back(absl::StrCat(InstanceName(plan.spec, role, i), ":", plan.spec.port));
    }
  }
  absl::Status valid = ValidateJobConfig(plan.job);
  if (!valid.ok())
    return absl::InvalidArgumentError(absl::StrCat(source.name, ": ", valid.message()));
  return plan;
}

}  // namespace

const char* GceRoleName(int role) { return kRoles[role]; }

absl::StatusOr<GcePlan> ParseGcePlan(std::string_view yaml_text, std::string_view source) {
  const Source src{std::string(source), /*show_lines=*/true};
  return config_internal::CatchYamlExceptions<GcePlan>(
      source, [&] { return ParseGcePlanImpl(yaml_text, src); });
}

std::vector<std::vector<std::string>> GceUpCommands(const GcePlan& plan,
                                                    const std::string& scripts_dir,
                                                    const std::string& config_file) {
  const GceSpec& s = plan.spec;
  const std::string project = "--project=" + s.project;
  const std::string zone = "--zone=" + s.zone;
  std::vector<std::vector<std::string>> commands;
  // Tasks talk to each other on the port; nobody else can.
  commands.push_back({"compute", "firewall-rules", "create", s.job + "-pstrain", project,
                      "--network=" + s.network, absl::StrCat("--allow=tcp:", s.port),
                      "--source-tags=" + s.tag, "--target-tags=" + s.tag,
                      "--description=pstrain job " + s.job + ": task traffic"});
  for (int role = 0; role < 3; ++role) {
    if (Count(s, role) == 0) continue;
    const std::string name = absl::StrCat(s.job, "-", kRoles[role]);
    std::vector<std::string> tmpl = {
        "compute",
        "instance-templates",
        "create",
        name,
        project,
        "--machine-type=" + s.machine_type[role],
        "--image-family=" + s.image_family,
        "--image-project=" + s.image_project,
        "--network=" + s.network,
        "--tags=" + s.tag,
        "--scopes=cloud-platform",
        absl::StrCat("--metadata-from-file=startup-script=", scripts_dir,
                     "/startup.sh,shutdown-script=", scripts_dir,
                     "/shutdown.sh,pstrain-cluster-config=", config_file),
        absl::StrCat("--metadata=pstrain-role=", kRoles[role], ",pstrain-job-dir=", s.job_dir,
                     ",pstrain-train-steps=", plan.job.training.train_steps,
                     ",pstrain-package=", s.package, ",pstrain-group=", name,
                     s.data_dir.empty() ? "" : ",pstrain-data-dir=" + s.data_dir,
                     s.credentials.empty() ? "" : ",pstrain-credentials=" + s.credentials)};
    if (s.preemptible[role]) tmpl.push_back("--preemptible");
    commands.push_back(tmpl);
    commands.push_back({"compute", "instance-groups", "managed", "create", name, project, zone,
                        "--template=" + name, "--size=0"});
    for (int i = 0; i < Count(s, role); ++i) {
      commands.push_back({"compute", "instance-groups", "managed", "create-instance", name, project,
                          zone, "--instance=" + InstanceName(s, role, i),
                          absl::StrCat("--stateful-metadata=pstrain-task-index=", i)});
    }
  }
  return commands;
}

std::vector<std::vector<std::string>> GceDownCommands(const GcePlan& plan) {
  const GceSpec& s = plan.spec;
  std::vector<std::vector<std::string>> commands;
  for (int role = 0; role < 3; ++role) {
    commands.push_back({"compute", "instance-groups", "managed", "delete",
                        absl::StrCat(s.job, "-", kRoles[role]), "--project=" + s.project,
                        "--zone=" + s.zone, "--quiet"});
  }
  for (int role = 0; role < 3; ++role) {
    commands.push_back({"compute", "instance-templates", "delete",
                        absl::StrCat(s.job, "-", kRoles[role]), "--project=" + s.project,
                        "--quiet"});
  }
  commands.push_back({"compute", "firewall-rules", "delete", s.job + "-pstrain",
                      "--project=" + s.project, "--quiet"});
  return commands;
}

std::vector<std::vector<std::string>> GceStatusCommands(const GcePlan& plan) {
  const GceSpec& s = plan.spec;
  std::vector<std::vector<std::string>> commands;
  for (int role = 0; role < 3; ++role) {
    commands.push_back({"compute", "instance-groups", "managed", "list-instances",
                        absl::StrCat(s.job, "-", kRoles[role]), "--project=" + s.project,
                        "--zone=" + s.zone});
  }
  commands.push_back({"storage", "cat", s.job_dir + "/COMPLETED", "--project=" + s.project});
  return commands;
}

std::string GceTensorBoardHelp(const GcePlan& plan) {
  const GceSpec& s = plan.spec;
  return absl::StrCat(
      "# TensorBoard reads the job dir where it is: on your machine\n", "tensorboard --logdir ",
      s.job_dir, "\n",
      "# or on the chief's VM (pip install tensorboard there), through an SSH tunnel:\n",
      "gcloud compute ssh ", InstanceName(s, kGceChief, 0), " --project=", s.project,
      " --zone=", s.zone, " -- -NL 6006:localhost:6006\n", "#   (on the VM: tensorboard --logdir ",
      s.job_dir, " --port 6006)\n", "# then open http://localhost:6006\n");
}

}  // namespace pstrain
