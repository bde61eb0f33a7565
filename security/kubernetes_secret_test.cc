#include "security/kubernetes_secret.h"

#include <stdlib.h>

#include <set>
#include <string>

#include "absl/strings/escaping.h"
#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "security/job_credentials.h"
#include "testing/temp_dir.h"
#include "yaml-cpp/yaml.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

std::string NewSecretDir() {
  return JoinPath(testing_util::TempDirRemovedAtExit("pstrain_secret_test"), "certs");
}

TEST(KubernetesSecretTest, HoldsWhatTheTasksReadAndNotTheCaKey) {
  const std::string dir = NewSecretDir();
  const std::vector<std::string> names = {"chief-0", "worker-0", "worker-1", "ps-0", "client"};
  ASSERT_TRUE(MakeJobCredentials(dir, names).ok());
  KubernetesSecretOptions options;
  options.name = "mnist-credentials";
  options.namespace_ = "team-a";
  absl::StatusOr<std::string> yaml = KubernetesSecretYaml(Env::Default(), dir, names, options);
  ASSERT_TRUE(yaml.ok()) << yaml.status();

  const YAML::Node secret = YAML::Load(*yaml);
  EXPECT_EQ(secret["apiVersion"].as<std::string>(), "v1");
  EXPECT_EQ(secret["kind"].as<std::string>(), "Secret");
  EXPECT_EQ(secret["type"].as<std::string>(), "Opaque");
  EXPECT_EQ(secret["metadata"]["name"].as<std::string>(), "mnist-credentials");
  EXPECT_EQ(secret["metadata"]["namespace"].as<std::string>(), "team-a");
  std::set<std::string> keys;
  for (const auto& entry : secret["data"]) {
    const std::string key = entry.first.as<std::string>();
    keys.insert(key);
    std::string decoded;
    ASSERT_TRUE(absl::Base64Unescape(entry.second.as<std::string>(), &decoded)) << key;
    EXPECT_EQ(decoded, *Env::Default()->ReadFile(JoinPath(dir, key))) << key;
  }
  EXPECT_EQ(keys, (std::set<std::string>{"ca.crt", "job.token", "chief-0.crt", "chief-0.key",
                                         "worker-0.crt", "worker-0.key", "worker-1.crt",
                                         "worker-1.key", "ps-0.crt", "ps-0.key"}));

  // Without a namespace, kubectl's current one.
  options.namespace_.clear();
  yaml = KubernetesSecretYaml(Env::Default(), dir, names, options);
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_FALSE(YAML::Load(*yaml)["metadata"]["namespace"].IsDefined());
}

TEST(KubernetesSecretTest, MissingFilesAndBadNames) {
  const std::string dir = NewSecretDir();
  ASSERT_TRUE(MakeJobCredentials(dir, {"chief-0", "ps-0"}).ok());
  absl::StatusOr<std::string> yaml =
      KubernetesSecretYaml(Env::Default(), dir, {"chief-0", "ps-0", "worker-0"}, {});
  EXPECT_TRUE(absl::IsNotFound(yaml.status())) << yaml.status();
  EXPECT_THAT(std::string(yaml.status().message()), HasSubstr("worker-0.crt"));

  for (const char* bad : {"", "Pstrain", "-x", "x-", "a_b"}) {
    KubernetesSecretOptions options;
    options.name = bad;
    yaml = KubernetesSecretYaml(Env::Default(), dir, {"chief-0"}, options);
    EXPECT_TRUE(absl::IsInvalidArgument(yaml.status())) << bad;
    EXPECT_THAT(std::string(yaml.status().message()), HasSubstr("not a Kubernetes Secret name"));
  }
  KubernetesSecretOptions options;
  options.namespace_ = "a.b";
  yaml = KubernetesSecretYaml(Env::Default(), dir, {"chief-0"}, options);
  EXPECT_THAT(std::string(yaml.status().message()), HasSubstr("not a Kubernetes namespace"));
}

}  // namespace
}  // namespace pstrain
