#include "common/coding.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(CodingTest, Fixed32IsLittleEndian) {
  char buf[4];
  EncodeFixed32(buf, 0x04030201u);
  EXPECT_EQ(std::string(buf, 4), std::string("\x01\x02\x03\x04", 4));
  EXPECT_EQ(DecodeFixed32("\x01\x02\x03\x04"), 0x04030201u);
  // Bytes with the high bit set are not sign-extended.
  EXPECT_EQ(DecodeFixed32("\xff\x80\x00\xfe"), 0xfe0080ffu);
}

TEST(CodingTest, Fixed64IsLittleEndian) {
  char buf[8];
  EncodeFixed64(buf, 0x0807060504030201u);
  EXPECT_EQ(std::string(buf, 8), std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  EXPECT_EQ(DecodeFixed64("\x01\x02\x03\x04\x05\x06\x07\x08"), 0x0807060504030201u);
  EXPECT_EQ(DecodeFixed64("\xff\x00\x00\x00\x00\x00\x00\x80"), 0x80000000000000ffu);
}

TEST(CodingTest, Extremes) {
  char buf[8];
  EncodeFixed32(buf, 0);
  EXPECT_EQ(std::string(buf, 4), std::string(4, '\0'));
  EncodeFixed32(buf, std::numeric_limits<uint32_t>::max());
  EXPECT_EQ(std::string(buf, 4), std::string(4, '\xff'));
  EXPECT_EQ(DecodeFixed32(buf), std::numeric_limits<uint32_t>::max());
  EncodeFixed64(buf, 0);
  EXPECT_EQ(std::string(buf, 8), std::string(8, '\0'));
  EncodeFixed64(buf, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(std::string(buf, 8), std::string(8, '\xff'));
  EXPECT_EQ(DecodeFixed64(buf), std::numeric_limits<uint64_t>::max());
}

TEST(CodingTest, Fixed32RoundTrips) {
  std::string s;
  std::vector<uint32_t> values;
  for (int shift = 0; shift < 32; ++shift) {
    const uint32_t v = uint32_t{1} << shift;
    values.insert(values.end(), {v - 1, v, v + 1});
  }
  for (uint32_t v : values) PutFixed32(&s, v);
  ASSERT_EQ(s.size(), 4 * values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(DecodeFixed32(s.data() + 4 * i), values[i]) << i;
  }
}

TEST(CodingTest, Fixed64RoundTrips) {
  std::string s;
  std::vector<uint64_t> values;
  for (int shift = 0; shift < 64; ++shift) {
    const uint64_t v = uint64_t{1} << shift;
    values.insert(values.end(), {v - 1, v, v + 1});
  }
  for (uint64_t v : values) PutFixed64(&s, v);
  ASSERT_EQ(s.size(), 8 * values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(DecodeFixed64(s.data() + 8 * i), values[i]) << i;
  }
}

TEST(CodingTest, PutAppendsAfterWhatIsThere) {
  std::string s = "ab";
  PutFixed32(&s, 0x04030201u);
  PutFixed64(&s, 0x0807060504030201u);
  EXPECT_EQ(s, std::string("ab\x01\x02\x03\x04\x01\x02\x03\x04\x05\x06\x07\x08", 14));
}

TEST(CodingTest, UnalignedAccess) {
  char buf[16] = {};
  for (int at = 0; at < 8; ++at) {
    EncodeFixed64(buf + at, 0x1122334455667788u + at);
    EXPECT_EQ(DecodeFixed64(buf + at), 0x1122334455667788u + at);
    EncodeFixed32(buf + at, 0x11223344u + at);
    EXPECT_EQ(DecodeFixed32(buf + at), 0x11223344u + at);
  }
}

}  // namespace
}  // namespace pstrain
