#include "tests/ctr_cluster_util.h"

#include <regex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/env.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace testing_util {

SyntheticCtrConfig DataConfig() {
  SyntheticCtrConfig config;
  config.num_categorical = kCtrFields;
  config.num_dense = 4;
  config.vocabulary = {100};
  config.id_weight_stddev = 0.6;
  config.seed = 3;
  return config;
}

nlohmann::json CtrInstance(const CriteoBatch& batch, int64_t i) {
  nlohmann::json instance;
  std::vector<float> dense(kCriteoNumDense);
  for (int d = 0; d < kCriteoNumDense; ++d) {
    dense[d] = CriteoLog1p(batch.dense[i * kCriteoNumDense + d],
                           batch.dense_present[i * kCriteoNumDense + d] != 0);
  }
  instance["dense"] = dense;
  for (int f = 0; f < kCtrFields; ++f) {
    const uint32_t id = batch.categorical[i * kCriteoNumCategorical + f];
    if (id != kCriteoMissingId) instance[absl::StrCat("C", f + 1)] = absl::StrFormat("%08x", id);
  }
  return instance;
}

std::string WideAndDeepSpec() {
  std::vector<std::string> fields, embeddings;
  std::string layers;
  for (int f = 1; f <= kCtrFields; ++f) {
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
                      "], crosses: [[C1, C2]], dynamic: true, name: wide}\n"
                      "  - add: {input: deep_logit, inputs: [wide]}\n");
}

Eval LastEval(const std::string& output) {
  const std::regex eval_line(
      "Saving dict for global step ([0-9]+): accuracy = ([0-9.]+), auc = ([0-9.]+), "
      "global_step = [0-9]+, loss = ([0-9.]+)");
  Eval e;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), eval_line);
       it != std::sregex_iterator(); ++it) {
    e.step = std::stoll((*it)[1]);
    e.auc = std::stod((*it)[3]);
    e.loss = std::stod((*it)[4]);
  }
  return e;
}

void CtrClusterTest::SetUp() {
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

ProcessResult CtrClusterTest::Train(const std::string& config, int steps) {
  return RunProcess(
      {bin_ + "/pstrain-launch", "--config=" + config, "--model=" + spec_, "--data_dir=" + ctr_,
       "--job_dir=" + job_dir(), absl::StrCat("--train_steps=", steps), "--eval_steps=0",
       "--log_every_n_steps=500", "--batch_size=100", "--learning_rate=0.003",
       "--embedding_learning_rate=0.1", "--eval_batch_size=1000"},
      600);
}

}  // namespace testing_util
}  // namespace pstrain
