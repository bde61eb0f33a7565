#include "launch/gce_credentials.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "cloud/gcs_env.h"
#include "gtest/gtest.h"
#include "security/job_credentials.h"
#include "tests/fakes/fake_gcs.h"

namespace pstrain {
namespace {

using testing_util::FakeGcs;

constexpr char kCredentialsJob[] = R"(
gce: {project: proj, zone: us-central1-a, job: mnist-1, bucket: gs://bkt, workers: 2, ps: 1}
training: {train_steps: 100}
)";

std::string TempDir() {
  std::string dir = std::filesystem::temp_directory_path() / "gce_credentials_XXXXXX";
  return mkdtemp(dir.data());
}

class GceCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = TempDir();
    dir_ = JoinPath(root_, "config/pstrain/gce/proj/mnist-1");
    plan_ = *ParseGcePlan(kCredentialsJob, "job.yaml");
    ASSERT_GT(gcs_.Start(), 0);
    gcs_.CreateBucket("bkt");
    transport_ = NewCurlTransport();
    GcsOptions options;
    options.endpoint = gcs_.endpoint();
    options.retry_budget = absl::Seconds(3);
    gcs_env_ = std::make_unique<GcsEnv>(transport_.get(), options);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::string root_, dir_;
  GcePlan plan_;
  FakeGcs gcs_;
  std::unique_ptr<HttpTransport> transport_;
  std::unique_ptr<GcsEnv> gcs_env_;
};

TEST_F(GceCredentialsTest, TheDefaultPlaceIsUnderTheUsersConfigDir) {
  EXPECT_EQ(*DefaultGceCredentialsDir(plan_.spec, "/x/cfg", "/home/u"),
            "/x/cfg/pstrain/gce/proj/mnist-1");
  EXPECT_EQ(*DefaultGceCredentialsDir(plan_.spec, "", "/home/u"),
            "/home/u/.config/pstrain/gce/proj/mnist-1");
  absl::StatusOr<std::string> none = DefaultGceCredentialsDir(plan_.spec, nullptr, nullptr);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("--credentials_dir"), std::string::npos);
}

TEST_F(GceCredentialsTest, ATlsJobHandsOutCredentialsAPlaintextOrOwnOneDoesNot) {
  EXPECT_EQ(plan_.spec.credentials, "gs://bkt/mnist-1/credentials");
  const std::string base = "gce: {project: p, zone: z, job: j, bucket: gs://b}\n";
  EXPECT_EQ(ParseGcePlan(base + "training: {train_steps: 5, insecure: true}\n", "j.yaml")
                ->spec.credentials,
            "");
  EXPECT_EQ(ParseGcePlan(base + "training: {train_steps: 5, tls_dir: /etc/tls, token_file: "
                                "/etc/tls/job.token}\n",
                         "j.yaml")
                ->spec.credentials,
            "");
  absl::StatusOr<GcePlan> half =
      ParseGcePlan(base + "training: {train_steps: 5, token_file: /t}\n", "j.yaml");
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.status().message().find("token_file without training.tls_dir"), std::string::npos)
      << half.status();
}

TEST_F(GceCredentialsTest, MadeOnceKeptOnTheNextUpAndEachTasksShareUploadedWithoutTheCaKey) {
  absl::StatusOr<bool> made = EnsureGceCredentials(plan_, dir_);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_TRUE(*made);
  struct stat st;
  ASSERT_EQ(::stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const std::string ca = *Env::Default()->ReadFile(JoinPath(dir_, "ca.crt"));
  // `up` again (after a failure): the same CA, nothing replaced.
  made = EnsureGceCredentials(plan_, dir_);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_FALSE(*made);
  EXPECT_EQ(*Env::Default()->ReadFile(JoinPath(dir_, "ca.crt")), ca);

  ASSERT_TRUE(UploadGceCredentials(Env::Default(), gcs_env_.get(), plan_, dir_).ok());
  EXPECT_EQ(
      gcs_.ObjectNames("bkt"),
      (std::set<std::string>{"mnist-1/credentials/ca.crt", "mnist-1/credentials/job.token",
                             "mnist-1/credentials/chief-0.crt", "mnist-1/credentials/chief-0.key",
                             "mnist-1/credentials/worker-0.crt", "mnist-1/credentials/worker-0.key",
                             "mnist-1/credentials/worker-1.crt", "mnist-1/credentials/worker-1.key",
                             "mnist-1/credentials/ps-0.crt", "mnist-1/credentials/ps-0.key"}));
  EXPECT_EQ(gcs_.GetObject("bkt", "mnist-1/credentials/ps-0.key"),
            *Env::Default()->ReadFile(JoinPath(dir_, "ps-0.key")));
  absl::StatusOr<CertificateInfo> ps =
      InspectCertificate(gcs_.GetObject("bkt", "mnist-1/credentials/ps-0.crt"), ca);
  ASSERT_TRUE(ps.ok());
  EXPECT_TRUE(ps->signed_by_ca);
  EXPECT_EQ(ps->dns_names, std::vector<std::string>{"ps-0"});

  // down: the objects go; a second down finds nothing and is fine.
  gcs_.PutObject("bkt", "mnist-1/checkpoint", "kept");
  absl::StatusOr<int> deleted = DeleteGceCredentials(gcs_env_.get(), plan_.spec);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 10);
  EXPECT_EQ(gcs_.ObjectNames("bkt"), std::set<std::string>{"mnist-1/checkpoint"});
  EXPECT_EQ(*DeleteGceCredentials(gcs_env_.get(), plan_.spec), 0);
}

