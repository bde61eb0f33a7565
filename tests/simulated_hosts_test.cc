// A job on simulated Compute Engine hosts: each "VM" is a network namespace
// on one bridge (tests/hosts/vmnet.sh) with its own /etc/hosts naming the
// other VMs, its own metadata server (our fake, on 169.254.169.254:80 inside
// the VM, reached as metadata.google.internal as on GCE) and the real
// startup script. Cloud Storage is our fake on the bridge's address; the
// package, the data and the job dir are in its bucket. Task addresses are
// instance names (job-ps-0:2222), as pstrain-gce writes them.
//
// `gcloud` is a recorded-command stub on PATH here: the group-stop path is
// checked by the command the startup script runs.
//
// The job runs with mutual TLS as pstrain-gce sets it up: `pstrain-gce up`
// (against the fake Cloud Storage, with the stub for its gcloud commands)
// makes the job's credentials in a local directory and uploads each task's
// share; every VM's startup script fetches its own, and a VM holding another
// job's certificate cannot join.
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "tests/fakes/fake_gcs.h"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using testing_util::Background;
using testing_util::FakeGcs;
using testing_util::ProcessResult;
using testing_util::ReadAll;
using testing_util::RunProcess;
using testing_util::StartProcess;
using testing_util::WaitForText;
using testing_util::WaitProcess;

const std::string kSourceDir = PSTRAIN_SOURCE_DIR;
const std::string kPackage = PSTRAIN_PACKAGE;
const std::string kFakeCloud = PSTRAIN_FAKE_CLOUD;
const std::string kBinDir = PSTRAIN_BIN_DIR;
const std::string kVmnet = kSourceDir + "/tests/hosts/vmnet.sh";

// The job's VMs: instance names as a managed instance group gives them.
const std::vector<std::string> kHosts = {"job-ps-0", "job-chief-0", "job-worker-0", "job-worker-1"};
// The cluster YAML every VM gets: TLS on (no `insecure`), the credentials
// are the startup script's flags. ps_retry_secs: when the ps VM is
// preempted, the chief's and the workers' pushes retry the gone ps this long
// (production's 60 s would be a minute of waiting here) before the tasks
// exit and their startup scripts start them again; still ample for a ps
// that is alive on a loaded machine.
constexpr char kCluster[] =
    "cluster:\n  chief: [\"job-chief-0:2222\"]\n"
    "  worker: [\"job-worker-0:2222\", \"job-worker-1:2222\"]\n  ps: [\"job-ps-0:2222\"]\n"
    "training:\n  model: mnist_cnn\n  update: sync\n  batch_size: 20\n  eval_steps: 0\n"
    "  checkpoint_steps: 10\n  log_every_n_steps: 10\n  threads: 1\n  ps_retry_secs: 10\n";
// A VM of another job on the same network, and what its worker says when
// the job's ps refuses its certificate until it stops waiting.
const std::string kIntruder = "other-worker-0";
constexpr char kIntruderGaveUp[] = "s (startup_timeout) for the parameter servers";
// The ps closes the connection in the TLS handshake (and logs it).
constexpr char kIntruderRefused[] = "Socket closed";

// The job as pstrain-gce takes it: its instance names are kHosts.
constexpr char kGceJob[] = R"(gce:
  project: p
  zone: us-central1-a
  job: job
  bucket: gs://bkt
  workers: 2
  ps: 1
training:
  model: mnist_cnn
  update: sync
  train_steps: 100
)";

class SimulatedHostsTest : public testing_util::ClusterTestBase {
 protected:
  SimulatedHostsTest() : ClusterTestBase("hosts") {}

