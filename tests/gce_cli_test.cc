// `pstrain-gce up` and `down` with the real gcloud CLI (Debian package
// google-cloud-cli) against our fake Compute Engine API
// (api_endpoint_overrides/compute): what gcloud actually sends for each
// command pstrain-gce runs, checked field by field. Where gcloud is not
// installed the test says so and checks the commands with a recorded stub
// instead.
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "tests/fakes/fake_compute.h"
#include "tests/fakes/fake_gcs.h"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using nlohmann::json;
using testing_util::FakeCompute;
using testing_util::FakeGcs;
using testing_util::ProcessResult;
using testing_util::ReadAll;
using testing_util::RunProcess;

const std::string kSourceDir = PSTRAIN_SOURCE_DIR;
const std::string kGce = std::string(PSTRAIN_BIN_DIR) + "/pstrain-gce";

bool GcloudInstalled() {
  return RunProcess({"/bin/sh", "-c", "command -v gcloud"}, 10).exit_code == 0;
}

// The metadata item `key` of an instance template, or "".
std::string MetadataItem(const json& tmpl, const std::string& key) {
  for (const json& item : tmpl["properties"]["metadata"]["items"]) {
    if (item["key"] == key) return item["value"].get<std::string>();
  }
  return "";
}

class GceCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing_util::MakeTempDir("gce_cli");
    const std::string example = *Env::Default()->ReadFile(kSourceDir + "/deploy/gce/job.yaml");
    config_ = JoinPath(dir_, "job.yaml");
    ASSERT_TRUE(Env::Default()
                    ->WriteFileAtomic(config_, absl::StrReplaceAll(example, {{"PROJECT", "proj-1"},
                                                                             {"BUCKET", "bkt"}}))
                    .ok());
    // The job's credentials go to the bucket: Cloud Storage is our fake.
    ASSERT_GT(gcs_.Start(), 0);
    gcs_.CreateBucket("bkt");
    credentials_dir_ = JoinPath(dir_, "credentials");
  }
  // The test's dir goes with it, pass or fail (PSTRAIN_KEEP_TEST_DIRS=1 keeps it).
  void TearDown() override {
    const char* keep = std::getenv("PSTRAIN_KEEP_TEST_DIRS");
    if (dir_.empty() || (keep != nullptr && std::string(keep) == "1")) return;
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // The environment and flags every pstrain-gce run here gets: Cloud Storage
  // is the fake, the credentials go to a directory of the test's.
  std::vector<std::string> GceCommand(const std::vector<std::string>& env,
                                      const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"/usr/bin/env", "STORAGE_EMULATOR_HOST=" + gcs_.endpoint()};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.push_back(kGce);
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--credentials_dir=" + credentials_dir_);
    argv.push_back("--scripts_dir=" + kSourceDir + "/deploy/gce");
    return argv;
  }

  // The job's uploaded credentials: every task's pair, the CA certificate
  // and the token; never the CA key.
  void ExpectTheCredentialsUploaded() {
    std::set<std::string> expected;
    for (const char* f : {"ca.crt", "job.token", "chief-0.crt", "chief-0.key", "worker-0.crt",
                          "worker-0.key", "worker-1.crt", "worker-1.key", "ps-0.crt", "ps-0.key"}) {
      expected.insert(std::string("fashion-mnist-1/credentials/") + f);
    }
    EXPECT_EQ(gcs_.ObjectNames("bkt"), expected);
    EXPECT_EQ(gcs_.GetObject("bkt", "fashion-mnist-1/credentials/ps-0.key"),
              ReadAll(JoinPath(credentials_dir_, "ps-0.key")));
    EXPECT_TRUE(Env::Default()->FileExists(JoinPath(credentials_dir_, "ca.key")));
  }

  // pstrain-gce VERB with gcloud pointed at `compute` and a config dir of
  // its own; no credentials (the fake needs none).
  ProcessResult Gce(const std::string& verb, const FakeCompute& compute) {
    return RunProcess(GceCommand({"CLOUDSDK_CONFIG=" + JoinPath(dir_, "gcloud"),
                                  "CLOUDSDK_AUTH_DISABLE_CREDENTIALS=true",
                                  "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE=" + compute.endpoint(),
                                  "CLOUDSDK_CORE_DISABLE_PROMPTS=1",
                                  "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK=true",
                                  "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING=true"},
                                 {verb, "--config=" + config_}),
                      300);
  }

  std::string dir_, config_, credentials_dir_;
  FakeGcs gcs_;
};

