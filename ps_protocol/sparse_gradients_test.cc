#include "ps_protocol/sparse_gradients.h"

#include <cstring>
#include <random>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::vector<uint32_t> Offsets(const std::string& bytes) {
  std::vector<uint32_t> v(bytes.size() / sizeof(uint32_t));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

TEST(TopKTest, CountIsACeilingOfAtLeastOne) {
  EXPECT_EQ(TopKCount(0, 0.01), 0);
  EXPECT_EQ(TopKCount(10, 0.01), 1);
  EXPECT_EQ(TopKCount(1000, 0.01), 10);
  EXPECT_EQ(TopKCount(1001, 0.01), 11);
  EXPECT_EQ(TopKCount(5, 1.0), 5);
}

TEST(TopKTest, SendsTheLargestAndKeepsTheRestForLater) {
  TopKCompressor c(6, 0.34);  // k = 3
  ASSERT_EQ(c.k(), 3);
  std::string indices, values;
  const float g1[] = {0.1f, -5, 0.2f, 3, -0.3f, 4};
  c.Compress(g1, /*bf16=*/false, &indices, &values);
  EXPECT_EQ(Offsets(indices), (std::vector<uint32_t>{1, 3, 5}));
  EXPECT_EQ(Floats(values), (std::vector<float>{-5, 3, 4}));
  EXPECT_NEAR(c.residual_l1(), 0.6, 1e-6);
  // Error feedback: the small ones add up until they are sent.
  const float g2[] = {0.1f, 0, 0.2f, 0, -0.3f, 0};
  c.Compress(g2, false, &indices, &values);
  EXPECT_EQ(Offsets(indices), (std::vector<uint32_t>{0, 2, 4}));
  const std::vector<float> sent = Floats(values);
  EXPECT_FLOAT_EQ(sent[0], 0.2f);
  EXPECT_FLOAT_EQ(sent[1], 0.4f);
  EXPECT_FLOAT_EQ(sent[2], -0.6f);
  EXPECT_NEAR(c.residual_l1(), 0.0, 1e-6);
}

TEST(TopKTest, EverythingArrivesEventually) {
  // Sum of what is sent + the residual == sum of the gradients, per entry.
  std::mt19937 random(7);
  std::normal_distribution<float> normal;
  const int64_t n = 1000;
  TopKCompressor c(n, 0.01);
  std::vector<double> pushed(n, 0), received(n, 0);
  std::vector<float> g(n), dense;
  std::string indices, values;
  for (int step = 0; step < 50; ++step) {
    for (int64_t i = 0; i < n; ++i) pushed[i] += g[i] = normal(random);
    c.Compress(g.data(), /*bf16=*/step % 2 == 1, &indices, &values);
    std::vector<float> v;
    if (step % 2 == 1) {  // bfloat16 values
      std::vector<uint16_t> packed(values.size() / 2);
      std::memcpy(packed.data(), values.data(), values.size());
      for (uint16_t p : packed) {
        const uint32_t bits = static_cast<uint32_t>(p) << 16;
        float f;
        std::memcpy(&f, &bits, sizeof(f));
        v.push_back(f);
      }
    } else {
      v = Floats(values);
    }
    ASSERT_EQ(v.size(), 10u);
    ASSERT_TRUE(ScatterSparse(indices, v, n, &dense).ok());
    for (int64_t i = 0; i < n; ++i) received[i] += dense[i];
  }
  double unsent = 0, gap = 0;
  for (int64_t i = 0; i < n; ++i) gap += std::fabs(pushed[i] - received[i]);
  unsent = c.residual_l1();
  EXPECT_NEAR(gap, unsent, 1e-2 * unsent + 1e-3);
  c.Reset();
  EXPECT_EQ(c.residual_l1(), 0.0);
}

TEST(ScatterSparseTest, BadOffsetsAreRefused) {
  std::vector<float> dense;
  auto bytes = [](std::vector<uint32_t> v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(uint32_t));
  };
  const std::vector<float> two = {1, 2};
  ASSERT_TRUE(ScatterSparse(bytes({1, 3}), two, 4, &dense).ok());
  EXPECT_EQ(dense, (std::vector<float>{0, 1, 0, 2}));
  EXPECT_TRUE(ScatterSparse("", {}, 3, &dense).ok());
  for (const std::string& bad : {bytes({3, 1}), bytes({1, 1}), bytes({1, 4}), bytes({1}),
                                 bytes({0, 1, 2}), bytes({1, 3}).substr(0, 7)}) {
    absl::Status s = ScatterSparse(bad, two, 4, &dense);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  }
}

}  // namespace
}  // namespace pstrain
