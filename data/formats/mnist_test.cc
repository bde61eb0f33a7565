#include "data/formats/mnist.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/data_test_util.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testutil::Gzip;
using testutil::IdxImages;
using testutil::IdxLabels;

constexpr uint32_t kCount = 3, kRows = 4, kCols = 5;

std::vector<uint8_t> Pixels(uint32_t count = kCount) {
  std::vector<uint8_t> pixels;
  for (uint32_t i = 0; i < count * kRows * kCols; ++i)
    pixels.push_back(static_cast<uint8_t>(i * 13));
  return pixels;
}

std::string Images() { return IdxImages(kCount, kRows, kCols, Pixels()); }
std::string Labels() { return IdxLabels({7, 0, 9}); }

class MnistTest : public ::testing::Test {
 protected:
  void Write(const std::string& path, const std::string& contents) {
    ASSERT_TRUE(env_.WriteFileAtomic(path, contents).ok());
  }
  absl::StatusOr<Dataset> Read() { return ReadIdx(&env_, "d/images", "d/labels"); }

  void ExpectSample(const absl::StatusOr<Dataset>& dataset) {
    ASSERT_TRUE(dataset.ok()) << dataset.status();
    EXPECT_EQ(dataset->size(), 3);
    EXPECT_EQ(dataset->height, 4);
    EXPECT_EQ(dataset->width, 5);
    EXPECT_EQ(dataset->channels, 1);
    EXPECT_EQ(dataset->example_size(), 20);
    EXPECT_EQ(dataset->images, Pixels());
    EXPECT_THAT(dataset->labels, ElementsAre(7, 0, 9));
  }

  void ExpectError(absl::StatusCode code, const std::string& substring) {
    absl::StatusOr<Dataset> dataset = Read();
    ASSERT_FALSE(dataset.ok());
    EXPECT_EQ(dataset.status().code(), code) << dataset.status();
    EXPECT_THAT(dataset.status().message(), HasSubstr(substring));
  }

  MemEnv env_;
};

TEST_F(MnistTest, RoundTripRaw) {
  Write("d/images", Images());
  Write("d/labels", Labels());
  ExpectSample(Read());
}

TEST_F(MnistTest, RoundTripGzip) {
  Write("d/images", Gzip(Images()));
  Write("d/labels", Gzip(Labels()));
  ExpectSample(Read());
}

TEST_F(MnistTest, EmptyButValidFiles) {
  Write("d/images", IdxImages(0, kRows, kCols, {}));
  Write("d/labels", IdxLabels({}));
  absl::StatusOr<Dataset> dataset = Read();
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->size(), 0);
}

TEST_F(MnistTest, MissingFileNamesPath) {
  Write("d/labels", Labels());
  ExpectError(absl::StatusCode::kNotFound, "d/images: no such file");
}

TEST_F(MnistTest, WrongMagic) {
  std::string images = Images();
  images.replace(0, 4, "\x12\x34\x56\x78");
  Write("d/images", images);
  Write("d/labels", Labels());
  ExpectError(absl::StatusCode::kInvalidArgument,
              "d/images: bad magic 0x12345678, expected 0x00000803 (idx3 images)");
}

TEST_F(MnistTest, LabelsAndImagesSwapped) {
  Write("d/images", Labels());
  Write("d/labels", Images());
  ExpectError(absl::StatusCode::kInvalidArgument,
              "d/images: bad magic 0x00000801, expected 0x00000803");
}

TEST_F(MnistTest, WrongLabelsMagicInGzip) {
  Write("d/images", Images());
  Write("d/labels", Gzip(Images()));
  ExpectError(absl::StatusCode::kInvalidArgument,
              "d/labels: bad magic 0x00000803, expected 0x00000801 (idx1 labels)");
}

TEST_F(MnistTest, TruncatedImagesHeader) {
  Write("d/images", Images().substr(0, 10));
  Write("d/labels", Labels());
  ExpectError(absl::StatusCode::kDataLoss, "d/images: truncated header (10 bytes");
}

TEST_F(MnistTest, TruncatedLabelsHeader) {
  Write("d/images", Images());
  Write("d/labels", Labels().substr(0, 5));
  ExpectError(absl::StatusCode::kDataLoss, "d/labels: truncated header (5 bytes");
}

