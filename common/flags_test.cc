#include "common/flags.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::vector<std::string> Normalize(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  NormalizeFlagSpellings(static_cast<int>(argv.size()), argv.data());
  return {argv.begin(), argv.end()};
}

TEST(FlagsTest, HyphenatedNamesBecomeUnderscores) {
  EXPECT_EQ(Normalize({"prog", "--job-dir=gs://a-b/c-d", "--train-steps", "5"}),
            (std::vector<std::string>{"prog", "--job_dir=gs://a-b/c-d", "--train_steps", "5"}));
}

TEST(FlagsTest, ValuesPositionalsAndShortFlagsUntouched) {
  EXPECT_EQ(Normalize({"prog", "-v=1", "a-b", "--lr=-1", "--", "--x-y"}),
            (std::vector<std::string>{"prog", "-v=1", "a-b", "--lr=-1", "--", "--x-y"}));
}

TEST(FlagsTest, TensorFlowNamesBecomePstrainNames) {
  EXPECT_EQ(Normalize({"prog", "--checkpoint-num-steps=50", "--save_checkpoints_steps", "7",
                       "--save-checkpoints-secs=60", "--checkpoint_num_steps_x=1"}),
            (std::vector<std::string>{"prog", "--checkpoint_steps=50", "--checkpoint_steps", "7",
                                      "--checkpoint_secs=60", "--checkpoint_num_steps_x=1"}));
  EXPECT_EQ(CanonicalFlagName("checkpoint_num_steps"), "checkpoint_steps");
  EXPECT_EQ(CanonicalFlagName("train_steps"), "train_steps");
}

}  // namespace
}  // namespace pstrain
