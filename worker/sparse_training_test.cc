// Single-process training of click models with embedding tables: Wide &
// Deep on the synthetic click data with a planted logistic model reaches the
// planted model's AUC on held-out examples. (The other per-row optimizers and
// DLRM: sparse_optimizers_training_test.cc, a binary the ThreadSanitizer
// build does not run: their threads are this test's.)

#include "glog/logging.h"
#include "gtest/gtest.h"
#include "worker/sparse_training_test_util.h"

namespace pstrain {
namespace sparse_training_test {
namespace {

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

}  // namespace
}  // namespace sparse_training_test
}  // namespace pstrain
