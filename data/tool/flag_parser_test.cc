#include "data/tool/flag_parser.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain::data_tool {
namespace {

struct Flags {
  std::string out = "default";
  int64_t examples = -1;
  uint64_t seed = 1;
  double drift = 0, stddev = 0;
  bool gzip = false;
  std::vector<std::string> sparse;
  FlagParser parser;

  Flags() {
    parser.String("--out", &out);
    parser.Int("--examples", &examples, 1, 99999);
    parser.Int("--seed", &seed);
    parser.Double("--drift", &drift, 0, 1);
    parser.Double("--stddev", &stddev);
    parser.Switch("--gzip", &gzip);
    parser.List("--sparse", &sparse);
  }
  bool Parse(std::vector<std::string> args) { return parser.Parse(args); }
};

TEST(FlagParserTest, SetsTheFlagsGivenInAnyOrderAndLeavesTheRest) {
  Flags f;
  ASSERT_TRUE(f.Parse({"--gzip", "--examples", "7", "--sparse", "a,,b", "--out", "--seed"}));
  EXPECT_EQ(f.out, "--seed");  // a value is the next argument, whatever it looks like
  EXPECT_EQ(f.examples, 7);
  EXPECT_TRUE(f.gzip);
  EXPECT_EQ(f.sparse, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(f.seed, 1u);
  EXPECT_EQ(f.drift, 0);
  EXPECT_TRUE(Flags().Parse({}));
}

TEST(FlagParserTest, ALaterFlagWins) {
  Flags f;
  ASSERT_TRUE(f.Parse({"--examples", "3", "--examples", "4"}));
  EXPECT_EQ(f.examples, 4);
}

TEST(FlagParserTest, RefusesUnknownFlagsMissingValuesAndValuesOutOfRange) {
  EXPECT_FALSE(Flags().Parse({"--bogus", "1"}));
  EXPECT_FALSE(Flags().Parse({"positional"}));
  EXPECT_FALSE(Flags().Parse({"--out"}));
  EXPECT_FALSE(Flags().Parse({"--out=x"}));  // only "--name value"
  EXPECT_FALSE(Flags().Parse({"--examples", "0"}));
  EXPECT_FALSE(Flags().Parse({"--examples", "100000"}));
  EXPECT_FALSE(Flags().Parse({"--examples", "1.5"}));
  EXPECT_FALSE(Flags().Parse({"--seed", "-1"}));  // not a uint64
  EXPECT_FALSE(Flags().Parse({"--drift", "1.01"}));
  EXPECT_FALSE(Flags().Parse({"--drift", "nan"}));
  EXPECT_FALSE(Flags().Parse({"--drift", "x"}));
}

TEST(FlagParserTest, ADoubleWithoutARangeTakesAnyNumber) {
  Flags f;
  ASSERT_TRUE(f.Parse({"--stddev", "-2.5"}));
  EXPECT_EQ(f.stddev, -2.5);
  ASSERT_TRUE(f.Parse({"--stddev", "inf"}));
  EXPECT_TRUE(std::isinf(f.stddev));
  EXPECT_FALSE(f.Parse({"--stddev", "two"}));
}

}  // namespace
}  // namespace pstrain::data_tool
