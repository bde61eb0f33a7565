#include "security/job_credentials.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "common/env.h"
#include "config/cluster_config.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace pstrain {
namespace {

std::string NewDir() { return testing_util::TempDirRemovedAtExit("pstrain_certs_test"); }

std::string Read(const std::string& path) { return *Env::Default()->ReadFile(path); }

mode_t Mode(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

TEST(JobCredentialsTest, EveryTaskGetsACertificateTheJobsCaSigned) {
  ClusterSpec cluster;
  cluster.chief = {"h:1"};
  cluster.worker = {"h:2", "h:3"};
  cluster.ps = {"h:4"};
  const std::vector<std::string> names = CredentialNames(cluster);
  EXPECT_EQ(names, (std::vector<std::string>{"chief-0", "worker-0", "worker-1", "ps-0", "client"}));
  const std::string dir = JoinPath(NewDir(), "certs");
  ASSERT_TRUE(MakeJobCredentials(dir, names).ok());
  EXPECT_EQ(Mode(dir), 0700u);
  EXPECT_EQ(Mode(JoinPath(dir, "ca.key")), 0600u);
  EXPECT_EQ(Mode(JoinPath(dir, "job.token")), 0600u);
  const std::string ca = Read(JoinPath(dir, "ca.crt"));
  for (const std::string& name : names) {
    EXPECT_EQ(Mode(JoinPath(dir, name + ".key")), 0600u) << name;
    absl::StatusOr<CertificateInfo> info =
        InspectCertificate(Read(JoinPath(dir, name + ".crt")), ca);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->dns_names, std::vector<std::string>{name});
    EXPECT_TRUE(info->signed_by_ca) << name;
  }
  const std::string token = Read(JoinPath(dir, "job.token"));
  EXPECT_EQ(token.size(), 65u);  // 64 hex digits and a newline
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef\n"), std::string::npos);

  // Another job's CA did not sign these.
  const std::string other = JoinPath(NewDir(), "other");
  ASSERT_TRUE(MakeJobCredentials(other, {"ps-0"}).ok());
  absl::StatusOr<CertificateInfo> foreign =
      InspectCertificate(Read(JoinPath(other, "ps-0.crt")), ca);
  ASSERT_TRUE(foreign.ok());
  EXPECT_FALSE(foreign->signed_by_ca);
  EXPECT_NE(Read(JoinPath(other, "job.token")), token);
}

TEST(JobCredentialsTest, NothingIsReplacedAndBadNamesAreRefused) {
  const std::string dir = JoinPath(NewDir(), "certs");
  ASSERT_TRUE(MakeJobCredentials(dir, {"ps-0"}).ok());
  const std::string ca = Read(JoinPath(dir, "ca.crt"));
  absl::Status again = MakeJobCredentials(dir, {"ps-0"});
  EXPECT_TRUE(absl::IsAlreadyExists(again)) << again;
  EXPECT_NE(again.message().find("ca.key exists"), std::string::npos) << again;
  EXPECT_EQ(Read(JoinPath(dir, "ca.crt")), ca);
  for (const char* bad : {"", "ca", "../x", "PS-0", "a b"}) {
    absl::Status s = MakeJobCredentials(JoinPath(NewDir(), "c"), {bad});
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad << ": " << s;
  }
  EXPECT_FALSE(InspectCertificate("not a certificate", ca).ok());
}

TEST(WireSecurityTest, LoadsATasksCredentialsOrSaysWhatIsMissing) {
  const std::string dir = JoinPath(NewDir(), "certs");
  ASSERT_TRUE(MakeJobCredentials(dir, {"worker-1", "ps-0"}).ok());
  TrainingSpec t;
  const TaskSpec worker{"worker", 1};
  // Nothing set: refused, saying how to make them or ask for plaintext.
  absl::StatusOr<WireSecurity> none = LoadWireSecurity(Env::Default(), t, worker);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("training.tls_dir and training.token_file are not set"),
            std::string::npos)
      << none.status();
  EXPECT_NE(none.status().message().find("pstrain-certs"), std::string::npos);
  EXPECT_NE(none.status().message().find("insecure: true"), std::string::npos);
  t.tls_dir = dir;
  EXPECT_NE(LoadWireSecurity(Env::Default(), t, worker)
                .status()
                .message()
                .find("training.token_file is not set"),
            std::string::npos);
  t.token_file = JoinPath(dir, "job.token");
  absl::StatusOr<WireSecurity> wire = LoadWireSecurity(Env::Default(), t, worker);
  ASSERT_TRUE(wire.ok()) << wire.status();
  EXPECT_TRUE(wire->tls);
  EXPECT_EQ(wire->cert_pem, Read(JoinPath(dir, "worker-1.crt")));
  EXPECT_EQ(wire->key_pem, Read(JoinPath(dir, "worker-1.key")));
  EXPECT_EQ(wire->ca_pem, Read(JoinPath(dir, "ca.crt")));
  EXPECT_EQ(wire->token.size(), 64u);  // without the newline
  // A task without a certificate in the directory.
  absl::Status missing = LoadWireSecurity(Env::Default(), t, TaskSpec{"worker", 0}).status();
  EXPECT_NE(missing.message().find("worker-0.crt"), std::string::npos) << missing;
  // Insecure: plaintext, the token still checked if given; not with tls_dir.
  t.insecure = true;
  EXPECT_NE(LoadWireSecurity(Env::Default(), t, worker).status().message().find("choose"),
            std::string::npos);
  t.tls_dir.clear();
  wire = LoadWireSecurity(Env::Default(), t, worker);
  ASSERT_TRUE(wire.ok()) << wire.status();
  EXPECT_FALSE(wire->tls);
  EXPECT_EQ(wire->token.size(), 64u);
  t.token_file.clear();
  wire = LoadWireSecurity(Env::Default(), t, worker);
  ASSERT_TRUE(wire.ok());
  EXPECT_EQ(*wire, WireSecurity());
  // A short token.
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(JoinPath(dir, "short"), "abc\n").ok());
  t.token_file = JoinPath(dir, "short");
  EXPECT_NE(LoadWireSecurity(Env::Default(), t, worker).status().message().find("at least 16"),
            std::string::npos);
}

TEST(WireSecurityTest, TokensCompareWhole) {
  EXPECT_TRUE(TokenEquals("0123456789abcdef", "0123456789abcdef"));
  EXPECT_FALSE(TokenEquals("0123456789abcdef", "0123456789abcdeF"));
  EXPECT_FALSE(TokenEquals("0123456789abcdef", "0123456789abcde"));
  EXPECT_FALSE(TokenEquals("0123456789abcdef", "0123456789abcdef0"));
  EXPECT_FALSE(TokenEquals("0123456789abcdef", ""));
  EXPECT_FALSE(TokenEquals("", ""));  // no token is never a match
  EXPECT_EQ(TaskCredentialName("master", 0), "chief-0");
  EXPECT_EQ(TaskCredentialName("ps", 3), "ps-3");
}

}  // namespace
}  // namespace pstrain
