#include "ps_protocol/bf16.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(Bf16Test, ExactValuesRoundTrip) {
  for (float f :
       {0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, 65536.0f, std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(Bf16ToFloat(FloatToBf16(f)), f) << f;
  }
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
}

TEST(Bf16Test, RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even (1).
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 1.0f / 256)), 1.0f);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6.
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 3.0f / 256)), 1.0f + 1.0f / 64);
  // Just above halfway rounds up.
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 1.0f / 256 + 1.0f / 65536)), 1.0f + 1.0f / 128);
}

TEST(Bf16Test, RelativeErrorAtMostTwoToTheMinusEight) {
  std::vector<float> in(10000), back(10000);
  std::vector<uint16_t> h(10000);
  for (int i = 0; i < 10000; ++i) in[i] = std::sin(0.37f * i) * std::pow(10.0f, (i % 13) - 6);
  FloatsToBf16(in.data(), 10000, h.data());
  Bf16ToFloats(h.data(), 10000, back.data());
  for (int i = 0; i < 10000; ++i) {
    EXPECT_LE(std::abs(back[i] - in[i]), std::abs(in[i]) * (1.0f / 256)) << in[i];
  }
}

}  // namespace
}  // namespace pstrain