  void SetUp() override {
    ProcessResult check = RunProcess({"/bin/bash", kVmnet, "check"}, 30);
    if (check.exit_code != 0) {
      GTEST_SKIP() << "\n*** SKIPPED: network namespaces are impossible on this machine, so the "
                      "simulated-hosts test cannot run: "
                   << check.output << " ***";
    }
    ASSERT_NO_FATAL_FAILURE(ClusterTestBase::SetUp());
    net_ = absl::StrCat("ph", getpid() % 10000);
    subnet_ = 20 + getpid() % 200;
    ProcessResult r = RunProcess({"/bin/bash", kVmnet, "destroy", net_}, 30);
    std::vector<std::string> create = {"/bin/bash", kVmnet, "create", net_,
                                       std::to_string(subnet_)};
    create.insert(create.end(), kHosts.begin(), kHosts.end());
    create.push_back(kIntruder);
    r = RunProcess(create, 60);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    created_ = true;

    // Cloud Storage on the bridge.
    const std::string bridge = absl::StrCat("10.213.", subnet_, ".1");
    ASSERT_GT(gcs_.Start(bridge), 0);
    gcs_.CreateBucket("bkt");
    gcs_.PutObject("bkt", "pkg/pstrain.deb", *Env::Default()->ReadFile(kPackage));
    const std::vector<std::string> names = *Env::Default()->ListDir(data_);
    for (const std::string& name : names) {
      gcs_.PutObject("bkt", "data/" + name, *Env::Default()->ReadFile(JoinPath(data_, name)));
    }
    // A gcloud that records what it is asked to do.
    const std::string bin = JoinPath(dir_, "bin");
    ASSERT_TRUE(Env::Default()->CreateDirs(bin).ok());
    gcloud_log_ = JoinPath(dir_, "gcloud.log");
    ASSERT_TRUE(testing_util::WriteRecordingGcloud(JoinPath(bin, "gcloud"), gcloud_log_));
    setenv("PATH", (bin + ":" + getenv("PATH")).c_str(), 1);

    // pstrain-gce up: the job's credentials made here, each task's share in
    // the bucket, and where they are in every template's metadata.
    const std::string gce_yaml = JoinPath(dir_, "gce.yaml");
    ASSERT_TRUE(Env::Default()->WriteFileAtomic(gce_yaml, kGceJob).ok());
    credentials_dir_ = JoinPath(dir_, "credentials");
    ProcessResult up = RunProcess(
        {"/usr/bin/env", "STORAGE_EMULATOR_HOST=" + gcs_.endpoint(), kBinDir + "/pstrain-gce", "up",
         "--config=" + gce_yaml, "--credentials_dir=" + credentials_dir_,
         "--scripts_dir=" + kSourceDir + "/deploy/gce"},
        60);
    ASSERT_EQ(up.exit_code, 0) << up.output;
    const std::string commands = ReadAll(gcloud_log_);
    const size_t at = commands.find("pstrain-credentials=");
    ASSERT_NE(at, std::string::npos) << commands;
    credentials_ = commands.substr(at + 20, commands.find_first_of(", \n", at) - at - 20);
    EXPECT_EQ(credentials_, "gs://bkt/job/credentials");
  }

  void TearDown() override {
    for (auto& [host, vm] : vms_) {
      if (vm.metadata.pid > 0) WaitProcess(&vm.metadata, 0);
      if (vm.startup.pid > 0) WaitProcess(&vm.startup, 0);
    }
    if (created_) {
      ProcessResult r = RunProcess({"/bin/bash", kVmnet, "destroy", net_}, 60);
      EXPECT_EQ(r.exit_code, 0) << r.output;
    }
    // The VMs' processes are gone with their namespaces.
    ClusterTestBase::TearDown();
  }

  struct Vm {
    Background metadata, startup;
    int boots = 0;
  };

