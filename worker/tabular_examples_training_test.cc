// Single-process training of a click model on TFRecord files of
// tf.train.Example (data/formats/tabular_examples.h): the model's feature names pick
// what is read, and a learnable rule is learned.

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/record_writer.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "proto/example.pb.h"
#include "worker/local_training.h"

namespace pstrain {
namespace {

// Two dense features, an embedding of the ids "user" (a dynamic table) and a
// linear part over the tokens "tokens".
constexpr char kSpec[] = R"(name: tiny_tabular
input: [2]
head: binary
layers:
  - embedding: {feature: user, dim: 4, dynamic: true, name: emb_user}
  - concat: {input: input, inputs: [emb_user]}
  - dense: {units: 1, name: deep}
  - linear: {features: [tokens], dynamic: true, name: wide}
  - add: {input: deep, inputs: [wide]}
)";

// `n` Examples as a Python writer makes them: label 1 exactly when the token
// "good" is among 1..3 other tokens; user ids and dense features are noise.
std::string ExampleFile(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> user(0, 49), count(1, 3), word(0, 7);
  std::uniform_real_distribution<float> noise(-1.0f, 1.0f);
  std::string file;
  for (int i = 0; i < n; ++i) {
    const bool good = rng() % 2 == 0;
    tf::Example example;
    auto& f = *example.mutable_features()->mutable_feature();
    f["label"].mutable_int64_list()->add_value(good ? 1 : 0);
    f["dense"].mutable_float_list()->add_value(noise(rng));
    f["dense"].mutable_float_list()->add_value(noise(rng));
    f["user"].mutable_int64_list()->add_value(user(rng));
    tf::BytesList* tokens = f["tokens"].mutable_bytes_list();
    for (int t = count(rng); t > 0; --t) tokens->add_value(absl::StrCat("w", word(rng)));
    if (good) tokens->add_value("good");
    file += RecordWriter::Frame(example.SerializeAsString());
  }
  return file;
}

TEST(TabularExamplesTrainingTest, LearnsFromTfRecordExamples) {
  MemEnv env;
  ASSERT_TRUE(env.WriteFileAtomic("/data/train.tfrecords", ExampleFile(4000, 1)).ok());
  ASSERT_TRUE(env.WriteFileAtomic("/data/test.tfrecords", ExampleFile(1000, 2)).ok());
  TrainingSpec config;
  config.model_spec = *ParseJobModelSpec(kSpec, "the test's spec");
  config.model = "tiny_tabular";
  config.data_dir = "/data";
  config.job_dir = "/job";
  config.train_steps = 300;
  config.batch_size = 50;
  config.eval_batch_size = 500;
  config.log_every_n_steps = 100;
  config.learning_rate = 0.01;
  config.embedding_learning_rate = 0.1;
  absl::StatusOr<EvalMetrics> metrics = RunLocalTraining(&env, config);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_TRUE(metrics->binary);
  EXPECT_EQ(metrics->examples, 1000);
  LOG(INFO) << "AUC " << metrics->auc << ", log loss " << metrics->loss;
  EXPECT_GT(metrics->auc, 0.95);  // chance is 0.5
}

TEST(TabularExamplesTrainingTest, AMissingDenseFeatureNamesTheRecord) {
  MemEnv env;
  tf::Example example;
  (*example.mutable_features()->mutable_feature())["label"].mutable_int64_list()->add_value(1);
  ASSERT_TRUE(
      env.WriteFileAtomic("/data/train.tfrecords", RecordWriter::Frame(example.SerializeAsString()))
          .ok());
  ASSERT_TRUE(env.WriteFileAtomic("/data/test.tfrecords", ExampleFile(10, 2)).ok());
  TrainingSpec config;
  config.model_spec = *ParseJobModelSpec(kSpec, "the test's spec");
  config.model = "tiny_tabular";
  config.data_dir = "/data";
  config.job_dir = "/job";
  config.train_steps = 1;
  absl::StatusOr<EvalMetrics> metrics = RunLocalTraining(&env, config);
  ASSERT_EQ(metrics.status().code(), absl::StatusCode::kInvalidArgument) << metrics.status();
  EXPECT_NE(metrics.status().message().find(
                "/data/train.tfrecords: record 0 (offset 0): every Example needs dense feature "
                "\"dense\" (a float_list of 2 values)"),
            std::string::npos)
      << metrics.status();
}

}  // namespace
}  // namespace pstrain
