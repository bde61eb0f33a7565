// Tests of tabular datasets from TFRecord files of tf.train.Example: labels,
// the dense feature, int64_list ids and bytes_list tokens as sparse columns,
// and the errors for Examples that break the rules of data/formats/tabular_examples.h.
#include "data/formats/tabular_examples.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/record_writer.h"
#include "data/feature_hash.h"
#include "data/formats/example_writer.h"
#include "data/tabular.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/example.pb.h"
#include "testing/data_test_util.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kPath[] = "/data/train.tfrecords";

tf::Feature Ints(std::vector<int64_t> values) {
  tf::Feature f;
  for (int64_t v : values) f.mutable_int64_list()->add_value(v);
  if (values.empty()) f.mutable_int64_list();
  return f;
}

tf::Feature Floats(std::vector<float> values) {
  tf::Feature f;
  for (float v : values) f.mutable_float_list()->add_value(v);
  if (values.empty()) f.mutable_float_list();
  return f;
}

tf::Feature Bytes(std::vector<std::string> values) {
  tf::Feature f;
  for (std::string& v : values) f.mutable_bytes_list()->add_value(std::move(v));
  if (values.empty()) f.mutable_bytes_list();
  return f;
}

tf::Example MakeExample(std::vector<std::pair<std::string, tf::Feature>> features) {
  tf::Example example;
  for (auto& [name, feature] : features) {
    (*example.mutable_features()->mutable_feature())[name] = std::move(feature);
  }
  return example;
}

// Writes `examples` to `path` through the project's RecordWriter.
void WriteExamples(Env* env, const std::string& path, const std::vector<tf::Example>& examples) {
  absl::StatusOr<std::unique_ptr<WritableFile>> file = env->NewWritableFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  RecordWriter writer(file->get());
  for (const tf::Example& example : examples) {
    ASSERT_TRUE(writer.WriteRecord(example.SerializeAsString()).ok());
  }
  ASSERT_TRUE((*file)->Close().ok());
}

// The model's view: 2 dense features, ids "user" and tokens "tokens".
TabularFeatures Features() {
  TabularFeatures f;
  f.num_dense = 2;
  f.sparse = {"user", "tokens"};
  return f;
}

using testutil::ValuesOf;

uint64_t Id(int64_t id) { return static_cast<uint64_t>(id); }

class TabularExamplesTest : public ::testing::Test {
 protected:
  // Reads `examples` written to kPath with Features().
  absl::StatusOr<Dataset> Read(const std::vector<tf::Example>& examples,
                               const TabularFeatures& features = Features()) {
    WriteExamples(&env_, kPath, examples);
    return ReadTabularExamples(&env_, kPath, features);
  }

  MemEnv env_;
};

TEST_F(TabularExamplesTest, ReadsLabelsDenseIdsAndTokens) {
  const std::string binary("\0\xff\x80 x", 5);
  absl::StatusOr<Dataset> d = Read({
      MakeExample({{"label", Ints({1})},
                   {"dense", Floats({0.5f, -2.0f})},
                   {"user", Ints({17})},
                   {"tokens", Bytes({"good", "day"})},
                   {"ignored", Floats({3.0f})}}),
      // A float label, int64 dense values, a negative id, several ids, a
      // token that is not text and an empty token.
      MakeExample({{"label", Floats({0.0f})},
                   {"dense", Ints({3, -4})},
                   {"user", Ints({-5, 1LL << 40, 17})},
                   {"tokens", Bytes({binary, ""})}}),
  });
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->tabular);
  EXPECT_EQ(d->size(), 2);
  EXPECT_EQ(d->num_dense, 2);
  EXPECT_EQ(d->example_size(), 2);
  EXPECT_TRUE(d->images.empty());
  EXPECT_THAT(d->labels, ElementsAre(1, 0));
  EXPECT_THAT(d->dense, ElementsAre(0.5f, -2.0f, 3.0f, -4.0f));
  ASSERT_EQ(d->sparse.size(), 2u);

  const SparseFeatureColumn& user = d->sparse[0];
  EXPECT_EQ(user.name, "user");
  EXPECT_EQ(user.kind, SparseValueKind::kIds);
  EXPECT_EQ(user.examples(), 2);
  EXPECT_THAT(ValuesOf(user, 0), ElementsAre(Id(17)));
  EXPECT_THAT(ValuesOf(user, 1), ElementsAre(Id(-5), Id(1LL << 40), Id(17)));

  const SparseFeatureColumn& tokens = d->sparse[1];
  EXPECT_EQ(tokens.name, "tokens");
  EXPECT_EQ(tokens.kind, SparseValueKind::kTokens);
  EXPECT_EQ(tokens.examples(), 2);
  EXPECT_THAT(ValuesOf(tokens, 0), ElementsAre(Fingerprint64("good"), Fingerprint64("day")));
  EXPECT_THAT(ValuesOf(tokens, 1), ElementsAre(Fingerprint64(binary), Fingerprint64("")));
  // What tf.strings.to_hash_bucket_fast gives for a token: the fingerprint
  // of its bytes mod buckets.
  EXPECT_EQ(static_cast<int64_t>(ValuesOf(tokens, 0)[0] % 1000), HashBucketFast("good", 1000));

  // The model's checks accept it.
  EXPECT_TRUE(CheckTabularShape(*d, 2, "m", "/data").ok());
  absl::StatusOr<std::vector<int>> columns = SelectSparseFeatures(*d, {"tokens", "user"}, "/data");
  ASSERT_TRUE(columns.ok()) << columns.status();
  EXPECT_THAT(*columns, ElementsAre(1, 0));
}