  std::string Root(const std::string& host, int boot) {
    return JoinPath(dir_, absl::StrCat(host, "-", boot));
  }
  // Waits until the worker logging to `log` (each start of its process
  // appends) has started again past byte `since` and logged progress since,
  // and is not done: it trains in this run of the job, not in the one before
  // a ps left.
  static bool WaitUntilTrainingAgain(const std::string& log, size_t since, int timeout_secs) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_secs);
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string text = ReadAll(log);
      const size_t started = text.rfind("; waiting for the parameter servers");
      if (started != std::string::npos && started >= since &&
          text.find("step = ", started) != std::string::npos &&
          text.find(" done at global step ", started) == std::string::npos) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  std::string TaskLog(const std::string& host, int boot) {
    const std::string role = host.substr(4, host.rfind('-') - 4);
    return JoinPath(Root(host, boot), "var/log/pstrain-" + role + ".log");
  }

  // Boots `host`: its metadata server, then its startup script. Each boot has
  // a fresh disk (install root), as a recreated VM does.
  void Boot(const std::string& host) {
    Vm& vm = vms_[host];
    const int boot = vm.boots++;
    if (boot > 0) {
      ProcessResult r = RunProcess({"/bin/bash", kVmnet, "boot", net_, host}, 30);
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    const std::string role = host.substr(4, host.rfind('-') - 4);
    const std::string index = host.substr(host.rfind('-') + 1);
    const std::string cluster = kCluster;
    const std::string a = "instance/attributes/";
    std::map<std::string, std::string> values = {
        {a + "pstrain-role", role},
        {a + "pstrain-task-index", index},
        {a + "pstrain-cluster-config", absl::StrReplaceAll(cluster, {{"\n", "\\n"}})},
        {a + "pstrain-job-dir", "gs://bkt/job"},
        {a + "pstrain-data-dir", "gs://bkt/data"},
        {a + "pstrain-train-steps", std::to_string(train_steps_)},
        {a + "pstrain-package", "gs://bkt/pkg/pstrain.deb"},
        {a + "pstrain-credentials", credentials_},
        {a + "pstrain-storage-endpoint", gcs_.endpoint()},
        {a + "pstrain-install-root", Root(host, boot)},
        {a + "pstrain-run", "direct"},
        {a + "created-by", "projects/p/zones/us-central1-a/instanceGroupManagers/job-" + role},
        {"instance/zone", "projects/p/zones/us-central1-a"},
        {"instance/name", host}};
    std::string lines;
    for (const auto& [key, value] : values) absl::StrAppend(&lines, key, "=", value, "\n");
    const std::string file = JoinPath(dir_, absl::StrCat(host, "-", boot, ".metadata"));
    ASSERT_TRUE(Env::Default()->WriteFileAtomic(file, lines).ok());
    const std::string ports = file + ".ports";
    vm.metadata =
        StartProcess({"/bin/bash", kVmnet, "exec", net_, host, kFakeCloud, "--host=169.254.169.254",
                      "--metadata_port=80", "--metadata_file=" + file, "--port_file=" + ports},
                     file + ".log");
    ASSERT_TRUE(WaitForText(ports, "metadata 80", 30)) << ReadAll(file + ".log");
    vm.startup = StartProcess({"/bin/bash", kVmnet, "exec", net_, host, "/bin/bash",
                               JoinPath(kSourceDir, "deploy/gce/startup.sh")},
                              JoinPath(dir_, absl::StrCat("startup-", host, "-", boot, ".log")));
  }

  // Preempts `host`: its shutdown script runs (the ~30 s notice), then the VM
  // is powered off, whatever still runs on it killed.
  void Preempt(const std::string& host) {
    ProcessResult r = RunProcess({"/bin/bash", kVmnet, "exec", net_, host, "bash",
                                  JoinPath(kSourceDir, "deploy/gce/shutdown.sh")},
                                 40);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    r = RunProcess({"/bin/bash", kVmnet, "kill", net_, host}, 30);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    Vm& vm = vms_[host];
    WaitProcess(&vm.startup, 5);
    WaitProcess(&vm.metadata, 5);
  }

  // Each VM fetched ca.crt, the token and its own task's pair, nothing else;
  // the CA key never left this machine.
  void ExpectEachVmHoldsOnlyItsOwnCredentials() {
    const std::string ca = ReadAll(JoinPath(credentials_dir_, "ca.crt"));
    ASSERT_FALSE(ca.empty());
    EXPECT_TRUE(Env::Default()->FileExists(JoinPath(credentials_dir_, "ca.key")));
    for (const std::string& host : kHosts) {
      const std::string name = host.substr(4);  // ps-0, chief-0, worker-1
      const std::string tls = JoinPath(Root(host, vms_[host].boots - 1), "etc/pstrain/tls");
      std::vector<std::string> files = *Env::Default()->ListDir(tls);
      std::sort(files.begin(), files.end());
      std::vector<std::string> expected = {"ca.crt", "job.token", name + ".crt", name + ".key"};
      std::sort(expected.begin(), expected.end());
      EXPECT_EQ(files, expected) << host;
      struct stat st;
      ASSERT_EQ(::stat(tls.c_str(), &st), 0) << tls;
      EXPECT_EQ(st.st_mode & 0777, 0700u) << tls;
      for (const std::string& f : files) {
        ASSERT_EQ(::stat(JoinPath(tls, f).c_str(), &st), 0);
        EXPECT_EQ(st.st_mode & 0777, 0600u) << host << " " << f;
      }
      EXPECT_EQ(ReadAll(JoinPath(tls, "ca.crt")), ca) << host;
      EXPECT_EQ(ReadAll(JoinPath(tls, name + ".key")),
                ReadAll(JoinPath(credentials_dir_, name + ".key")))
          << host;
    }
    for (const std::string& object : gcs_.ObjectNames("bkt")) {
      EXPECT_EQ(object.find("ca.key"), std::string::npos) << object;
      EXPECT_EQ(object.find("client."), std::string::npos) << object;
    }
  }

  FakeGcs gcs_;
  std::string net_, gcloud_log_, credentials_dir_, credentials_;
  int subnet_ = 0;
  bool created_ = false;
  // Enough steps after the worker VM's preemption (at 30) for its recreated
  // VM to install the package, start and join. With 100, the 70 steps took
  // ~14 s on an AVX-512 machine but under 6 s once the AVX2 machine got its
  // direct kernels, and the job ended while the new worker still waited for
  // the ps: 270 steps, ~20 s there.
  int train_steps_ = 300;
  std::map<std::string, Vm> vms_;
};