TEST_F(MnistTest, TruncatedPixels) {
  Write("d/images", Images().substr(0, 16 + 59));
  Write("d/labels", Labels());
  ExpectError(absl::StatusCode::kDataLoss,
              "d/images: truncated pixels (59 bytes, the header promises 60)");
}

TEST_F(MnistTest, TruncatedLabels) {
  Write("d/images", Images());
  Write("d/labels", Labels().substr(0, 10));
  ExpectError(absl::StatusCode::kDataLoss,
              "d/labels: truncated labels (2 bytes, the header promises 3)");
}

TEST_F(MnistTest, TrailingBytes) {
  Write("d/images", Images() + "xy");
  Write("d/labels", Labels());
  ExpectError(absl::StatusCode::kDataLoss, "d/images: 2 unexpected bytes");
}

TEST_F(MnistTest, TruncatedGzipStream) {
  std::string gz = Gzip(Images());
  Write("d/images", gz.substr(0, gz.size() / 2));
  Write("d/labels", Labels());
  ExpectError(absl::StatusCode::kDataLoss, "d/images: truncated gzip stream");
}

TEST_F(MnistTest, CountMismatch) {
  Write("d/images", Images());
  Write("d/labels", IdxLabels({1, 2}));
  ExpectError(absl::StatusCode::kInvalidArgument,
              "d/images holds 3 images but d/labels holds 2 labels");
}

TEST_F(MnistTest, LabelOutOfRange) {
  Write("d/images", Images());
  Write("d/labels", IdxLabels({1, 10, 2}));
  ExpectError(absl::StatusCode::kInvalidArgument,
              "d/labels: label 10 at index 1 is outside [0, 9]");
}

TEST_F(MnistTest, ImplausibleDimensions) {
  Write("d/images", IdxImages(0, 0, kCols, {}));
  Write("d/labels", IdxLabels({}));
  ExpectError(absl::StatusCode::kDataLoss, "d/images: implausible image size 0x5");
}

TEST_F(MnistTest, HugeCountIsTruncationNotOverflow) {
  Write("d/images", IdxImages(0xffffffff, 0x8000, 0x8000, Pixels()));
  Write("d/labels", Labels());
  ExpectError(absl::StatusCode::kDataLoss, "d/images: truncated pixels");
}

// Every prefix of a valid file, raw or compressed, is an error, never a crash
// or a silently shorter dataset.
TEST_F(MnistTest, EveryTruncationIsAnError) {
  Write("d/labels", Labels());
  const std::string raw = Images();
  const std::string gz = Gzip(raw);
  for (const std::string* file : {&raw, &gz}) {
    for (size_t len = 0; len < file->size(); ++len) {
      Write("d/images", file->substr(0, len));
      absl::StatusOr<Dataset> dataset = Read();
      EXPECT_FALSE(dataset.ok()) << len;
    }
  }
}

// Any single-bit change to the header makes the file inconsistent (magic,
// count and dimensions all constrain the size), so each one is refused.
TEST_F(MnistTest, HeaderByteFlipsNeverCrash) {
  Write("d/labels", Labels());
  const std::string raw = Images();
  for (int i = 0; i < 16; ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string corrupt = raw;
      corrupt[i] ^= static_cast<char>(1 << bit);
      Write("d/images", corrupt);
      EXPECT_FALSE(Read().ok()) << "byte " << i << " bit " << bit;
    }
  }
}

class LoadMnistTest : public MnistTest {};

TEST_F(LoadMnistTest, FindsGzipTrainFiles) {
  Write("mnist/train-images-idx3-ubyte.gz", Gzip(Images()));
  Write("mnist/train-labels-idx1-ubyte.gz", Gzip(Labels()));
  ExpectSample(LoadMnist(&env_, "mnist", Split::kTrain));
}

TEST_F(LoadMnistTest, FindsRawTestFiles) {
  Write("mnist/t10k-images-idx3-ubyte", Images());
  Write("mnist/t10k-labels-idx1-ubyte", Labels());
  ExpectSample(LoadMnist(&env_, "mnist/", Split::kTest));
}

TEST_F(LoadMnistTest, MixedCompression) {
  Write("mnist/t10k-images-idx3-ubyte.gz", Gzip(Images()));
  Write("mnist/t10k-labels-idx1-ubyte", Labels());
  ExpectSample(LoadMnist(&env_, "mnist", Split::kTest));
}