TEST_F(GceCredentialsTest, APartialOrForeignSetIsRefusedAndLeftAlone) {
  ASSERT_TRUE(EnsureGceCredentials(plan_, dir_).ok());
  // Another job's certificate in its place.
  const std::string other = JoinPath(root_, "other");
  ASSERT_TRUE(MakeJobCredentials(other, {"ps-0"}).ok());
  const std::string foreign = *Env::Default()->ReadFile(JoinPath(other, "ps-0.crt"));
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(JoinPath(dir_, "ps-0.crt"), foreign).ok());
  absl::StatusOr<bool> made = EnsureGceCredentials(plan_, dir_);
  ASSERT_FALSE(made.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(made.status()));
  EXPECT_NE(made.status().message().find("ps-0.crt was not signed by the CA"), std::string::npos)
      << made.status();
  // A file missing.
  ASSERT_EQ(::unlink(JoinPath(dir_, "worker-1.key").c_str()), 0);
  made = EnsureGceCredentials(plan_, dir_);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("but not worker-1.key"), std::string::npos)
      << made.status();
  EXPECT_EQ(*Env::Default()->ReadFile(JoinPath(dir_, "ps-0.crt")), foreign);
}

TEST_F(GceCredentialsTest, OnlyADirectoryOfItsOwnIsUsedAndDownDeletesOnlyTheJobsFiles) {
  // A directory of other files is refused (down would delete it).
  const std::string busy = JoinPath(root_, "busy");
  ASSERT_EQ(::mkdir(busy.c_str(), 0755), 0);
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(JoinPath(busy, "notes.txt"), "mine").ok());
  absl::StatusOr<bool> made = EnsureGceCredentials(plan_, busy);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("is not empty"), std::string::npos) << made.status();
  // An empty one is used, and made private.
  const std::string empty = JoinPath(root_, "empty");
  ASSERT_EQ(::mkdir(empty.c_str(), 0755), 0);
  ASSERT_TRUE(EnsureGceCredentials(plan_, empty).ok());
  struct stat st;
  ASSERT_EQ(::stat(empty.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // down deletes the job's files and the directory; a file of someone
  // else's keeps the directory (and is said).
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(JoinPath(empty, "notes.txt"), "mine").ok());
  absl::Status removed = RemoveLocalGceCredentials(plan_, empty);
  EXPECT_FALSE(removed.ok());
  EXPECT_FALSE(Env::Default()->FileExists(JoinPath(empty, "ca.key")));
  EXPECT_EQ(*Env::Default()->ReadFile(JoinPath(empty, "notes.txt")), "mine");
  ASSERT_TRUE(EnsureGceCredentials(plan_, dir_).ok());
  ASSERT_TRUE(RemoveLocalGceCredentials(plan_, dir_).ok());
  EXPECT_FALSE(Env::Default()->FileExists(dir_));
  EXPECT_TRUE(RemoveLocalGceCredentials(plan_, dir_).ok());  // down twice
}

TEST_F(GceCredentialsTest, AnotherCaInTheBucketIsNotReplaced) {
  // The job was started from another machine: its VMs trust that CA.
  gcs_.PutObject("bkt", "mnist-1/credentials/ca.crt", "their CA");
  ASSERT_TRUE(EnsureGceCredentials(plan_, dir_).ok());
  absl::Status s = UploadGceCredentials(Env::Default(), gcs_env_.get(), plan_, dir_);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("is another CA than"), std::string::npos) << s;
  EXPECT_EQ(gcs_.ObjectNames("bkt"), std::set<std::string>{"mnist-1/credentials/ca.crt"});
  EXPECT_EQ(gcs_.GetObject("bkt", "mnist-1/credentials/ca.crt"), "their CA");
  // Its own CA there (an `up` run again) is fine.
  gcs_.PutObject("bkt", "mnist-1/credentials/ca.crt",
                 *Env::Default()->ReadFile(JoinPath(dir_, "ca.crt")));
  EXPECT_TRUE(UploadGceCredentials(Env::Default(), gcs_env_.get(), plan_, dir_).ok());
}

TEST_F(GceCredentialsTest, AnUploadThatFailsNamesTheObject) {
  ASSERT_TRUE(EnsureGceCredentials(plan_, dir_).ok());
  gcs_.FailNext(1000, 403);
  absl::Status s = UploadGceCredentials(Env::Default(), gcs_env_.get(), plan_, dir_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("gs://bkt/mnist-1/credentials/ca.crt"), std::string::npos) << s;
}

}  // namespace
}  // namespace pstrain
