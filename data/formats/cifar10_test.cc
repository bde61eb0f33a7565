#include "data/formats/cifar10.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/env.h"
#include "data/formats/cifar10_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/data_test_util.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;
using testutil::Gzip;

// Pixel value of record `r`, channel `c`, position p = y * 32 + x. Distinct
// for the three channels of a pixel, so a wrong transposition shows.
uint8_t Value(int r, int c, int p) { return static_cast<uint8_t>(r * 101 + c * 85 + p * 3); }

// One record in the file's layout: label, then the R, G and B planes.
std::string Record(int r, uint8_t label) {
  std::string record(1, static_cast<char>(label));
  for (int c = 0; c < 3; ++c) {
    for (int p = 0; p < 1024; ++p) record.push_back(static_cast<char>(Value(r, c, p)));
  }
  return record;
}

// A batch of `n` records numbered from `first`, with label r % 10.
std::string CifarRecords(int first, int n) {
  std::string batch;
  for (int r = first; r < first + n; ++r) batch += Record(r, static_cast<uint8_t>(r % 10));
  return batch;
}

class Cifar10Test : public ::testing::Test {
 protected:
  void Write(const std::string& path, const std::string& contents) {
    ASSERT_TRUE(env_.WriteFileAtomic(path, contents).ok());
  }
  void ExpectError(const std::vector<std::string>& paths, absl::StatusCode code,
                   const std::string& substring) {
    absl::StatusOr<Dataset> dataset = ReadCifar10Files(&env_, paths);
    ASSERT_FALSE(dataset.ok());
    EXPECT_EQ(dataset.status().code(), code) << dataset.status();
    EXPECT_THAT(dataset.status().message(), HasSubstr(substring));
  }
  // Checks that `dataset` holds records [first, first + n) of CifarRecords().
  void ExpectRecords(const Dataset& dataset, int first, int n) {
    ASSERT_EQ(dataset.size(), n);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(dataset.labels[r], (first + r) % 10);
      const uint8_t* image = dataset.images.data() + r * dataset.example_size();
      for (int y = 0; y < 32; ++y) {
        for (int x = 0; x < 32; ++x) {
          for (int c = 0; c < 3; ++c) {
            ASSERT_EQ(image[(y * 32 + x) * 3 + c], Value(first + r, c, y * 32 + x))
                << "record " << r << " y " << y << " x " << x << " c " << c;
          }
        }
      }
    }
  }

  MemEnv env_;
};

TEST_F(Cifar10Test, ConvertsChwToHwcPixelByPixel) {
  Write("c/b.bin", CifarRecords(0, 3));
  absl::StatusOr<Dataset> dataset = ReadCifar10Files(&env_, {"c/b.bin"});
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->height, 32);
  EXPECT_EQ(dataset->width, 32);
  EXPECT_EQ(dataset->channels, 3);
  EXPECT_EQ(dataset->images.size(), 3u * 3072);
  ExpectRecords(*dataset, 0, 3);
}

TEST_F(Cifar10Test, ConcatenatesFilesInOrder) {
  Write("c/a.bin", CifarRecords(0, 2));
  Write("c/b.bin", Gzip(CifarRecords(2, 3)));
  absl::StatusOr<Dataset> dataset = ReadCifar10Files(&env_, {"c/a.bin", "c/b.bin"});
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ExpectRecords(*dataset, 0, 5);
}

TEST_F(Cifar10Test, SizeNotMultipleOfRecord) {
  Write("c/b.bin", CifarRecords(0, 2) + "xyz");
  ExpectError({"c/b.bin"}, absl::StatusCode::kDataLoss,
              "c/b.bin: size 6149 is not a multiple of the 3073-byte CIFAR-10 record (2 records "
              "and 3 extra bytes)");
}