TEST_F(LoadMnistTest, PrefersGzipWhenBothExist) {
  // As an interrupted gunzip leaves things: a truncated raw file beside the .gz.
  Write("mnist/train-images-idx3-ubyte.gz", Gzip(Images()));
  Write("mnist/train-images-idx3-ubyte", Images().substr(0, 30));
  Write("mnist/train-labels-idx1-ubyte.gz", Gzip(Labels()));
  ExpectSample(LoadMnist(&env_, "mnist", Split::kTrain));
}

TEST_F(LoadMnistTest, SplitsAreSeparate) {
  Write("mnist/train-images-idx3-ubyte.gz", Gzip(Images()));
  Write("mnist/train-labels-idx1-ubyte.gz", Gzip(Labels()));
  absl::StatusOr<Dataset> test = LoadMnist(&env_, "mnist", Split::kTest);
  EXPECT_EQ(test.status().code(), absl::StatusCode::kNotFound) << test.status();
}

TEST_F(LoadMnistTest, MissingFilesNameDirectoryAndNames) {
  Write("mnist/train-images-idx3-ubyte.gz", Gzip(Images()));
  absl::StatusOr<Dataset> dataset = LoadMnist(&env_, "mnist", Split::kTrain);
  ASSERT_EQ(dataset.status().code(), absl::StatusCode::kNotFound) << dataset.status();
  EXPECT_THAT(dataset.status().message(),
              HasSubstr("no MNIST train labels in mnist: looked for "
                        "train-labels-idx1-ubyte.gz, train-labels-idx1-ubyte"));
  EXPECT_THAT(dataset.status().message(), HasSubstr("pass --data_dir"));
  EXPECT_THAT(dataset.status().message(), Not(HasSubstr("apt-get")));
}

TEST_F(LoadMnistTest, MissingDirectorySaysSo) {
  absl::StatusOr<Dataset> dataset = LoadMnist(&env_, "nowhere", Split::kTest);
  ASSERT_EQ(dataset.status().code(), absl::StatusCode::kNotFound) << dataset.status();
  EXPECT_THAT(dataset.status().message(),
              HasSubstr("no MNIST test images in nowhere (no such directory): looked for "
                        "t10k-images-idx3-ubyte.gz, t10k-images-idx3-ubyte"));
}

TEST_F(LoadMnistTest, DefaultDirectorySuggestsPackage) {
  absl::StatusOr<Dataset> dataset = LoadMnist(&env_, kDefaultFashionMnistDir, Split::kTrain);
  ASSERT_EQ(dataset.status().code(), absl::StatusCode::kNotFound) << dataset.status();
  EXPECT_THAT(dataset.status().message(), HasSubstr("apt-get install dataset-fashion-mnist"));
  EXPECT_THAT(dataset.status().message(), HasSubstr("--data_dir"));
}

// The real Fashion-MNIST from Debian's dataset-fashion-mnist, when installed.
TEST(RealFashionMnistTest, LoadsBothSplits) {
  Env* env = Env::Default();
  if (!env->FileExists(kDefaultFashionMnistDir)) {
    GTEST_SKIP() << kDefaultFashionMnistDir
                 << " not present (apt-get install dataset-fashion-mnist)";
  }
  absl::StatusOr<Dataset> train = LoadMnist(env, kDefaultFashionMnistDir, Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  absl::StatusOr<Dataset> test = LoadMnist(env, kDefaultFashionMnistDir, Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(train->size(), 60000);
  EXPECT_EQ(test->size(), 10000);
  for (const Dataset* d : {&*train, &*test}) {
    EXPECT_EQ(d->height, 28);
    EXPECT_EQ(d->width, 28);
    EXPECT_EQ(d->channels, 1);
    EXPECT_EQ(static_cast<int64_t>(d->images.size()), d->size() * 784);
    // Fashion-MNIST is balanced: every class appears size / 10 times.
    std::vector<int64_t> counts(10);
    for (float label : d->labels) ++counts[static_cast<int>(label)];
    for (int64_t count : counts) EXPECT_EQ(count, d->size() / 10);
  }
}

}  // namespace
}  // namespace pstrain
