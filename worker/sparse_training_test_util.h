#ifndef PSTRAIN_WORKER_SPARSE_TRAINING_TEST_UTIL_H_
#define PSTRAIN_WORKER_SPARSE_TRAINING_TEST_UTIL_H_

// The fixture of the single-process click model tests
// (sparse_training_test.cc, sparse_optimizers_training_test.cc): synthetic
// click data with a planted logistic model, and a Wide & Deep spec over it.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/env.h"
#include "data/binary_metrics.h"
#include "data/synthetic/synthetic_ctr.h"
#include "gtest/gtest.h"
#include "worker/local_training.h"

namespace pstrain {
namespace sparse_training_test {

inline constexpr int kFields = 8;

inline SyntheticCtrConfig DataConfig() {
  SyntheticCtrConfig config;
  config.num_categorical = kFields;
  config.num_dense = 4;
  config.vocabulary = {100};
  config.id_weight_stddev = 0.6;
  config.seed = 3;
  return config;
}

// Wide & Deep over the synthetic fields: a linear part over every field,
// and embeddings concatenated with the dense features into a small MLP.
inline std::string WideAndDeepSpec(const std::string& table) {
  std::vector<std::string> fields, embeddings;
  std::string layers;
  for (int f = 1; f <= kFields; ++f) {
    fields.push_back(absl::StrCat("C", f));
    embeddings.push_back(absl::StrCat("emb_C", f));
    absl::StrAppend(&layers, "  - embedding: {feature: C", f, ", dim: 4, ", table,
                    ", combiner: sum, name: emb_C", f, "}\n");
  }
  return absl::StrCat("name: wide_and_deep\ninput: [13]\nhead: binary\nlayers:\n", layers,
                      "  - concat: {input: input, inputs: [", absl::StrJoin(embeddings, ", "),
                      "]}\n"
                      "  - dense: {units: 16, activation: relu}\n"
                      "  - dense: {units: 1, name: deep_logit}\n"
                      "  - linear: {features: [",
                      absl::StrJoin(fields, ", "), "], ", table,
                      ", name: wide}\n"
                      "  - add: {input: deep_logit, inputs: [wide]}\n");
}

class SparseTrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<SyntheticCtr> data = SyntheticCtr::Create(DataConfig());
    ASSERT_TRUE(data.ok()) << data.status();
    ASSERT_TRUE(data->WriteTsv(&env_, "/data/train.tsv", 100000, kSyntheticTrainStream).ok());
    ASSERT_TRUE(data->WriteTsv(&env_, "/data/test.tsv", 10000, kSyntheticTestStream).ok());
    absl::StatusOr<PlantedModelQuality> planted =
        data->Evaluate(data->Generate(10000, kSyntheticTestStream));
    ASSERT_TRUE(planted.ok()) << planted.status();
    planted_ = *planted;
  }

  TrainingSpec Config(const std::string& table) {
    TrainingSpec config;
    config.model_spec = *ParseJobModelSpec(WideAndDeepSpec(table), "the test's spec");
    config.model = "wide_and_deep";
    config.data_dir = "/data";
    config.job_dir = "/job";
    config.train_steps = 4000;
    config.batch_size = 100;
    config.eval_batch_size = 1000;
    config.log_every_n_steps = 1000;
    config.learning_rate = 0.003;
    config.embedding_learning_rate = 0.1;
    return config;
  }

  MemEnv env_;
  PlantedModelQuality planted_;
};

}  // namespace sparse_training_test
}  // namespace pstrain

#endif  // PSTRAIN_WORKER_SPARSE_TRAINING_TEST_UTIL_H_
