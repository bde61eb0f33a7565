// The Compute Engine startup and shutdown scripts (deploy/gce/) on this
// machine: each "VM" is the real startup script run against a metadata
// server of its own (our fake, with the instance attributes pstrain-gce
// sets) and our fake Cloud Storage holding the package, the data and the job
// dir. The package is the real .deb (cpack), unpacked into a per-VM root.
// `gcloud` is a recorded-command stub on PATH here: the group-stop path is
// checked by the command it would run.
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "tests/fakes/fake_gcs.h"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using testing_util::Background;
using testing_util::FakeGcs;
using testing_util::FakeMetadata;
using testing_util::FreePort;
using testing_util::ProcessResult;
using testing_util::ReadAll;
using testing_util::RunProcess;
using testing_util::StartProcess;
using testing_util::WaitForText;
using testing_util::WaitProcess;

const std::string kSourceDir = PSTRAIN_SOURCE_DIR;
const std::string kPackage = PSTRAIN_PACKAGE;

class GceStartupTest : public testing_util::ClusterTestBase {
 protected:
  GceStartupTest() : ClusterTestBase("gce") {}

  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(ClusterTestBase::SetUp());
    ASSERT_GT(gcs_.Start(), 0);
    gcs_.CreateBucket("bkt");
    std::string deb = *Env::Default()->ReadFile(kPackage);
    gcs_.PutObject("bkt", "pkg/pstrain.deb", deb);
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
    ports_ = {FreePort(), FreePort(), FreePort()};
  }

  // A VM of the job: its metadata server and root. Returns the metadata.
  std::unique_ptr<FakeMetadata> Vm(const std::string& role, int index) {
    auto metadata = std::make_unique<FakeMetadata>();
    EXPECT_GT(metadata->Start(), 0);
    const std::string cluster = absl::StrCat(
        "cluster:\n  chief: [\"127.0.0.1:", ports_[0], "\"]\n  worker: [\"127.0.0.1:", ports_[1],
        "\"]\n  ps: [\"127.0.0.1:", ports_[2],
        "\"]\ntraining:\n  model: mnist_cnn\n  update: sync\n  batch_size: 20\n  eval_steps: 0\n"
        "  checkpoint_steps: 10\n  log_every_n_steps: 10\n  threads: 1\n  insecure: true\n");
    const std::string a = "instance/attributes/";
    metadata->Set(a + "pstrain-role", role);
    metadata->Set(a + "pstrain-task-index", std::to_string(index));
    metadata->Set(a + "pstrain-cluster-config", cluster);
    metadata->Set(a + "pstrain-job-dir", "gs://bkt/job");
    metadata->Set(a + "pstrain-data-dir", "gs://bkt/data");
    metadata->Set(a + "pstrain-train-steps", "20");
    metadata->Set(a + "pstrain-package", "gs://bkt/pkg/pstrain.deb");
    metadata->Set(a + "pstrain-storage-endpoint", gcs_.endpoint());
    metadata->Set(a + "pstrain-install-root", JoinPath(dir_, "vm-" + role));
    metadata->Set(a + "pstrain-run", "direct");
    metadata->Set(a + "created-by",
                  "projects/p/zones/us-central1-a/instanceGroupManagers/job-" + role);
    metadata->Set("instance/zone", "projects/p/zones/us-central1-a");
    return metadata;
  }

  Background Boot(const FakeMetadata& metadata, const std::string& name, int round) {
    const std::string host = metadata.base_url().substr(std::string("http://").size());
    return StartProcess({"/usr/bin/env", "GCE_METADATA_HOST=" + host, "bash",
                         JoinPath(kSourceDir, "deploy/gce/startup.sh")},
                        JoinPath(dir_, absl::StrCat("startup-", name, "-", round, ".log")));
  }

  FakeGcs gcs_;
  std::string gcloud_log_;
  std::vector<int> ports_;
};

