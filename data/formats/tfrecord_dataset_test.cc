#include "data/formats/tfrecord_dataset.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/record_writer.h"
#include "data/formats/cifar10.h"
#include "data/formats/convert.h"
#include "data/load.h"
#include "gtest/gtest.h"
#include "testing/data_test_util.h"

namespace pstrain {
namespace {

Dataset Sample(int64_t n, int h, int w, int c) {
  Dataset d = testutil::MakeDataset(n, h, w, c);
  for (int64_t i = 0; i < n; ++i) d.labels[i] = static_cast<int32_t>((i * 3) % 10);
  return d;
}

// Protocol buffer wire format by hand: varints, tags, length-delimited fields.
std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string Field(int number, const std::string& bytes) {  // wire type 2
  return Varint(static_cast<uint64_t>(number) << 3 | 2) + Varint(bytes.size()) + bytes;
}
// Feature{int64_list (3): Int64List{value (1), packed}}.
std::string Int64Feature(int64_t v) { return Field(3, Field(1, Varint(v))); }
// Feature{bytes_list (1): BytesList{value (1)}}.
std::string BytesFeature(const std::string& v) { return Field(1, Field(1, v)); }
// A Features.feature map entry (field 1): key (1), value (2).
std::string Entry(const std::string& key, const std::string& feature) {
  return Field(1, Field(1, key) + Field(2, feature));
}

TEST(TfRecordDatasetTest, ReadsAHandBuiltMnistExampleFieldByField) {
  // An Example as convert_to_records.py writes it: 2x3x1 image_raw, label 7.
  const std::string pixels = {1, 2, 3, 4, 5, static_cast<char>(250)};
  const std::string features = Entry("height", Int64Feature(2)) + Entry("width", Int64Feature(3)) +
                               Entry("depth", Int64Feature(1)) + Entry("label", Int64Feature(7)) +
                               Entry("image_raw", BytesFeature(pixels));
  const std::string example = Field(1, features);  // Example.features (1)
  MemEnv env;
  ASSERT_TRUE(env.WriteFileAtomic("/d/train.tfrecords", RecordWriter::Frame(example)).ok());
  absl::StatusOr<Dataset> d = ReadExampleFiles(&env, {"/d/train.tfrecords"});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->size(), 1);
  EXPECT_EQ(d->height, 2);
  EXPECT_EQ(d->width, 3);
  EXPECT_EQ(d->channels, 1);
  EXPECT_EQ(d->labels[0], 7);
  EXPECT_EQ(std::string(d->images.begin(), d->images.end()), pixels);
}

TEST(TfRecordDatasetTest, ReadsAHandBuiltCifarExampleAsHwc) {
  // generate_cifar10_tfrecords.py: "image" holds CIFAR's CHW bytes, "label".
  std::string chw(3072, '\0');
  for (int i = 0; i < 3072; ++i) chw[i] = static_cast<char>(i % 251);
  const std::string example =
      Field(1, Entry("image", BytesFeature(chw)) + Entry("label", Int64Feature(3)));
  MemEnv env;
  ASSERT_TRUE(env.WriteFileAtomic("/d/eval.tfrecords", RecordWriter::Frame(example)).ok());
  absl::StatusOr<Dataset> d = ReadExampleFiles(&env, {"/d/eval.tfrecords"});
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 1);
  EXPECT_EQ(d->height, 32);
  EXPECT_EQ(d->width, 32);
  EXPECT_EQ(d->channels, 3);
  EXPECT_EQ(d->labels[0], 3);
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 32; y += 7) {
      for (int x = 0; x < 32; x += 5) {
        ASSERT_EQ(d->images[(y * 32 + x) * 3 + c], static_cast<uint8_t>(chw[(c * 32 + y) * 32 + x]))
            << c << " " << y << " " << x;
      }
    }
  }
}