TEST_F(GceCliTest, UpMakesTheJobWithGcloudAndDownDeletesIt) {
  if (!GcloudInstalled()) {
    GTEST_SKIP() << "\n*** SKIPPED: the gcloud CLI is not installed (Debian package "
                    "google-cloud-cli); GceCliTest.TheCommandsWithARecordedStub checks the "
                    "commands pstrain-gce runs instead ***";
  }
  std::cerr << "checking pstrain-gce with the real gcloud: "
            << RunProcess({"/bin/sh", "-c", "gcloud --version | head -1"}, 60).output;
  FakeCompute compute;
  ASSERT_GT(compute.Start(), 0);
  ProcessResult up = Gce("up", compute);
  ASSERT_EQ(up.exit_code, 0) << up.output;
  const std::string global = "projects/proj-1/global/";
  const std::string zone = "projects/proj-1/zones/us-central1-a/";

  // A firewall rule: the task port, between the job's VMs only.
  const json rule = compute.Get(global + "firewalls/fashion-mnist-1-pstrain");
  ASSERT_TRUE(rule.is_object()) << up.output;
  EXPECT_EQ(rule["allowed"], json::parse(R"([{"IPProtocol": "tcp", "ports": ["2222"]}])"));
  EXPECT_EQ(rule["sourceTags"], json::parse(R"(["fashion-mnist-1"])"));
  EXPECT_EQ(rule["targetTags"], json::parse(R"(["fashion-mnist-1"])"));
  EXPECT_TRUE(absl::EndsWith(rule["network"].get<std::string>(), "/global/networks/default"));

  // A template per role: machine type, Debian 12, preemptible workers, the
  // scripts and the settings as metadata.
  const std::string startup = *Env::Default()->ReadFile(kSourceDir + "/deploy/gce/startup.sh");
  const std::string shutdown = *Env::Default()->ReadFile(kSourceDir + "/deploy/gce/shutdown.sh");
  const std::vector<std::pair<std::string, std::string>> machines = {
      {"chief", "n1-standard-4"}, {"worker", "n1-standard-8"}, {"ps", "n1-highmem-2"}};
  for (const auto& [role, machine] : machines) {
    SCOPED_TRACE(role);
    const std::string name = "fashion-mnist-1-" + role;
    const json tmpl = compute.Get(global + "instanceTemplates/" + name);
    ASSERT_TRUE(tmpl.is_object());
    const json& p = tmpl["properties"];
    EXPECT_EQ(p["machineType"], machine);
    EXPECT_TRUE(absl::EndsWith(p["disks"][0]["initializeParams"]["sourceImage"].get<std::string>(),
                               "projects/debian-cloud/global/images/family/debian-12"));
    EXPECT_EQ(p["scheduling"].value("preemptible", false), role == "worker");
    EXPECT_EQ(p["tags"]["items"], json::parse(R"(["fashion-mnist-1"])"));
    EXPECT_EQ(p["serviceAccounts"][0]["scopes"],
              json::parse(R"(["https://www.googleapis.com/auth/cloud-platform"])"));
    EXPECT_EQ(MetadataItem(tmpl, "startup-script"), startup);
    EXPECT_EQ(MetadataItem(tmpl, "shutdown-script"), shutdown);
    EXPECT_EQ(MetadataItem(tmpl, "pstrain-role"), role);
    EXPECT_EQ(MetadataItem(tmpl, "pstrain-job-dir"), "gs://bkt/fashion-mnist-1");
    EXPECT_EQ(MetadataItem(tmpl, "pstrain-data-dir"), "gs://bkt/fashion-mnist");
    EXPECT_EQ(MetadataItem(tmpl, "pstrain-train-steps"), "2000");
    EXPECT_EQ(MetadataItem(tmpl, "pstrain-package"), "gs://bkt/pstrain_0.12.0_amd64.deb");
    EXPECT_EQ(MetadataItem(tmpl, "pstrain-group"), name);
    EXPECT_EQ(MetadataItem(tmpl, "pstrain-credentials"), "gs://bkt/fashion-mnist-1/credentials");
    const std::string cluster = MetadataItem(tmpl, "pstrain-cluster-config");
    EXPECT_NE(cluster.find("fashion-mnist-1-ps-0:2222"), std::string::npos) << cluster;
    EXPECT_NE(cluster.find("fashion-mnist-1-worker-1:2222"), std::string::npos) << cluster;

    // Its group, empty, then one named instance per task.
    const json group = compute.Get(zone + "instanceGroupManagers/" + name);
    ASSERT_TRUE(group.is_object());
    EXPECT_EQ(group["targetSize"], 0);
    EXPECT_TRUE(absl::EndsWith(group["instanceTemplate"].get<std::string>(),
                               global + "instanceTemplates/" + name));
  }
  std::vector<std::string> instances;
  for (const FakeCompute::Call& call : compute.calls()) {
    if (!absl::EndsWith(call.path, "/createInstances")) continue;
    for (const json& instance : call.body["instances"]) {
      instances.push_back(absl::StrCat(
          instance["name"].get<std::string>(), " index ",
          instance["preservedState"]["metadata"]["pstrain-task-index"].get<std::string>()));
    }
  }
  EXPECT_EQ(instances, (std::vector<std::string>{
                           "fashion-mnist-1-chief-0 index 0", "fashion-mnist-1-worker-0 index 0",
                           "fashion-mnist-1-worker-1 index 1", "fashion-mnist-1-ps-0 index 0"}));
  ExpectTheCredentialsUploaded();

  // Up again: the first command fails (the rule exists); the user is told
  // how to remove what is there.
  ProcessResult again = Gce("up", compute);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.output.find("already exists"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("removed by: pstrain-gce down --config " + config_),
            std::string::npos)
      << again.output;

  // Down deletes everything up made.
  ProcessResult down = Gce("down", compute);
  EXPECT_EQ(down.exit_code, 0) << down.output;
  EXPECT_FALSE(compute.Has(global + "firewalls/fashion-mnist-1-pstrain"));
  for (const auto& [role, machine] : machines) {
    EXPECT_FALSE(compute.Has(global + "instanceTemplates/fashion-mnist-1-" + role));
    EXPECT_FALSE(compute.Has(zone + "instanceGroupManagers/fashion-mnist-1-" + role));
  }
  EXPECT_TRUE(gcs_.ObjectNames("bkt").empty());
  EXPECT_FALSE(Env::Default()->FileExists(credentials_dir_));
}

// Without gcloud (or beside it): the commands pstrain-gce runs, through a
// stub that records them, in order.
// A model whose starting values are on this machine's disk cannot reach the
// VMs: refused before any gcloud command, saying what to do.
TEST_F(GceCliTest, StartingWeightsOnThisMachineAreRefused) {
  const std::string onnx = JoinPath(dir_, "net.onnx");
  ASSERT_TRUE(std::filesystem::copy_file(kSourceDir + "/fuzz/seeds/onnx/torch_cnn.onnx", onnx));
  std::string config = *Env::Default()->ReadFile(config_);
  const size_t model = config.find("  model: mnist_cnn\n");
  ASSERT_NE(model, std::string::npos) << config;
  config.replace(model, 19, "  model: " + onnx + "\n");
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(config_, config).ok());
  ProcessResult up = RunProcess({kGce, "up", "--config=" + config_, "--dry_run",
                                 "--scripts_dir=" + kSourceDir + "/deploy/gce"},
                                60);
  EXPECT_EQ(up.exit_code, 2) << up.output;
  EXPECT_NE(up.output.find("the model's starting weights are in " + onnx), std::string::npos)
      << up.output;
  EXPECT_NE(up.output.find("training.onnx_weights: ignore"), std::string::npos) << up.output;
  // Without them the same job goes ahead.
  config.insert(model, "  onnx_weights: ignore\n");
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(config_, config).ok());
  up = RunProcess({kGce, "up", "--config=" + config_, "--dry_run",
                   "--scripts_dir=" + kSourceDir + "/deploy/gce"},
                  60);
  EXPECT_EQ(up.exit_code, 0) << up.output;
}