TEST_F(TabularExamplesTest, MissingOrEmptySparseFeaturesHaveNoValues) {
  absl::StatusOr<Dataset> d = Read({
      MakeExample({{"label", Ints({0})}, {"dense", Floats({1, 2})}}),  // neither
      MakeExample({{"label", Ints({1})},
                   {"dense", Floats({1, 2})},
                   {"user", Ints({})},           // an empty list
                   {"tokens", tf::Feature()}}),  // a Feature with no list
      MakeExample({{"label", Ints({1})},
                   {"dense", Floats({1, 2})},
                   {"user", Ints({9})},
                   {"tokens", Bytes({})}}),
  });
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 3);
  EXPECT_THAT(d->sparse[0].offsets, ElementsAre(0, 0, 0, 1));
  EXPECT_THAT(d->sparse[0].values, ElementsAre(Id(9)));
  EXPECT_EQ(d->sparse[1].kind, SparseValueKind::kTokens);  // from record 2's empty bytes_list
  EXPECT_THAT(d->sparse[1].offsets, ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(d->sparse[1].values, IsEmpty());
}

TEST_F(TabularExamplesTest, AFeatureNoExampleHasIsAnEmptyColumn) {
  absl::StatusOr<Dataset> d =
      Read({MakeExample({{"label", Ints({1})}, {"dense", Floats({1, 2})}})});
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->sparse.size(), 2u);
  EXPECT_EQ(d->sparse[0].kind, SparseValueKind::kIds);
  EXPECT_THAT(d->sparse[0].offsets, ElementsAre(0, 0));
}

TEST_F(TabularExamplesTest, NoDenseFeaturesNeedsNoDenseFeature) {
  TabularFeatures features = Features();
  features.num_dense = 0;
  absl::StatusOr<Dataset> d =
      Read({MakeExample({{"label", Ints({1})}, {"user", Ints({4})}})}, features);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_dense, 0);
  EXPECT_THAT(d->dense, IsEmpty());
  EXPECT_THAT(d->labels, ElementsAre(1));
}

TEST_F(TabularExamplesTest, OtherFeatureNames) {
  TabularFeatures features;
  features.labels = {{"clicked", 2}};
  features.dense = "numeric";
  features.num_dense = 1;
  features.sparse = {"ad"};
  absl::StatusOr<Dataset> d =
      Read({MakeExample({{"clicked", Ints({1})}, {"numeric", Floats({7})}, {"ad", Bytes({"x"})}})},
           features);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->dense, ElementsAre(7.0f));
  EXPECT_THAT(d->sparse[0].values, ElementsAre(Fingerprint64("x")));
}

TEST_F(TabularExamplesTest, MissingDenseFeatureNamesFileRecordAndFeature) {
  const tf::Example good =
      MakeExample({{"label", Ints({1})}, {"dense", Floats({1, 2})}, {"user", Ints({1})}});
  absl::StatusOr<Dataset> d =
      Read({good, good, MakeExample({{"label", Ints({1})}, {"user", Ints({1})}})});
  ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
  EXPECT_THAT(d.status().message(), HasSubstr(kPath));
  EXPECT_THAT(d.status().message(), HasSubstr("record 2 "));
  EXPECT_THAT(d.status().message(),
              HasSubstr("every Example needs dense feature \"dense\" (a float_list of 2 values)"));
  EXPECT_THAT(d.status().message(), HasSubstr("this Example has: label, user"));
}