TEST(TfRecordDatasetTest, BothLayoutsRoundTrip) {
  MemEnv env;
  for (ExampleLayout layout : {ExampleLayout::kCifar10, ExampleLayout::kMnist}) {
    const Dataset d =
        layout == ExampleLayout::kCifar10 ? Sample(5, 32, 32, 3) : Sample(6, 28, 28, 1);
    ASSERT_TRUE(WriteExampleFile(&env, "/d/x.tfrecords", d, layout).ok());
    EXPECT_EQ(*env.ListDir("/d"), std::vector<std::string>{"x.tfrecords"});  // no temp file
    absl::StatusOr<Dataset> back = ReadExampleFiles(&env, {"/d/x.tfrecords"});
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->height, d.height);
    EXPECT_EQ(back->width, d.width);
    EXPECT_EQ(back->channels, d.channels);
    EXPECT_EQ(back->labels, d.labels);
    EXPECT_EQ(back->images, d.images);
  }
}

TEST(TfRecordDatasetTest, CifarLayoutHoldsTheBinaryRecordsBytes) {
  // A CIFAR-10 binary file converted to TFRecord: each "image" is exactly the
  // 3072 bytes after the label byte of the binary record.
  std::string binary;
  for (int i = 0; i < 3; ++i) {
    binary.push_back(static_cast<char>(i + 4));
    for (int j = 0; j < 3072; ++j) binary.push_back(static_cast<char>((i * 31 + j * 7) % 256));
  }
  MemEnv env;
  ASSERT_TRUE(env.WriteFileAtomic("/c/test_batch.bin", binary).ok());
  absl::StatusOr<Dataset> d = ReadCifar10Files(&env, {"/c/test_batch.bin"});
  ASSERT_TRUE(d.ok()) << d.status();
  for (int i = 0; i < 3; ++i) {
    const std::string example = EncodeExample(*d, i, ExampleLayout::kCifar10);
    EXPECT_NE(example.find(binary.substr(i * 3073 + 1, 3072)), std::string::npos) << i;
  }
}

TEST(TfRecordDatasetTest, DamageIsAnErrorNamingFileAndOffset) {
  MemEnv env;
  const Dataset d = Sample(3, 4, 4, 1);
  ASSERT_TRUE(WriteExampleFile(&env, "/d/t.tfrecords", d, ExampleLayout::kMnist).ok());
  const std::string good = *env.ReadFile("/d/t.tfrecords");
  const size_t record = good.size() / 3;
  for (size_t n = 1; n < good.size(); ++n) {
    if (n % record == 0) continue;  // whole records
    ASSERT_TRUE(env.WriteFileAtomic("/d/t.tfrecords", good.substr(0, n)).ok());
    absl::Status s = ReadExampleFiles(&env, {"/d/t.tfrecords"}).status();
    EXPECT_TRUE(absl::IsDataLoss(s)) << n << ": " << s;
    EXPECT_NE(s.message().find("/d/t.tfrecords: record at offset"), std::string::npos) << s;
  }
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    ASSERT_TRUE(env.WriteFileAtomic("/d/t.tfrecords", bad).ok());
    absl::Status s = ReadExampleFiles(&env, {"/d/t.tfrecords"}).status();
    EXPECT_TRUE(absl::IsDataLoss(s)) << i << ": " << s;
    EXPECT_NE(s.message().find(absl::StrCat("offset ", (i / record) * record)), std::string::npos)
        << i << ": " << s;
  }
}