TEST_F(GceCliTest, TheCommandsWithARecordedStub) {
  const std::string stub = JoinPath(dir_, "gcloud-stub");
  const std::string log = JoinPath(dir_, "gcloud.log");
  ASSERT_TRUE(testing_util::WriteRecordingGcloud(stub, log));
  ProcessResult up =
      RunProcess(GceCommand({}, {"up", "--config=" + config_, "--gcloud=" + stub}), 60);
  ASSERT_EQ(up.exit_code, 0) << up.output;
  ExpectTheCredentialsUploaded();
  EXPECT_NE(up.output.find("made the job's CA, certificates and token in " + credentials_dir_),
            std::string::npos)
      << up.output;
  const std::string commands = ReadAll(log);
  size_t at = 0;
  for (const std::string& expected :
       {std::string("gcloud compute firewall-rules create fashion-mnist-1-pstrain --project=proj-1 "
                    "--network=default --allow=tcp:2222 --source-tags=fashion-mnist-1 "
                    "--target-tags=fashion-mnist-1"),
        std::string("gcloud compute instance-templates create fashion-mnist-1-chief"),
        std::string("gcloud compute instance-groups managed create fashion-mnist-1-chief "
                    "--project=proj-1 --zone=us-central1-a --template=fashion-mnist-1-chief "
                    "--size=0"),
        std::string("gcloud compute instance-groups managed create-instance fashion-mnist-1-chief "
                    "--project=proj-1 --zone=us-central1-a --instance=fashion-mnist-1-chief-0 "
                    "--stateful-metadata=pstrain-task-index=0"),
        std::string("--machine-type=n1-standard-8 --image-family=debian-12"),
        std::string("--preemptible"),
        std::string("--instance=fashion-mnist-1-worker-1 --stateful-metadata=pstrain-task-index=1"),
        std::string("--instance=fashion-mnist-1-ps-0 --stateful-metadata=pstrain-task-index=0")}) {
    const size_t found = commands.find(expected, at);
    ASSERT_NE(found, std::string::npos) << "missing, or out of order: " << expected << "\n"
                                        << commands;
    at = found + expected.size();
  }
  EXPECT_NE(commands.find(",pstrain-credentials=gs://bkt/fashion-mnist-1/credentials"),
            std::string::npos)
      << commands;

  // Up again after a failure keeps the same CA (the VMs already made hold
  // its certificates); down deletes the credentials here and in the bucket.
  const std::string ca = ReadAll(JoinPath(credentials_dir_, "ca.crt"));
  up = RunProcess(GceCommand({}, {"up", "--config=" + config_, "--gcloud=" + stub}), 60);
  ASSERT_EQ(up.exit_code, 0) << up.output;
  EXPECT_NE(up.output.find("kept the job's CA"), std::string::npos) << up.output;
  EXPECT_EQ(ReadAll(JoinPath(credentials_dir_, "ca.crt")), ca);
  ProcessResult down =
      RunProcess(GceCommand({}, {"down", "--config=" + config_, "--gcloud=" + stub}), 60);
  EXPECT_EQ(down.exit_code, 0) << down.output;
  EXPECT_NE(
      down.output.find("deleted 10 credential files in gs://bkt/fashion-mnist-1/credentials/"),
      std::string::npos)
      << down.output;
  EXPECT_TRUE(gcs_.ObjectNames("bkt").empty());
  EXPECT_FALSE(Env::Default()->FileExists(credentials_dir_));
}

