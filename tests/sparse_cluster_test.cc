// Embedding tables on real parameter servers (issue 28): Wide & Deep on
// synthetic click data with a planted logistic model, trained by a sync
// cluster of 2 ps and 2 workers started by pstrain-launch, reaches the
// planted model's AUC on held-out examples.

#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/env.h"
#include "data/synthetic_ctr.h"
#include "gtest/gtest.h"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using testing_util::LoopbackConfig;
using testing_util::ProcessResult;
using testing_util::RunProcess;

const std::string kBin = PSTRAIN_BIN_DIR;
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

// Wide & Deep: a linear part over every field, and embeddings concatenated
// with the dense features into a small MLP; dynamic tables.
std::string WideAndDeepSpec() {
  std::vector<std::string> fields, embeddings;
  std::string layers;
  for (int f = 1; f <= kFields; ++f) {
    fields.push_back(absl::StrCat("C", f));
    embeddings.push_back(absl::StrCat("emb_C", f));
    absl::StrAppend(&layers, "  - embedding: {feature: C", f,
                    ", dim: 4, dynamic: true, combiner: sum, name: emb_C", f, "}\n");
  }
  return absl::StrCat("name: wide_and_deep\ninput: [13]\nhead: binary\nlayers:\n", layers,
                      "  - concat: {input: input, inputs: [", absl::StrJoin(embeddings, ", "),
                      "]}\n"
                      "  - dense: {units: 16, activation: relu}\n"
                      "  - dense: {units: 1, name: deep_logit}\n"
                      "  - linear: {features: [",
                      absl::StrJoin(fields, ", "),
                      "], dynamic: true, name: wide}\n"
                      "  - add: {input: deep_logit, inputs: [wide]}\n");
}

class SparseClusterTest : public testing_util::ClusterTestBase {
 protected:
  SparseClusterTest() : ClusterTestBase("sparse_cluster") {}

  void SetUp() override {
    ClusterTestBase::SetUp();
    ctr_ = dir_ + "/ctr";
    absl::StatusOr<SyntheticCtr> data = SyntheticCtr::Create(DataConfig());
    ASSERT_TRUE(data.ok()) << data.status();
    Env* env = Env::Default();
    ASSERT_TRUE(env->CreateDirs(ctr_).ok());
    ASSERT_TRUE(data->WriteTsv(env, ctr_ + "/train.tsv", 100000, kSyntheticTrainStream).ok());
    ASSERT_TRUE(data->WriteTsv(env, ctr_ + "/test.tsv", 10000, kSyntheticTestStream).ok());
    absl::StatusOr<PlantedModelQuality> planted =
        data->Evaluate(data->Generate(10000, kSyntheticTestStream));
    ASSERT_TRUE(planted.ok()) << planted.status();
    planted_ = *planted;
    spec_ = dir_ + "/wide_and_deep.yaml";
    ASSERT_TRUE(env->WriteFileAtomic(spec_, WideAndDeepSpec()).ok());
  }

  // Trains the job of `config` to `steps`; the launcher's output.
  ProcessResult Train(const std::string& config, int steps) {
    return RunProcess(
        {kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec_, "--data_dir=" + ctr_,
         "--job_dir=" + job_dir(), absl::StrCat("--train_steps=", steps), "--eval_steps=0",
         "--log_every_n_steps=500", "--batch_size=100", "--learning_rate=0.003",
         "--embedding_learning_rate=0.1", "--eval_batch_size=1000"},
        600);
  }

  std::string ctr_, spec_;
  PlantedModelQuality planted_;
};

TEST_F(SparseClusterTest, WideAndDeepOnTwoPsAndTwoWorkersReachesThePlantedAuc) {
  const std::string config = WriteClusterConfig(
      LoopbackConfig{.ps = 2, .workers = 2, .training = "  update: sync\n  chief_trains: false\n"});
  ProcessResult train = Train(config, 2000);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  const std::regex eval_line(
      "Saving dict for global step ([0-9]+): accuracy = ([0-9.]+), auc = ([0-9.]+), "
      "global_step = [0-9]+, loss = ([0-9.]+)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(train.output, m, eval_line)) << train.output;
  EXPECT_EQ(m[1], "2000");
  const double auc = std::stod(m[3]), loss = std::stod(m[4]);
  std::printf(
      "Wide & Deep, 2 ps x 2 workers, sync, 2000 steps of 2 x 100: AUC %.4f (planted "
      "%.4f), log loss %.4f (planted %.4f)\n",
      auc, planted_.auc, loss, planted_.log_loss);
  EXPECT_GT(auc, planted_.auc - 0.01) << train.output;
  EXPECT_LT(loss, planted_.log_loss + 0.02);
}

}  // namespace
}  // namespace pstrain
