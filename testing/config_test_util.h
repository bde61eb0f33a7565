#ifndef PSTRAIN_TESTING_CONFIG_TEST_UTIL_H_
#define PSTRAIN_TESTING_CONFIG_TEST_UTIL_H_

// Helpers shared by the job-config tests (cluster YAML, trainingInput,
// TF_CONFIG).

#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace config_test {

using ::testing::HasSubstr;

inline std::string Message(const absl::Status& status) { return std::string(status.message()); }

// A runnable config: 1 chief, 2 workers, 1 ps.
inline constexpr char kGoodYaml[] = R"(
cluster:
  chief: ["127.0.0.1:23450"]
  worker: ["127.0.0.1:23451", "127.0.0.1:23452"]
  ps: ["127.0.0.1:23453"]
training:
  job_dir: /tmp/job
  train_steps: 3000
)";

inline JobConfig GoodConfig() {
  absl::StatusOr<JobConfig> config = ParseJobConfig(kGoodYaml, "cluster.yaml");
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

// Expects InvalidArgument whose message contains every one of `parts`.
inline void ExpectInvalid(const absl::Status& status, const std::vector<std::string>& parts) {
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  for (const std::string& part : parts) EXPECT_THAT(Message(status), HasSubstr(part));
}

}  // namespace config_test
}  // namespace pstrain

#endif  // PSTRAIN_TESTING_CONFIG_TEST_UTIL_H_