TEST(TfRecordDatasetTest, BadExamplesAreClearErrors) {
  MemEnv env;
  auto read = [&](const std::string& features) {
    const std::string shape = Entry("height", Int64Feature(2)) + Entry("width", Int64Feature(2)) +
                              Entry("depth", Int64Feature(1));
    std::string file = RecordWriter::Frame(Field(
        1, shape + Entry("label", Int64Feature(1)) + Entry("image_raw", BytesFeature("abcd"))));
    file += RecordWriter::Frame(Field(1, features));
    EXPECT_TRUE(env.WriteFileAtomic("/d/b.tfrecords", file).ok());
    return ReadExampleFiles(&env, {"/d/b.tfrecords"}).status();
  };
  const std::string four = "wxyz";
  const std::string where = "/d/b.tfrecords: record at offset ";
  absl::Status s = read(Entry("label", Int64Feature(1)) + Entry("pixels", BytesFeature(four)));
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find(where), std::string::npos) << s;
  EXPECT_NE(s.message().find("features: label, pixels"), std::string::npos) << s;
  const std::string shape = Entry("height", Int64Feature(2)) + Entry("width", Int64Feature(2)) +
                            Entry("depth", Int64Feature(1));
  s = read(shape + Entry("image_raw", BytesFeature(four)));
  EXPECT_NE(s.message().find("has no \"label\" feature"), std::string::npos) << s;
  s = read(shape + Entry("label", Int64Feature(12)) + Entry("image_raw", BytesFeature(four)));
  EXPECT_NE(s.message().find("label 12 is outside [0, 9]"), std::string::npos) << s;
  s = read(shape + Entry("label", BytesFeature("1")) + Entry("image_raw", BytesFeature(four)));
  EXPECT_NE(s.message().find("\"label\" is not a single int64"), std::string::npos) << s;
  s = read(Entry("label", Int64Feature(1)) + Entry("height", Int64Feature(3)) +
           Entry("width", Int64Feature(2)) + Entry("depth", Int64Feature(1)) +
           Entry("image_raw", BytesFeature(four)));
  EXPECT_NE(s.message().find("holds 4 bytes, not a 3x2x1 uint8 image"), std::string::npos) << s;
  // Without shape features, 4 bytes are neither an MNIST nor a CIFAR image.
  s = read(Entry("label", Int64Feature(1)) + Entry("image_raw", BytesFeature(four)));
  EXPECT_NE(s.message().find("has no \"height\" feature"), std::string::npos) << s;
  // A second example of another shape than the first.
  s = read(Entry("label", Int64Feature(1)) +
           Entry("image_raw", BytesFeature(std::string(784, 'a'))));
  EXPECT_NE(s.message().find("a 28x28x1 image after 2x2x1 ones"), std::string::npos) << s;
}

TEST(TfRecordDatasetTest, DescribesAnyExampleFile) {
  MemEnv env;
  ASSERT_TRUE(
      WriteExampleFile(&env, "/d/m.tfrecords", Sample(4, 28, 28, 1), ExampleLayout::kMnist).ok());
  absl::StatusOr<std::string> text = DescribeExampleFile(&env, "/d/m.tfrecords");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("4 tf.train.Example records"), std::string::npos) << *text;
  EXPECT_NE(text->find("  image_raw: bytes, 1 value of 784 bytes\n"), std::string::npos) << *text;
  EXPECT_NE(text->find("  label: int64, 1 value\n"), std::string::npos) << *text;
  EXPECT_NE(text->find("  height: int64"), std::string::npos) << *text;
}

TEST(LoadDatasetTest, FindsEachFormat) {
  MemEnv env;
  // MNIST idx.
  ASSERT_TRUE(env.WriteFileAtomic("/m/t10k-images-idx3-ubyte",
                                  testutil::IdxImages(2, 28, 28, std::vector<uint8_t>(2 * 784, 9)))
                  .ok());
  ASSERT_TRUE(env.WriteFileAtomic("/m/t10k-labels-idx1-ubyte", testutil::IdxLabels({1, 2})).ok());
  absl::StatusOr<Dataset> d = LoadDataset(&env, "/m", Split::kTest);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->size(), 2);
  // TFRecord files win over idx files beside them.
  ASSERT_TRUE(
      WriteExampleFile(&env, "/m/test.tfrecords", Sample(3, 28, 28, 1), ExampleLayout::kMnist)
          .ok());
  d = LoadDataset(&env, "/m", Split::kTest);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->size(), 3);
  // CIFAR-10 binary.
  std::string binary(3073, '\x02');
  ASSERT_TRUE(env.WriteFileAtomic("/c/cifar-10-batches-bin/test_batch.bin", binary).ok());
  d = LoadDataset(&env, "/c", Split::kTest);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->channels, 3);
  // Nothing: the error says what was looked for.
  absl::Status s = LoadDataset(&env, "/none", Split::kTrain).status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_NE(s.message().find("train.tfrecords"), std::string::npos) << s;
  EXPECT_NE(s.message().find("data_batch_1.bin"), std::string::npos) << s;
}

