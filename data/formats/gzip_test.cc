#include "data/formats/gzip.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/data_test_util.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

std::string SampleText() {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += static_cast<char>('a' + (i * 7) % 26);
  return text;
}

TEST(GzipTest, DetectsMagic) {
  EXPECT_TRUE(IsGzip(testutil::Gzip("x")));
  EXPECT_FALSE(IsGzip(""));
  EXPECT_FALSE(IsGzip("\x1f"));
  EXPECT_FALSE(IsGzip(std::string("\x00\x00\x08\x03", 4)));
}

TEST(GzipTest, RoundTrip) {
  const std::string text = SampleText();
  absl::StatusOr<std::string> out = Gunzip(testutil::Gzip(text), "f.gz");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, text);
}

TEST(GzipTest, EmptyPayload) {
  absl::StatusOr<std::string> out = Gunzip(testutil::Gzip(""), "f.gz");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "");
}

TEST(GzipTest, ConcatenatedMembers) {
  absl::StatusOr<std::string> out =
      Gunzip(testutil::Gzip("hello, ") + testutil::Gzip("world"), "f.gz");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "hello, world");
}

TEST(GzipTest, MaybeGunzipPassesRawThrough) {
  absl::StatusOr<std::string> out = MaybeGunzip("raw bytes", "f");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "raw bytes");
}

TEST(GzipTest, EveryTruncationIsDataLoss) {
  const std::string gz = testutil::Gzip(SampleText());
  for (size_t len = 0; len < gz.size(); ++len) {
    absl::StatusOr<std::string> out = Gunzip(gz.substr(0, len), "dir/f.gz");
    ASSERT_FALSE(out.ok()) << "prefix of " << len << " bytes";
    EXPECT_EQ(out.status().code(), absl::StatusCode::kDataLoss) << out.status();
    EXPECT_THAT(out.status().message(), HasSubstr("dir/f.gz")) << out.status();
  }
}

TEST(GzipTest, BadCrcIsDataLoss) {
  std::string gz = testutil::Gzip(SampleText());
  gz[gz.size() - 6] ^= 0x01;  // inside the CRC-32 of the trailer
  absl::StatusOr<std::string> out = Gunzip(gz, "f.gz");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDataLoss) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("f.gz: corrupt gzip data"));
}

TEST(GzipTest, TrailingGarbageIsDataLoss) {
  absl::StatusOr<std::string> out = Gunzip(testutil::Gzip("abc") + "junk", "f.gz");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDataLoss) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("4 unexpected bytes after the gzip stream"));
}

// Every single-bit flip either fails cleanly or (in header fields gzip does
// not protect, such as the timestamp) decodes; none may crash.
TEST(GzipTest, BitFlipsNeverCrash) {
  const std::string text = SampleText();
  const std::string gz = testutil::Gzip(text);
  int failures = 0;
  for (size_t i = 0; i < gz.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string corrupt = gz;
      corrupt[i] ^= static_cast<char>(1 << bit);
      absl::StatusOr<std::string> out = Gunzip(corrupt, "f.gz");
      if (!out.ok()) {
        ++failures;
        EXPECT_EQ(out.status().code(), absl::StatusCode::kDataLoss) << out.status();
      }
    }
  }
  EXPECT_GT(failures, static_cast<int>(gz.size()));
}

// What GzipWriter writes, gunzip reads back; appended in any pieces, empty
// or over several output buffers.
TEST(GzipTest, GzipWriterWritesWhatGunzipReads) {
  std::string big;
  uint64_t x = 1;
  for (int i = 0; i < 400000; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    absl::StrAppend(&big, x >> 50, i % 7 == 0 ? "\n" : "\t");
  }
  for (const std::string& text : {std::string(), SampleText(), big}) {
    MemEnv env;
    absl::StatusOr<std::unique_ptr<WritableFile>> file = env.NewWritableFile("/d/t.gz");
    ASSERT_TRUE(file.ok());
    GzipWriter writer(file->get(), "/d/t.gz");
    for (size_t at = 0; at < text.size(); at += 100003) {
      ASSERT_TRUE(writer.Append(std::string_view(text).substr(at, 100003)).ok());
    }
    ASSERT_TRUE(writer.Close().ok());
    absl::StatusOr<std::string> gz = env.ReadFile("/d/t.gz");
    ASSERT_TRUE(gz.ok()) << gz.status();
    EXPECT_TRUE(IsGzip(*gz));
    if (!text.empty()) {
      EXPECT_LT(gz->size(), text.size());
    }
    absl::StatusOr<std::string> back = Gunzip(*gz, "t.gz");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == text) << back->size() << " vs " << text.size();
  }
}

}  // namespace
}  // namespace pstrain