TEST_F(TabularExamplesTest, DenseFeatureOfTheWrongCountOrKind) {
  absl::StatusOr<Dataset> d =
      Read({MakeExample({{"label", Ints({1})}, {"dense", Floats({1, 2, 3})}})});
  ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
  EXPECT_THAT(d.status().message(), HasSubstr("record 0 "));
  EXPECT_THAT(d.status().message(),
              HasSubstr("\"dense\" is a float_list of 3 values, but the model takes 2"));

  d = Read({MakeExample({{"label", Ints({1})}, {"dense", Bytes({"a", "b"})}})});
  ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
  EXPECT_THAT(d.status().message(), HasSubstr("\"dense\" is a bytes_list of 2 values"));
}

TEST_F(TabularExamplesTest, LabelMustBeOneValueZeroOrOne) {
  absl::StatusOr<Dataset> d = Read({MakeExample({{"dense", Floats({1, 2})}})});
  ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
  EXPECT_THAT(d.status().message(), HasSubstr("every Example needs label feature \"label\""));

  d = Read({MakeExample({{"label", Ints({2})}, {"dense", Floats({1, 2})}})});
  ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
  EXPECT_THAT(d.status().message(), HasSubstr("label \"label\" is 2; a binary label is 0 or 1"));

  d = Read({MakeExample({{"label", Floats({0.5f})}, {"dense", Floats({1, 2})}})});
  ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
  EXPECT_THAT(d.status().message(), HasSubstr("is 0.5"));

  d = Read({MakeExample({{"label", Ints({0, 1})}, {"dense", Floats({1, 2})}})});
  ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
  EXPECT_THAT(d.status().message(), HasSubstr("\"label\" is an int64_list of 2 values"));
}

TEST_F(TabularExamplesTest, AClassifierOfMoreClassesTakesEachClass) {
  TabularFeatures classes = Features();
  classes.labels[0].num_classes = 4;
  absl::StatusOr<Dataset> d =
      Read({MakeExample({{"label", Ints({3})}, {"dense", Floats({1, 2})}}),
            MakeExample({{"label", Ints({0})}, {"dense", Floats({1, 2})}}),
            MakeExample({{"label", Floats({2})}, {"dense", Floats({1, 2})}})},
           classes);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->labels, (std::vector<float>{3, 0, 2}));
  for (const tf::Example& bad :
       {MakeExample({{"label", Ints({4})}, {"dense", Floats({1, 2})}}),
        MakeExample({{"label", Ints({-1})}, {"dense", Floats({1, 2})}}),
        MakeExample({{"label", Floats({1.5f})}, {"dense", Floats({1, 2})}})}) {
    d = Read({bad}, classes);
    ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
    EXPECT_THAT(d.status().message(), HasSubstr("; the model's 4 classes are 0 to 3"));
  }
  classes.labels[0].num_classes = 1;
  EXPECT_FALSE(
      Read({MakeExample({{"label", Ints({0})}, {"dense", Floats({1, 2})}})}, classes).ok());
}

TEST_F(TabularExamplesTest, ARegressionHeadsLabelIsAnyFiniteNumber) {
  TabularFeatures values = Features();
  values.labels[0].num_classes = 0;
  absl::StatusOr<Dataset> d =
      Read({MakeExample({{"label", Floats({-2.5f})}, {"dense", Floats({1, 2})}}),
            MakeExample({{"label", Ints({40})}, {"dense", Floats({1, 2})}}),
            MakeExample({{"label", Floats({0.125f})}, {"dense", Floats({1, 2})}})},
           values);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->labels, (std::vector<float>{-2.5f, 40, 0.125f}));
  d = Read({MakeExample({{"label", Floats({std::numeric_limits<float>::infinity()})},
                         {"dense", Floats({1, 2})}})},
           values);
  ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
  EXPECT_THAT(d.status().message(), HasSubstr("; a regression label is a finite number"));
  d = Read({MakeExample({{"dense", Floats({1, 2})}})}, values);
  EXPECT_THAT(d.status().message(),
              HasSubstr("(an int64_list or float_list of one value, a regression head's number)"));
}