TEST(ConvertTest, CifarBinaryToTheEstimatorsThreeFiles) {
  MemEnv env;
  std::vector<std::string> binaries;
  for (int f = 0; f < 6; ++f) {
    std::string binary;
    for (int i = 0; i < 2 + f; ++i) {  // different counts tell the files apart
      binary.push_back(static_cast<char>((f + i) % 10));
      for (int j = 0; j < 3072; ++j) binary.push_back(static_cast<char>((f * 7 + i * 3 + j) % 256));
    }
    binaries.push_back(binary);
    const std::string name =
        f < 5 ? absl::StrCat("data_batch_", f + 1, ".bin") : std::string("test_batch.bin");
    ASSERT_TRUE(env.WriteFileAtomic(JoinPath("/in/cifar-10-batches-bin", name), binary).ok());
  }
  std::vector<std::string> lines;
  absl::StatusOr<std::vector<ConvertedFile>> files =
      ConvertToTfRecords(&env, "/in", "/out", [&](const std::string& l) { lines.push_back(l); });
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 3u);
  EXPECT_EQ((*files)[0].path, "/out/train.tfrecords");
  EXPECT_EQ((*files)[0].examples, 2 + 3 + 4 + 5);
  EXPECT_EQ((*files)[1].path, "/out/validation.tfrecords");
  EXPECT_EQ((*files)[1].examples, 6);
  EXPECT_EQ((*files)[2].path, "/out/eval.tfrecords");
  EXPECT_EQ((*files)[2].examples, 7);
  EXPECT_EQ(lines.size(), 3u);
  // The converted eval file reads back as the binary test batch does.
  absl::StatusOr<Dataset> a = ReadExampleFiles(&env, {"/out/eval.tfrecords"});
  absl::StatusOr<Dataset> b = ReadCifar10Files(&env, {"/in/cifar-10-batches-bin/test_batch.bin"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->images, b->images);
  EXPECT_EQ(a->labels, b->labels);
  // And LoadDataset of /out takes the TFRecord files.
  absl::StatusOr<Dataset> train = LoadDataset(&env, "/out", Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->size(), 14);
}

TEST(ConvertTest, MnistIdxToTrainAndTest) {
  MemEnv env;
  std::vector<uint8_t> pixels(3 * 784);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 13);
  ASSERT_TRUE(
      env.WriteFileAtomic("/m/train-images-idx3-ubyte", testutil::IdxImages(3, 28, 28, pixels))
          .ok());
  ASSERT_TRUE(
      env.WriteFileAtomic("/m/train-labels-idx1-ubyte", testutil::IdxLabels({4, 0, 9})).ok());
  ASSERT_TRUE(env.WriteFileAtomic(
                     "/m/t10k-images-idx3-ubyte.gz",
                     testutil::Gzip(testutil::IdxImages(1, 28, 28, std::vector<uint8_t>(784, 5))))
                  .ok());
  ASSERT_TRUE(
      env.WriteFileAtomic("/m/t10k-labels-idx1-ubyte.gz", testutil::Gzip(testutil::IdxLabels({2})))
          .ok());
  absl::StatusOr<std::vector<ConvertedFile>> files = ConvertToTfRecords(&env, "/m", "/t");
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 2u);
  absl::StatusOr<Dataset> train = LoadDataset(&env, "/t", Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->images, pixels);
  EXPECT_EQ(train->labels, (std::vector<float>{4, 0, 9}));
  absl::StatusOr<Dataset> test = LoadDataset(&env, "/t", Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->labels, std::vector<float>{2});
  absl::Status s = ConvertToTfRecords(&env, "/empty", "/t2").status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_NE(s.message().find("nothing to convert in /empty"), std::string::npos) << s;
}

}  // namespace
}  // namespace pstrain