// On a user's machine the upload carries the user's gcloud login, sent to
// gcloud's storage endpoint (here the fake, through gcloud's own override
// variable, which also demands the token).
TEST_F(GceCliTest, TheUploadCarriesTheUsersGcloudToken) {
  const std::string stub = JoinPath(dir_, "gcloud-stub");
  const std::string log = JoinPath(dir_, "gcloud.log");
  ASSERT_TRUE(Env::Default()
                  ->WriteFileAtomic(stub, "#!/bin/sh\necho \"gcloud $*\" >> " + log +
                                              "\n[ \"$1 $2\" = \"auth print-access-token\" ] && "
                                              "echo ' ya29.user-token'\nexit 0\n")
                  .ok());
  ASSERT_EQ(::chmod(stub.c_str(), 0755), 0);
  gcs_.RequireToken("ya29.user-token");
  const std::vector<std::string> gce = {
      "/usr/bin/env",
      "-u",
      "STORAGE_EMULATOR_HOST",
      "CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE=" + gcs_.endpoint() + "/storage/v1/",
      kGce,
      "--config=" + config_,
      "--gcloud=" + stub,
      "--credentials_dir=" + credentials_dir_,
      "--scripts_dir=" + kSourceDir + "/deploy/gce"};
  std::vector<std::string> up = gce;
  up.push_back("up");
  ProcessResult result = RunProcess(up, 60);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  ExpectTheCredentialsUploaded();
  // One token for the whole upload.
  const std::string commands = ReadAll(log);
  EXPECT_EQ(commands.find("gcloud auth print-access-token"),
            commands.rfind("gcloud auth print-access-token"))
      << commands;
  std::vector<std::string> down = gce;
  down.push_back("down");
  result = RunProcess(down, 60);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(gcs_.ObjectNames("bkt").empty());
}

// Cloud Storage refusing the upload stops `up` before any VM is made.
TEST_F(GceCliTest, AFailedCredentialUploadMakesNoVm) {
  const std::string stub = JoinPath(dir_, "gcloud-stub");
  const std::string log = JoinPath(dir_, "gcloud.log");
  ASSERT_TRUE(testing_util::WriteRecordingGcloud(stub, log));
  gcs_.FailNext(1000, 403);
  ProcessResult up =
      RunProcess(GceCommand({}, {"up", "--config=" + config_, "--gcloud=" + stub}), 60);
  EXPECT_EQ(up.exit_code, 1) << up.output;
  EXPECT_NE(up.output.find("gs://bkt/fashion-mnist-1/credentials/ca.crt"), std::string::npos)
      << up.output;
  EXPECT_NE(up.output.find("no VM was made"), std::string::npos) << up.output;
  EXPECT_EQ(ReadAll(log).find("instance-templates create"), std::string::npos) << ReadAll(log);
}

}  // namespace
}  // namespace pstrain