TEST_F(GceStartupTest, VmsInstallTrainFromTheBucketAndStopTheirGroupsWhenComplete) {
  auto ps = Vm("ps", 0), chief = Vm("chief", 0), worker = Vm("worker", 0);
  std::vector<Background> vms = {Boot(*ps, "ps", 0), Boot(*chief, "chief", 0),
                                 Boot(*worker, "worker", 0)};
  for (Background& vm : vms) EXPECT_EQ(WaitProcess(&vm, 300), 0) << ReadAll(vm.log_path);
  const std::string chief_log = ReadAll(JoinPath(dir_, "vm-chief/var/log/pstrain-chief.log"));
  EXPECT_NE(chief_log.find("Saving dict for global step 20"), std::string::npos) << chief_log;
  EXPECT_NE(ReadAll(vms[1].log_path).find("installed pstrain-chief "), std::string::npos)
      << ReadAll(vms[1].log_path);
  EXPECT_TRUE(gcs_.HasObject("bkt", "job/COMPLETED"));
  EXPECT_TRUE(gcs_.HasObject("bkt", "job/model.ckpt-20.index"));
  // Each VM stopped its own group once the job was complete.
  const std::string gcloud = ReadAll(gcloud_log_);
  for (const char* group : {"job-ps", "job-chief", "job-worker"}) {
    EXPECT_NE(gcloud.find(absl::StrCat("gcloud compute instance-groups managed resize ", group,
                                       " --size=0 --zone=us-central1-a")),
              std::string::npos)
        << gcloud;
  }

  // A recreated VM of the finished job does not train again.
  Background again = Boot(*worker, "worker", 1);
  EXPECT_EQ(WaitProcess(&again, 60), 0) << ReadAll(again.log_path);
  EXPECT_NE(ReadAll(again.log_path).find("is COMPLETED at global step 20"), std::string::npos)
      << ReadAll(again.log_path);
}

