#include <stdlib.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "common/env.h"
#include "common/record_reader.h"
#include "common/record_writer.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"

namespace pstrain {
namespace {

std::string WriteAll(const std::vector<std::string>& records) {
  MemEnv env;
  auto file = env.NewWritableFile("/r");
  EXPECT_TRUE(file.ok());
  RecordWriter writer(file->get());
  for (const std::string& r : records) EXPECT_TRUE(writer.WriteRecord(r).ok());
  EXPECT_TRUE((*file)->Close().ok());
  return *env.ReadFile("/r");
}

std::vector<std::string> Records() {
  return {"", "a", std::string(1000, 'z'), "brain.Event:2", std::string(70000, '\x7f')};
}

TEST(RecordTest, RoundTripAndCleanEnd) {
  const std::string contents = WriteAll(Records());
  RecordReader reader(contents, "/r");
  for (const std::string& want : Records()) {
    auto got = reader.ReadRecord();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want);
  }
  auto end = reader.ReadRecord();
  EXPECT_TRUE(absl::IsOutOfRange(end.status())) << end.status();
  EXPECT_EQ(reader.offset(), contents.size());
}

TEST(RecordTest, FramingIsTensorFlows) {
  const std::string framed = RecordWriter::Frame("abc");
  ASSERT_EQ(framed.size(), 8u + 4 + 3 + 4);
  EXPECT_EQ(framed.substr(0, 8), std::string("\x03\0\0\0\0\0\0\0", 8));  // little-endian length
  auto le32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(framed[at + i]);
    return v;
  };
  EXPECT_EQ(le32(8), crc32c::Mask(crc32c::Value(framed.data(), 8)));
  EXPECT_EQ(framed.substr(12, 3), "abc");
  EXPECT_EQ(le32(15), crc32c::Mask(crc32c::Value("abc", 3)));
}

TEST(RecordTest, EveryTruncationIsDataLossExceptBetweenRecords) {
  const std::string contents = WriteAll({"first", "second record", "3"});
  std::vector<size_t> boundaries = {0};
  {
    RecordReader r(contents, "/r");
    while (r.ReadRecord().ok()) boundaries.push_back(r.offset());
  }
  for (size_t cut = 0; cut < contents.size(); ++cut) {
    const std::string part = contents.substr(0, cut);
    RecordReader reader(part, "/r");
    absl::Status last;
    while (true) {
      auto got = reader.ReadRecord();
      if (!got.ok()) {
        last = got.status();
        break;
      }
    }
    const bool boundary = std::find(boundaries.begin(), boundaries.end(), cut) != boundaries.end();
    if (boundary) {
      EXPECT_TRUE(absl::IsOutOfRange(last)) << cut << ": " << last;
    } else {
      EXPECT_TRUE(absl::IsDataLoss(last)) << cut << ": " << last;
      EXPECT_NE(last.message().find("offset " + std::to_string(reader.offset())), std::string::npos)
          << last;
    }
  }
}

TEST(RecordTest, EveryBitFlipIsDetectedWithTheOffset) {
  const std::string contents = WriteAll({"one", "two two"});
  const size_t second = RecordWriter::Frame("one").size();
  for (size_t bit = 0; bit < contents.size() * 8; ++bit) {
    std::string damaged = contents;
    damaged[bit / 8] = static_cast<char>(damaged[bit / 8] ^ (1 << (bit % 8)));
    RecordReader reader(damaged, "/events");
    absl::Status status;
    while (true) {
      auto got = reader.ReadRecord();
      if (!got.ok()) {
        status = got.status();
        break;
      }
    }
    ASSERT_TRUE(absl::IsDataLoss(status)) << bit << ": " << status;
    const size_t at = bit / 8 < second ? 0 : second;
    EXPECT_NE(status.message().find("/events: record at offset " + std::to_string(at)),
              std::string::npos)
        << status;
  }
}

TEST(RecordTest, WritesToARealFile) {
  Env* env = Env::Default();
  const std::string dir = testing_util::TempDirRemovedAtExit("pstrain_record_test");
  const std::string path = JoinPath(dir, "events.out.tfevents.test");
  auto file = env->NewWritableFile(path);
  ASSERT_TRUE(file.ok());
  RecordWriter writer(file->get());
  ASSERT_TRUE(writer.WriteRecord("x").ok());
  ASSERT_TRUE((*file)->Flush().ok());
  ASSERT_TRUE(writer.WriteRecord("yz").ok());
  ASSERT_TRUE((*file)->Close().ok());
  const std::string contents = *env->ReadFile(path);
  RecordReader reader(contents, path);
  EXPECT_EQ(*reader.ReadRecord(), "x");
  EXPECT_EQ(*reader.ReadRecord(), "yz");
}

}  // namespace
}  // namespace pstrain
