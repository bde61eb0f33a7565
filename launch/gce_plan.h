#ifndef PSTRAIN_LAUNCH_GCE_PLAN_H_
#define PSTRAIN_LAUNCH_GCE_PLAN_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "config/cluster_config.h"

namespace pstrain {

// A job on Compute Engine: the `gce:` section of a cluster YAML.
//
//   gce:
//     project: my-project          # required
//     zone: us-central1-a          # required
//     job: mnist-1                 # required: prefix of every resource's name
//     bucket: gs://my-bucket       # required: the package and the job dir
//     workers: 2                   # tasks per role (one chief)
//     ps: 1
//     machine_type: n1-standard-8  # or per role: {chief: ..., worker: ..., ps: ...}
//     preemptible: true            # or per role: {worker: true, ps: false, ...}
//     job_dir: gs://my-bucket/mnist-1  # default <bucket>/<job>
//     data_dir: gs://my-bucket/data    # default: training.data_dir
//     package: gs://my-bucket/pstrain_0.12.0_amd64.deb  # default
//     <bucket>/pstrain_<version>_amd64.deb image_family: debian-12      # image_project:
//     debian-cloud network: default tag: mnist-1                 # network tag of the job's VMs
//     (default: job) port: 2222                   # every task listens here
//   training: {...}                # as for pstrain-launch; job_dir/data_dir come from gce
//
// Every task is a VM of a managed instance group per role (one template per
// role), with a stable name: <job>-<role>-<i>, which is also its address
// inside the VPC (<job>-ps-0:2222), so no IP is typed by hand.
struct GceSpec {
  std::string project, zone, job, bucket;
  int workers = 1;
  int ps = 1;
  std::string machine_type[3] = {"n1-standard-4", "n1-standard-4", "n1-standard-4"};  // by role
  bool preemptible[3] = {false, false, false};
  std::string job_dir, data_dir, package;
  std::string image_family = "debian-12";
  std::string image_project = "debian-cloud";
  std::string network = "default";
  std::string tag;
  int port = 2222;
  // Where the VMs read their mutual TLS credentials (<job_dir>/credentials,
  // launch/gce_credentials.h), which pstrain-gce makes and uploads: set
  // unless the job is plaintext (training.insecure) or brings its own
  // (training.tls_dir on the image). Empty: none handed out.
  std::string credentials;
};

// Roles in GceSpec's per-role arrays.
enum GceRole { kGceChief = 0, kGceWorker = 1, kGcePs = 2 };
const char* GceRoleName(int role);

// A job's GCE plan: the spec, and the job config its VMs run (cluster made
// of the instance names, training section from the file, job_dir and
// data_dir from the spec).
struct GcePlan {
  GceSpec spec;
  JobConfig job;
};

// Parses a cluster YAML with a gce section; `source` names it in errors.
// training.token_file without training.tls_dir is refused (pstrain-gce hands
// out both, or the image holds both).
// InvalidArgument naming the key for a missing or bad value (job and tag
// must be lowercase names, the bucket a gs:// URL, counts >= 1 worker or
// chief-only...). The job config is validated like any other.
absl::StatusOr<GcePlan> ParseGcePlan(std::string_view yaml_text, std::string_view source);

// The gcloud command lines, each an argv (without "gcloud" itself).
//  up: a firewall rule for the job's tag (the task port between its VMs
//      only), per role an instance template (machine type, image, preemptible,
//      the scripts and settings as metadata, pstrain-credentials among them
//      when spec.credentials is set) and a managed instance group with one
//      named instance per task (its index as per-instance metadata).
//  down: every group, template and the rule `up` made.
// `scripts_dir` holds startup.sh and shutdown.sh; `config_file` the job
// config (cluster of instance names) given to every VM.
std::vector<std::vector<std::string>> GceUpCommands(const GcePlan& plan,
                                                    const std::string& scripts_dir,
                                                    const std::string& config_file);
std::vector<std::vector<std::string>> GceDownCommands(const GcePlan& plan);
// Listing the groups' instances, and reading the job's COMPLETED marker.
std::vector<std::vector<std::string>> GceStatusCommands(const GcePlan& plan);
// How to watch the job with TensorBoard: the SSH tunnel to the chief's VM.
std::string GceTensorBoardHelp(const GcePlan& plan);

}  // namespace pstrain

#endif  // PSTRAIN_LAUNCH_GCE_PLAN_H_