// pstrain-data convert's Examples (EncodeTabularExample) read back with
// their labels: class ids as int64s, a regression head's values as floats.
TEST_F(TabularExamplesTest, WrittenExamplesKeepClassIdsAndRegressionValues) {
  Dataset d;
  d.tabular = true;
  d.num_dense = 2;
  d.labels = {1, -2.5f, 0.125f, 40};
  d.dense = {1, 2, 3, 4, 5, 6, 7, 8};
  d.sparse.resize(2);
  d.sparse[0].name = "user";
  d.sparse[1].name = "tokens";
  for (SparseFeatureColumn& c : d.sparse) {
    c.kind = SparseValueKind::kIds;
    c.values = {7};
    c.offsets = {0, 1, 1, 1, 1};
  }
  std::vector<tf::Example> examples;
  for (int64_t i = 0; i < d.size(); ++i) {
    absl::StatusOr<std::string> bytes = EncodeTabularExample(d, i, /*float_label=*/true);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    ASSERT_TRUE(examples.emplace_back().ParseFromString(*bytes));
  }
  // One type for every label, a whole one too.
  EXPECT_EQ(examples[0].features().feature().at("label").float_list().value(0), 1);
  EXPECT_EQ(examples[1].features().feature().at("label").float_list().value(0), -2.5f);
  EXPECT_EQ(examples[3].features().feature().at("label").float_list().value(0), 40);
  // As int64 class ids: the whole ones are, -2.5 is refused, naming it.
  absl::StatusOr<std::string> as_id = EncodeTabularExample(d, 3);
  ASSERT_TRUE(as_id.ok());
  tf::Example id_example;
  ASSERT_TRUE(id_example.ParseFromString(*as_id));
  EXPECT_EQ(id_example.features().feature().at("label").int64_list().value(0), 40);
  EXPECT_THAT(EncodeTabularExample(d, 1).status().message(),
              HasSubstr("label -2.5 of example 1 is not a class id"));
  TabularFeatures values = Features();
  values.labels[0].num_classes = 0;
  absl::StatusOr<Dataset> read = Read(examples, values);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->labels, d.labels);
  EXPECT_EQ(read->dense, d.dense);
  // A binary model refuses the values that are no class, naming one.
  read = Read(examples);
  EXPECT_THAT(read.status().message(), HasSubstr("is -2.5; a binary label is 0 or 1"));
}

TEST_F(TabularExamplesTest, SparseKindThatChangesBetweenExamplesIsAnError) {
  absl::StatusOr<Dataset> d = Read({
      MakeExample({{"label", Ints({1})}, {"dense", Floats({1, 2})}, {"user", Ints({1})}}),
      MakeExample({{"label", Ints({0})}, {"dense", Floats({1, 2})}, {"user", Bytes({"a"})}}),
  });
  ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
  EXPECT_THAT(d.status().message(), HasSubstr("record 1 "));
  EXPECT_THAT(d.status().message(),
              HasSubstr("sparse feature \"user\" is a bytes_list (tokens), but an int64_list "
                        "(ids) in /data/train.tfrecords: record 0 "));
  EXPECT_THAT(d.status().message(), HasSubstr("the same kind in every Example"));
}

TEST_F(TabularExamplesTest, FloatSparseFeatureIsAnError) {
  absl::StatusOr<Dataset> d = Read(
      {MakeExample({{"label", Ints({1})}, {"dense", Floats({1, 2})}, {"tokens", Floats({1})}})});
  ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
  EXPECT_THAT(d.status().message(), HasSubstr(kPath));
  EXPECT_THAT(d.status().message(), HasSubstr("sparse feature \"tokens\" is a float_list"));
  EXPECT_THAT(d.status().message(), HasSubstr("ids (int64_list) or tokens (bytes_list)"));
}

TEST_F(TabularExamplesTest, ASingleExampleWithAMillionIds) {
  std::vector<int64_t> ids(1 << 20);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 7);
  absl::StatusOr<Dataset> d = Read({
      MakeExample({{"label", Ints({1})}, {"dense", Floats({1, 2})}, {"user", Ints(ids)}}),
      MakeExample({{"label", Ints({0})}, {"dense", Floats({1, 2})}, {"user", Ints({3})}}),
  });
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->sparse[0].offsets, ElementsAre(0, 1 << 20, (1 << 20) + 1));
  EXPECT_EQ(d->sparse[0].values[12345], Id(12345 * 7));
}