TEST_F(SimulatedHostsTest, PreemptedPsAndWorkerVmsAreRecreatedAndTheJobFinishes) {
  // This run's links: 1 Gbit/s with 0.5 ms (the delay only where the kernel
  // has tc netem; vmnet.sh says so otherwise).
  ProcessResult shaped = RunProcess({"/bin/bash", kVmnet, "shape", net_, "1gbit", "0.5ms"}, 30);
  ASSERT_EQ(shaped.exit_code, 0) << shaped.output;
  std::cerr << shaped.output;
  for (const std::string& host : kHosts) ASSERT_NO_FATAL_FAILURE(Boot(host));
  const std::string chief_log = TaskLog("job-chief-0", 0);
  ASSERT_TRUE(WaitForText(chief_log, "step = 20,", 180)) << ReadAll(chief_log);
  EXPECT_NE(ReadAll(vms_["job-ps-0"].startup.log_path).find("installed pstrain-ps "),
            std::string::npos);
  ASSERT_NO_FATAL_FAILURE(ExpectEachVmHoldsOnlyItsOwnCredentials());

  // The ps VM is preempted: the chief checkpoints and stops the job; the
  // other VMs wait for the ps to come back.
  const size_t worker_log_before = ReadAll(TaskLog("job-worker-1", 0)).size();
  ASSERT_NO_FATAL_FAILURE(Preempt("job-ps-0"));
  ASSERT_TRUE(WaitForText(chief_log, "stopping the job:", 60)) << ReadAll(chief_log);
  ASSERT_TRUE(WaitForText(vms_["job-worker-0"].startup.log_path, "starting it again", 60))
      << ReadAll(vms_["job-worker-0"].startup.log_path);
  EXPECT_FALSE(gcs_.HasObject("bkt", "job/COMPLETED"));
  ASSERT_NO_FATAL_FAILURE(Boot("job-ps-0"));
  ASSERT_TRUE(WaitForText(chief_log, "training resumes at step", 120)) << ReadAll(chief_log);

  // A VM with another job's certificate and token cannot join, even one
  // that trusts this job's CA (ca.crt is no secret): the job's ps refuses
  // its certificate in the handshake, so the intruder never reaches it.
  const std::string other = JoinPath(dir_, "other-credentials");
  ProcessResult certs =
      RunProcess({kBinDir + "/pstrain-certs", "--workers=2", "--ps=1", "--out=" + other}, 60);
  ASSERT_EQ(certs.exit_code, 0) << certs.output;
  ASSERT_TRUE(Env::Default()
                  ->WriteFileAtomic(JoinPath(other, "ca.crt"),
                                    ReadAll(JoinPath(credentials_dir_, "ca.crt")))
                  .ok());
  const std::string cluster_file = JoinPath(dir_, "cluster.yaml");
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(cluster_file, kCluster).ok());
  Background intruder = StartProcess(
      {"/bin/bash", kVmnet, "exec", net_, kIntruder, kBinDir + "/pstrain-worker",
       "--config=" + cluster_file, "--job_name=worker", "--task_index=0",
       "--job_dir=" + JoinPath(dir_, "other-job"), "--data_dir=" + data_, "--train_steps=100",
       "--tls_dir=" + other, "--token_file=" + other + "/job.token", "--startup_timeout=8"},
      JoinPath(dir_, "intruder.log"));

  // A worker VM is preempted while it trains: the worker leaves, the job
  // goes on without it, and the recreated VM's worker joins again.
  ASSERT_TRUE(WaitUntilTrainingAgain(TaskLog("job-worker-1", 0), worker_log_before, 180))
      << ReadAll(TaskLog("job-worker-1", 0));
  ASSERT_NO_FATAL_FAILURE(Preempt("job-worker-1"));
  EXPECT_TRUE(WaitForText(TaskLog("job-worker-1", 0), "stopping at global step", 5))
      << ReadAll(TaskLog("job-worker-1", 0));
  ASSERT_NO_FATAL_FAILURE(Boot("job-worker-1"));

  // The intruder gave up, refused by the live ps all along.
  EXPECT_NE(WaitProcess(&intruder, 60), 0) << ReadAll(intruder.log_path);
  for (const char* expected : {kIntruderGaveUp, kIntruderRefused}) {
    EXPECT_NE(ReadAll(intruder.log_path).find(expected), std::string::npos)
        << ReadAll(intruder.log_path);
  }
  EXPECT_NE(ReadAll(TaskLog("job-ps-0", 1)).find("Handshake failed"), std::string::npos)
      << ReadAll(TaskLog("job-ps-0", 1));

  // The job finishes; every VM's script sees COMPLETED and stops its group.
  for (const std::string& host : kHosts) {
    EXPECT_EQ(WaitProcess(&vms_[host].startup, 300), 0) << host << ":\n"
                                                        << ReadAll(vms_[host].startup.log_path);
  }
  EXPECT_TRUE(gcs_.HasObject("bkt", "job/COMPLETED"));
  EXPECT_NE(ReadAll(chief_log).find(absl::StrCat("Saving dict for global step ", train_steps_)),
            std::string::npos)
      << ReadAll(chief_log);
  EXPECT_NE(ReadAll(TaskLog("job-worker-1", 1)).find("step = "), std::string::npos)
      << "the recreated worker did not train:\n"
      << ReadAll(TaskLog("job-worker-1", 1));
  const std::string gcloud = ReadAll(gcloud_log_);
  for (const char* group : {"job-ps", "job-chief", "job-worker"}) {
    EXPECT_NE(gcloud.find(absl::StrCat("gcloud compute instance-groups managed resize ", group,
                                       " --size=0 --zone=us-central1-a")),
              std::string::npos)
        << gcloud;
  }

  // A VM its group recreates after the job is complete does not train again.
  ASSERT_NO_FATAL_FAILURE(Preempt("job-worker-0"));
  ASSERT_NO_FATAL_FAILURE(Boot("job-worker-0"));
  EXPECT_EQ(WaitProcess(&vms_["job-worker-0"].startup, 60), 0);
  EXPECT_NE(ReadAll(vms_["job-worker-0"].startup.log_path)
                .find(absl::StrCat("is COMPLETED at global step ", train_steps_)),
            std::string::npos)
      << ReadAll(vms_["job-worker-0"].startup.log_path);

  // pstrain-gce down removes the credentials, here and in the bucket; the
  // job's checkpoints stay.
  ProcessResult down = RunProcess(
      {"/usr/bin/env", "STORAGE_EMULATOR_HOST=" + gcs_.endpoint(), kBinDir + "/pstrain-gce", "down",
       "--config=" + JoinPath(dir_, "gce.yaml"), "--credentials_dir=" + credentials_dir_},
      60);
  EXPECT_EQ(down.exit_code, 0) << down.output;
  EXPECT_FALSE(Env::Default()->FileExists(credentials_dir_));
  for (const std::string& name : gcs_.ObjectNames("bkt")) {
    EXPECT_NE(name.rfind("job/credentials/", 0), 0u) << name;
  }
  EXPECT_TRUE(gcs_.HasObject("bkt", "job/checkpoint"));
}

}  // namespace
}  // namespace pstrain
