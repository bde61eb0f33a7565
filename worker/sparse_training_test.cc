// Single-process training of click models with embedding tables: Wide &
// Deep on the synthetic click data with a planted logistic model reaches the
// planted model's AUC on held-out examples.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/env.h"
#include "data/binary_metrics.h"
#include "data/synthetic/synthetic_ctr.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "worker/local_training.h"

namespace pstrain {
namespace {

constexpr int kFields = 8;

SyntheticCtrConfig DataConfig() {
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
std::string WideAndDeepSpec(const std::string& table) {
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

TEST_F(SparseTrainingTest, WideAndDeepReachesThePlantedAuc) {
  absl::StatusOr<EvalMetrics> metrics = RunLocalTraining(&env_, Config("dynamic: true"));
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_TRUE(metrics->binary);
  EXPECT_EQ(metrics->examples, 10000);
  LOG(INFO) << "AUC " << metrics->auc << " (planted " << planted_.auc << "), log loss "
            << metrics->loss << " (planted " << planted_.log_loss << ")";
  EXPECT_GT(metrics->auc, planted_.auc - 0.01);
  EXPECT_LT(metrics->loss, planted_.log_loss + 0.02);
}

// The other per-row optimizers, a bucketed table (tokens hashed as
// to_hash_bucket_fast) and DLRM train too.
TEST_F(SparseTrainingTest, FtrlOnBucketedTablesReachesThePlantedAuc) {
  TrainingSpec config = Config("buckets: 4096");
  config.embedding_optimizer = "ftrl";  // alpha: embedding_learning_rate, 0.1
  config.embedding_l2 = 1e-4;
  absl::StatusOr<EvalMetrics> metrics = RunLocalTraining(&env_, config);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  LOG(INFO) << "FTRL, 4096 buckets: AUC " << metrics->auc << " (planted " << planted_.auc << ")";
  EXPECT_GT(metrics->auc, planted_.auc - 0.01);
}

TEST_F(SparseTrainingTest, LazyAdamReachesThePlantedAuc) {
  TrainingSpec config = Config("dynamic: true");
  config.embedding_optimizer = "adam";
  config.embedding_learning_rate = 0.003;
  absl::StatusOr<EvalMetrics> metrics = RunLocalTraining(&env_, config);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  LOG(INFO) << "lazy Adam: AUC " << metrics->auc << " (planted " << planted_.auc << ")";
  EXPECT_GT(metrics->auc, planted_.auc - 0.01);
}

TEST_F(SparseTrainingTest, DlrmReachesThePlantedAuc) {
  std::vector<std::string> embeddings;
  std::string spec =
      "name: dlrm\ninput: [13]\nhead: binary\nlayers:\n"
      "  - dense: {units: 8, activation: relu, input: input}\n"
      "  - dense: {units: 4, activation: relu, name: bottom}\n";
  for (int f = 1; f <= kFields; ++f) {
    embeddings.push_back(absl::StrCat("emb_C", f));
    absl::StrAppend(&spec, "  - embedding: {feature: C", f, ", dim: 4, dynamic: true, name: emb_C",
                    f, ", combiner: sum}\n");
  }
  absl::StrAppend(&spec, "  - dot_interaction: {input: bottom, inputs: [",
                  absl::StrJoin(embeddings, ", "),
                  "]}\n  - dense: {units: 16, activation: relu}\n  - dense: {units: 1}\n");
  TrainingSpec config = Config("dynamic: true");
  config.model_spec = *ParseJobModelSpec(spec, "the test's spec");
  config.model = "dlrm";
  absl::StatusOr<EvalMetrics> metrics = RunLocalTraining(&env_, config);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  LOG(INFO) << "DLRM: AUC " << metrics->auc << " (planted " << planted_.auc << ")";
  EXPECT_GT(metrics->auc, planted_.auc - 0.01);
}

}  // namespace
}  // namespace pstrain
