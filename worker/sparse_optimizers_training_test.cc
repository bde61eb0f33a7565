// Single-process training of click models with embedding tables, beside
// sparse_training_test.cc: the other per-row optimizers (FTRL on bucketed
// tables, lazy Adam) and DLRM reach the planted model's AUC. Their threads
// are Wide & Deep's, so the ThreadSanitizer build runs that test only.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "worker/sparse_training_test_util.h"

namespace pstrain {
namespace sparse_training_test {
namespace {

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
}  // namespace sparse_training_test
}  // namespace pstrain