TEST_F(Cifar10Test, EveryTruncationIsAnError) {
  const std::string batch = CifarRecords(0, 2);
  for (size_t len = 0; len < batch.size(); ++len) {
    if (len == static_cast<size_t>(cifar10::kRecordSize)) continue;  // one whole record
    Write("c/b.bin", batch.substr(0, len));
    EXPECT_EQ(ReadCifar10Files(&env_, {"c/b.bin"}).status().code(), absl::StatusCode::kDataLoss)
        << len;
  }
}

TEST_F(Cifar10Test, EmptyFile) {
  Write("c/b.bin", "");
  ExpectError({"c/b.bin"}, absl::StatusCode::kDataLoss, "c/b.bin: empty file");
}

TEST_F(Cifar10Test, LabelOutOfRange) {
  Write("c/b.bin", CifarRecords(0, 2) + Record(2, 10));
  ExpectError({"c/b.bin"}, absl::StatusCode::kInvalidArgument,
              "c/b.bin: label 10 of record 2 (byte offset 6146) is outside [0, 9]");
}

TEST_F(Cifar10Test, MissingFileNamesPath) {
  Write("c/a.bin", CifarRecords(0, 1));
  ExpectError({"c/a.bin", "c/b.bin"}, absl::StatusCode::kNotFound, "c/b.bin: no such file");
}

TEST_F(Cifar10Test, NoPaths) { ExpectError({}, absl::StatusCode::kInvalidArgument, "no CIFAR-10"); }

TEST_F(Cifar10Test, TruncatedGzip) {
  std::string gz = Gzip(CifarRecords(0, 2));
  Write("c/b.bin", gz.substr(0, gz.size() - 3));
  ExpectError({"c/b.bin"}, absl::StatusCode::kDataLoss, "c/b.bin: truncated gzip stream");
}

TEST_F(Cifar10Test, LoadTrainFromDirectory) {
  for (int i = 1; i <= 5; ++i) {
    Write("cifar/data_batch_" + std::to_string(i) + ".bin", CifarRecords(2 * (i - 1), 2));
  }
  Write("cifar/test_batch.bin", CifarRecords(100, 1));
  absl::StatusOr<Dataset> train = LoadCifar10(&env_, "cifar", Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  ExpectRecords(*train, 0, 10);
  absl::StatusOr<Dataset> test = LoadCifar10(&env_, "cifar", Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  ExpectRecords(*test, 100, 1);
}

TEST_F(Cifar10Test, LoadFromTarballSubdirectory) {
  Write("cifar/cifar-10-batches-bin/test_batch.bin", CifarRecords(7, 3));
  absl::StatusOr<Dataset> test = LoadCifar10(&env_, "cifar", Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  ExpectRecords(*test, 7, 3);
}

TEST_F(Cifar10Test, LoadMissingLaterBatchIsNotFound) {
  for (int i : {1, 2, 4, 5})
    Write("cifar/data_batch_" + std::to_string(i) + ".bin", CifarRecords(0, 1));
  absl::StatusOr<Dataset> train = LoadCifar10(&env_, "cifar", Split::kTrain);
  EXPECT_EQ(train.status().code(), absl::StatusCode::kNotFound) << train.status();
  EXPECT_THAT(train.status().message(), HasSubstr("cifar/data_batch_3.bin: no such file"));
}

TEST_F(Cifar10Test, LoadNothingThereNamesBothPlaces) {
  absl::StatusOr<Dataset> train = LoadCifar10(&env_, "cifar", Split::kTrain);
  EXPECT_EQ(train.status().code(), absl::StatusCode::kNotFound) << train.status();
  EXPECT_THAT(train.status().message(),
              HasSubstr("no CIFAR-10 train data in cifar (no such directory) or "
                        "cifar/cifar-10-batches-bin: looked for data_batch_1.bin, "
                        "data_batch_2.bin, data_batch_3.bin, data_batch_4.bin, data_batch_5.bin"));
  EXPECT_THAT(train.status().message(), HasSubstr("--data_dir"));
}

}  // namespace
}  // namespace pstrain
