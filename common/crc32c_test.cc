#include "common/crc32c.h"

#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

// Test vectors from RFC 3720 (iSCSI), B.4, and the standard check value.
TEST(Crc32cTest, KnownValues) {
  EXPECT_EQ(crc32c::Value("123456789", 9), 0xE3069283u);
  const std::string zeros(32, '\0');
  EXPECT_EQ(crc32c::Value(zeros.data(), zeros.size()), 0x8A9136AAu);
  const std::string ones(32, '\xff');
  EXPECT_EQ(crc32c::Value(ones.data(), ones.size()), 0x62A8AB43u);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<char>(i);
  EXPECT_EQ(crc32c::Value(ascending.data(), ascending.size()), 0x46DD794Eu);
  EXPECT_EQ(crc32c::Value("", 0), 0u);
}

TEST(Crc32cTest, ExtendEqualsWholeAtEverySplit) {
  std::string data;
  for (int i = 0; i < 100; ++i) data.push_back(static_cast<char>(i * 37 + 11));
  const uint32_t whole = crc32c::Value(data.data(), data.size());
  for (size_t split = 0; split <= data.size(); ++split) {
    EXPECT_EQ(
        crc32c::Extend(crc32c::Value(data.data(), split), data.data() + split, data.size() - split),
        whole)
        << split;
  }
}

TEST(Crc32cTest, EverySingleBitFlipChangesTheValue) {
  std::string data = "parameter server checkpoint shard";
  const uint32_t crc = crc32c::Value(data.data(), data.size());
  for (size_t i = 0; i < data.size() * 8; ++i) {
    std::string flipped = data;
    flipped[i / 8] = static_cast<char>(flipped[i / 8] ^ (1 << (i % 8)));
    EXPECT_NE(crc32c::Value(flipped.data(), flipped.size()), crc) << i;
  }
}

TEST(Crc32cTest, PortableFormAgreesWithTheFastOne) {
  EXPECT_EQ(crc32c::internal::ExtendPortable(0, "123456789", 9), 0xE3069283u);
  std::string data;
  uint32_t x = 1;
  for (int i = 0; i < 1000; ++i) {
    x = x * 1103515245u + 12345u;
    data.push_back(static_cast<char>(x >> 24));
  }
  for (size_t n : {0, 1, 7, 8, 9, 63, 64, 65, 1000}) {
    EXPECT_EQ(crc32c::internal::ExtendPortable(0x12345678u, data.data(), n),
              crc32c::Extend(0x12345678u, data.data(), n))
        << n;
  }
}

TEST(Crc32cTest, MaskRoundTripsAndDiffers) {
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu}) {
    EXPECT_EQ(crc32c::Unmask(crc32c::Mask(crc)), crc);
    EXPECT_NE(crc32c::Mask(crc), crc);
  }
}

}  // namespace
}  // namespace pstrain