TEST_F(TabularExamplesTest, NamesUsedTwiceAreRefused) {
  TabularFeatures features = Features();
  features.sparse = {"user", "user"};
  absl::StatusOr<Dataset> d = Read({}, features);
  ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
  EXPECT_THAT(d.status().message(), HasSubstr("\"user\" is named twice"));
  features.sparse = {"dense"};
  EXPECT_EQ(ReadTabularExamples(&env_, kPath, features).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TabularExamplesTest, AnEmptyFileIsAnError) {
  absl::StatusOr<Dataset> d = Read({});
  ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
  EXPECT_THAT(d.status().message(), HasSubstr("holds no records"));
}

// A file of three records, cut at every byte: a cut between records reads
// the records before it; any other cut is DataLoss naming the file.
TEST_F(TabularExamplesTest, TruncatedFileIsDataLoss) {
  std::vector<tf::Example> examples;
  std::vector<size_t> boundaries = {0};
  std::string file;
  for (int i = 0; i < 3; ++i) {
    examples.push_back(MakeExample(
        {{"label", Ints({i % 2})}, {"dense", Floats({1, 2})}, {"tokens", Bytes({"t"})}}));
    file += RecordWriter::Frame(examples.back().SerializeAsString());
    boundaries.push_back(file.size());
  }
  for (size_t cut = 1; cut < file.size(); ++cut) {
    ASSERT_TRUE(env_.WriteFileAtomic(kPath, file.substr(0, cut)).ok());
    absl::StatusOr<Dataset> d = ReadTabularExamples(&env_, kPath, Features());
    const auto boundary = std::find(boundaries.begin(), boundaries.end(), cut);
    if (boundary != boundaries.end()) {
      ASSERT_TRUE(d.ok()) << cut << ": " << d.status();
      EXPECT_EQ(d->size(), boundary - boundaries.begin());
    } else {
      ASSERT_EQ(d.status().code(), absl::StatusCode::kDataLoss) << cut << ": " << d.status();
      EXPECT_THAT(d.status().message(), HasSubstr(kPath));
    }
  }
}

// Every single-bit flip of a two-record file is caught by a checksum.
TEST_F(TabularExamplesTest, EveryBitFlipIsDataLoss) {
  std::string file;
  for (int i = 0; i < 2; ++i) {
    file += RecordWriter::Frame(
        MakeExample({{"label", Ints({1})}, {"dense", Floats({1, 2})}, {"user", Ints({i})}})
            .SerializeAsString());
  }
  for (size_t bit = 0; bit < file.size() * 8; ++bit) {
    std::string flipped = file;
    flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
    ASSERT_TRUE(env_.WriteFileAtomic(kPath, flipped).ok());
    absl::StatusOr<Dataset> d = ReadTabularExamples(&env_, kPath, Features());
    ASSERT_EQ(d.status().code(), absl::StatusCode::kDataLoss) << bit << ": " << d.status();
  }
}

TEST_F(TabularExamplesTest, ARecordThatIsNotAnExampleIsDataLoss) {
  ASSERT_TRUE(env_.WriteFileAtomic(kPath, RecordWriter::Frame("\xff\xff\xff")).ok());
  absl::StatusOr<Dataset> d = ReadTabularExamples(&env_, kPath, Features());
  ASSERT_EQ(d.status().code(), absl::StatusCode::kDataLoss) << d.status();
  EXPECT_THAT(d.status().message(), HasSubstr("record 0 (offset 0) is not a tf.train.Example"));
}

TEST_F(TabularExamplesTest, LoadsEachSplitOfADirectory) {
  WriteExamples(&env_, "/data/train.tfrecords",
                {MakeExample({{"label", Ints({1})}, {"dense", Floats({1, 2})}}),
                 MakeExample({{"label", Ints({0})}, {"dense", Floats({3, 4})}})});
  WriteExamples(&env_, "/data/eval.tfrecords",
                {MakeExample({{"label", Ints({0})}, {"dense", Floats({5, 6})}})});
  absl::StatusOr<Dataset> train = LoadTabularExamples(&env_, "/data", Split::kTrain, Features());
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->size(), 2);
  absl::StatusOr<Dataset> test = LoadTabularExamples(&env_, "/data", Split::kTest, Features());
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_THAT(test->dense, ElementsAre(5.0f, 6.0f));

  absl::StatusOr<Dataset> none = LoadTabularExamples(&env_, "/empty", Split::kTest, Features());
  ASSERT_EQ(none.status().code(), absl::StatusCode::kNotFound) << none.status();
  EXPECT_THAT(none.status().message(), HasSubstr("/empty"));
  EXPECT_THAT(none.status().message(), HasSubstr("eval.tfrecords or test.tfrecords"));
}

}  // namespace
}  // namespace pstrain