TEST_F(GceStartupTest, APreemptedChiefVmIsRecreatedAndTheJobResumesFromTheBucket) {
  auto ps = Vm("ps", 0), chief = Vm("chief", 0), worker = Vm("worker", 0);
  for (auto* vm : {ps.get(), chief.get(), worker.get()}) {
    vm->Set("instance/attributes/pstrain-train-steps", "60");
  }
  std::vector<Background> vms = {Boot(*ps, "ps", 0), Boot(*chief, "chief", 0),
                                 Boot(*worker, "worker", 0)};
  const std::string chief_log = JoinPath(dir_, "vm-chief/var/log/pstrain-chief.log");
  ASSERT_TRUE(WaitForText(chief_log, "step = 20,", 120)) << ReadAll(chief_log);
  // The chief's VM is preempted: its shutdown script sends SIGTERM; the
  // chief saves a checkpoint and ends the job; its startup script ends.
  const std::string host = chief->base_url().substr(std::string("http://").size());
  ProcessResult r = RunProcess({"/usr/bin/env", "GCE_METADATA_HOST=" + host, "bash",
                                JoinPath(kSourceDir, "deploy/gce/shutdown.sh")},
                               60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(WaitProcess(&vms[1], 60), 0) << ReadAll(vms[1].log_path);
  EXPECT_NE(ReadAll(chief_log).find("checkpoint saved at global step"), std::string::npos)
      << ReadAll(chief_log);
  EXPECT_FALSE(gcs_.HasObject("bkt", "job/COMPLETED"));
  // The other VMs start their tasks again; the recreated chief VM restores
  // the bucket's checkpoint and the job finishes.
  ASSERT_TRUE(WaitForText(vms[2].log_path, "starting it again", 60)) << ReadAll(vms[2].log_path);
  Background recreated = Boot(*chief, "chief", 1);
  EXPECT_EQ(WaitProcess(&recreated, 300), 0) << ReadAll(recreated.log_path);
  EXPECT_NE(ReadAll(chief_log).find("training resumes at step"), std::string::npos)
      << ReadAll(chief_log);
  EXPECT_NE(ReadAll(chief_log).find("Saving dict for global step 60"), std::string::npos)
      << ReadAll(chief_log);
  EXPECT_EQ(WaitProcess(&vms[0], 120), 0) << ReadAll(vms[0].log_path);
  EXPECT_EQ(WaitProcess(&vms[2], 120), 0) << ReadAll(vms[2].log_path);
  EXPECT_TRUE(gcs_.HasObject("bkt", "job/COMPLETED"));
}

TEST_F(GceStartupTest, ABadMetadataValueOrAnUnreachableBucketIsNamed) {
  auto worker = Vm("worker", 0);
  // A bad metadata value stops the startup script with its name.
  worker->Set("instance/attributes/pstrain-role", "trainer");
  Background bad = Boot(*worker, "bad", 0);
  EXPECT_EQ(WaitProcess(&bad, 30), 1);
  EXPECT_NE(ReadAll(bad.log_path).find("metadata pstrain-role = 'trainer'"), std::string::npos)
      << ReadAll(bad.log_path);
  worker->Set("instance/attributes/pstrain-role", "worker");
  worker->Remove("instance/attributes/pstrain-job-dir");
  bad = Boot(*worker, "bad", 1);
  EXPECT_EQ(WaitProcess(&bad, 30), 1);
  EXPECT_NE(ReadAll(bad.log_path).find("instance metadata pstrain-job-dir is not set"),
            std::string::npos)
      << ReadAll(bad.log_path);
  // Credentials named by the metadata but missing from the bucket.
  worker->Set("instance/attributes/pstrain-job-dir", "gs://bkt/job");
  worker->Set("instance/attributes/pstrain-credentials", "gs://bkt/job/credentials");
  gcs_.PutObject("bkt", "job/credentials/ca.crt", "ca");
  gcs_.PutObject("bkt", "job/credentials/job.token", "token");
  bad = Boot(*worker, "bad", 4);
  EXPECT_EQ(WaitProcess(&bad, 30), 1);
  EXPECT_NE(ReadAll(bad.log_path).find("gs://bkt/job/credentials/worker-0.crt does not exist"),
            std::string::npos)
      << ReadAll(bad.log_path);
  worker->Remove("instance/attributes/pstrain-credentials");
  // An unreachable bucket: tried again once (a second later) rather than
  // the default 5 times over about 30 s, then named.
  worker->Set("instance/attributes/pstrain-job-dir", "gs://bkt/job");
  worker->Set("instance/attributes/pstrain-storage-endpoint", "http://127.0.0.1:1");
  worker->Set("instance/attributes/pstrain-storage-retries", "1");
  bad = Boot(*worker, "bad", 2);
  EXPECT_EQ(WaitProcess(&bad, 60), 1);
  EXPECT_NE(ReadAll(bad.log_path).find("Cloud Storage at http://127.0.0.1:1 is unreachable"),
            std::string::npos)
      << ReadAll(bad.log_path);
  worker->Remove("instance/attributes/pstrain-storage-retries");
  // A task that fails every time is started again up to pstrain-max-restarts
  // times in a row, then not again (the VM says why and where to look).
  worker->Set("instance/attributes/pstrain-storage-endpoint", gcs_.endpoint());
  worker->Set("instance/attributes/pstrain-flags", "--batch_size=0");
  worker->Set("instance/attributes/pstrain-max-restarts", "1");
  bad = Boot(*worker, "bad", 3);
  EXPECT_EQ(WaitProcess(&bad, 120), 1);
  const std::string log = ReadAll(bad.log_path);
  EXPECT_NE(log.find("pstrain-worker failed 2 times in a row (pstrain-max-restarts = 1); not "
                     "starting it again"),
            std::string::npos)
      << log;
  size_t restarts = 0;
  for (size_t at = log.find("starting it again in 2 s"); at != std::string::npos;
       at = log.find("starting it again in 2 s", at + 1)) {
    ++restarts;
  }
  EXPECT_EQ(restarts, 1u) << log;
}

}  // namespace
}  // namespace pstrain
