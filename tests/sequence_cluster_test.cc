// Sequence models on real parameter servers (issue 42): DIN and BST
// (examples/models/din.yaml, bst.yaml) on user histories whose clicks depend
// on their order (pstrain-data synthetic-seq's planted model) reach the
// planted AUC on 2 ps x 2 workers, where Wide & Deep on the same features,
// which reads the history as a bag, cannot; the export answers histories
// given as lists; and the text Transformer (text_transformer.yaml) learns
// an order-dependent task no bag of words can.

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/record_writer.h"
#include "data/binary_metrics.h"
#include "data/synthetic/synthetic_seq.h"
#include "gtest/gtest.h"
#include "models/random.h"
#include "nlohmann/json.hpp"
#include "proto/example.pb.h"
#include "testing/job_dir_checks.h"
#include "tests/ctr_cluster_util.h"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using testing_util::Eval;
using testing_util::LastEval;
using testing_util::LoopbackConfig;
using testing_util::ProcessResult;
using testing_util::RunProcess;

const std::string kBin = PSTRAIN_BIN_DIR;
const std::string kSource = PSTRAIN_SOURCE_DIR;

// Wide & Deep over the same features: the history's categories as a bag
// (their mean embedding, one wide weight each, and a cross with the
// candidate's category).
const char kWideAndDeep[] =
    "name: wide_and_deep_seq\ninput: [0]\nhead: binary\nlayers:\n"
    "  - embedding: {feature: hist_cat, dim: 8, dynamic: true, combiner: mean, name: hist}\n"
    "  - embedding: {feature: cand_cat, dim: 8, dynamic: true, name: cand}\n"
    "  - concat: {input: hist, inputs: [cand]}\n"
    "  - dense: {units: 64, activation: relu}\n"
    "  - dense: {units: 32, activation: relu}\n"
    "  - dense: {units: 1, name: deep}\n"
    "  - linear: {features: [hist_cat, cand_cat], crosses: [[hist_cat, cand_cat]], dynamic: "
    "true, name: wide}\n"
    "  - add: {input: deep, inputs: [wide]}\n";

class SequenceClusterTest : public testing_util::ClusterTestBase {
 protected:
  SequenceClusterTest() : ClusterTestBase("sequence_cluster") {}

  // pstrain-predict's predictions (a JSON array; empty after a failure,
  // which is the test's) for `instances`, one JSON object a line, from the
  // export of the job in `job_dir`.
  nlohmann::json Predict(const std::string& job_dir, const std::string& instances) {
    const std::string file = dir_ + "/instances.json";
    EXPECT_TRUE(Env::Default()->WriteFileAtomic(file, instances).ok());
    ProcessResult r = RunProcess({kBin + "/pstrain-predict", "--model_dir=" + job_dir,
                                  "--json_instances=" + file, "--format=json"},
                                 120);
    EXPECT_EQ(r.exit_code, 0) << r.output.substr(0, 2000);
    // The JSON is the last line (glog writes to stderr before it).
    const size_t at = r.output.rfind("{\"predictions\"");
    EXPECT_NE(at, std::string::npos) << r.output.substr(0, 2000);
    if (r.exit_code != 0 || at == std::string::npos) return nlohmann::json::array();
    return nlohmann::json::parse(r.output.substr(at))["predictions"];
  }

  ProcessResult Train(const std::string& config, const std::string& spec, const std::string& data,
                      const std::string& job, int steps, const std::string& learning_rate) {
    return RunProcess(
        {kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec, "--data_dir=" + data,
         "--job_dir=" + job, absl::StrCat("--train_steps=", steps), "--eval_steps=0",
         "--log_every_n_steps=2000", "--batch_size=256", "--learning_rate=" + learning_rate,
         absl::StrCat("--learning_rate_schedule=", steps / 2, ":0.3,", steps * 4 / 5, ":0.1"),
         "--embedding_learning_rate=0.05", "--eval_batch_size=1000"},
        600);
  }
};

TEST_F(SequenceClusterTest, DinAndBstReachThePlantedAucWhereWideAndDeepCannot) {
  absl::StatusOr<SyntheticSeq> generator = SyntheticSeq::Create(SyntheticSeqConfig());
  ASSERT_TRUE(generator.ok()) << generator.status();
  const std::string data = dir_ + "/seq";
  Env* env = Env::Default();
  ASSERT_TRUE(env->CreateDirs(data).ok());
  const std::vector<SeqExample> test = generator->Generate(50000, 1);
  ASSERT_TRUE(
      generator->WriteTfRecords(env, data + "/train.tfrecords", generator->Generate(300000, 0))
          .ok());
  ASSERT_TRUE(generator->WriteTfRecords(env, data + "/test.tfrecords", test).ok());
  absl::StatusOr<SeqQuality> planted = SyntheticSeq::Evaluate(test);
  ASSERT_TRUE(planted.ok()) << planted.status();
  ASSERT_TRUE(env->WriteFileAtomic(dir_ + "/wide_and_deep.yaml", kWideAndDeep).ok());
  // Sync updates of both workers' batches (replicas_to_aggregate: 2) with
  // fixed seeds (the data's and the job's), and a sync_timeout no step under
  // load comes near (a step that timed out would apply one replica's batch
  // alone). A sync step of 2 x 256 examples takes both workers' batches, so
  // half the async steps see the same examples.
  const std::string config = WriteClusterConfig(LoopbackConfig{
      .ps = 2,
      .workers = 2,
      .training = "  update: sync\n  replicas_to_aggregate: 2\n  chief_trains: false\n"
                  "  seed: 1\n  sync_timeout: 300\n"});

  struct Model {
    std::string name, spec, learning_rate;
    int steps;
    Eval eval;
  };
  std::vector<Model> models = {
      {"DIN", kSource + "/examples/models/din.yaml", "0.007", 3000, {}},
      // A BST step costs four of DIN's (its self-attention over the whole
      // history): half the steps.
      {"BST", kSource + "/examples/models/bst.yaml", "0.004", 1500, {}},
      // It has all but stopped learning by then (0.6656 at 3000 steps).
      {"Wide & Deep", dir_ + "/wide_and_deep.yaml", "0.014", 1500, {}},
  };
  for (Model& m : models) {
    ProcessResult r =
        Train(config, m.spec, data, dir_ + "/job_" + m.name.substr(0, 3), m.steps, m.learning_rate);
    ASSERT_EQ(r.exit_code, 0) << m.name << "\n" << r.output;
    m.eval = LastEval(r.output);
    ASSERT_EQ(m.eval.step, m.steps) << r.output;
    // The GRAPHS tab: its layers, variables and tables with their devices.
    EXPECT_GT(testutil::ExpectJobGraph(env, dir_ + "/job_" + m.name.substr(0, 3)), 10) << m.name;
  }
  std::printf(
      "synthetic-seq, 300000 examples, 2 ps x 2 workers: test AUC planted %.4f, DIN %.4f, BST "
      "%.4f, Wide & Deep %.4f\n",
      planted->auc, models[0].eval.auc, models[1].eval.auc, models[2].eval.auc);
  // Measured here (planted 0.7507): DIN 0.7400 after 3000 steps, BST 0.7375
  // after 1500 and Wide & Deep 0.6634 (at 5000 and 2500 steps DIN and BST
  // reach 0.7428, in twice the time), the same to the last digit run after
  // run (deterministic: sync, fixed seeds; the same parameters bit for bit,
  // attention's included since its scratch is aligned), so the margins only
  // cover another build or CPU, whose rounding takes another path: 0.007
  // and more under DIN's and BST's figures, 0.037 over Wide & Deep's.
  EXPECT_GT(models[0].eval.auc, planted->auc - 0.02);
  EXPECT_GT(models[1].eval.auc, planted->auc - 0.02);
  EXPECT_LT(models[2].eval.auc, planted->auc - 0.05);

  // DIN's export answers histories given as lists, oldest first: its AUC on
  // the first 5000 test examples through pstrain-predict is the model's
  // (0.7505 here, deterministic as DIN's job).
  std::string instances;
  std::vector<float> labels;
  for (size_t i = 0; i < 5000; ++i) {
    nlohmann::json instance;
    std::vector<int64_t> categories;
    for (int64_t item : test[i].history) categories.push_back(generator->Category(item) + 1);
    instance["hist_cat"] = categories;
    instance["cand_cat"] = generator->Category(test[i].candidate) + 1;
    absl::StrAppend(&instances, instance.dump(), "\n");
    labels.push_back(static_cast<float>(test[i].label));
  }
  const nlohmann::json predictions = Predict(dir_ + "/job_DIN", instances);
  ASSERT_EQ(predictions.size(), labels.size());
  std::vector<double> scores;
  for (const nlohmann::json& p : predictions) scores.push_back(p["logistic"][0].get<double>());
  const double served = *BinaryAuc(scores, labels);
  std::printf("pstrain-predict on DIN's export, 5000 test histories: AUC %.4f\n", served);
  EXPECT_GT(served, planted->auc - 0.02);
}

// A token sequence with two of four marker tokens (1 to 4) among filler
// tokens (5 to 999); its class is the marker that comes last. A bag of
// words knows which two markers it has, not their order: at best 50%.
struct TextExample {
  std::vector<int64_t> tokens;
  int label = 0;
};
std::vector<TextExample> MarkerTexts(int64_t n, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<TextExample> out(n);
  for (TextExample& e : out) {
    const int64_t length = 8 + static_cast<int64_t>(rng.Next() % 25);  // 8 .. 32
    for (int64_t k = 0; k < length; ++k)
      e.tokens.push_back(5 + static_cast<int64_t>(rng.Next() % 995));
    const int64_t first = static_cast<int64_t>(rng.Next() % 4);
    const int64_t second = (first + 1 + static_cast<int64_t>(rng.Next() % 3)) % 4;
    const int64_t at_first = static_cast<int64_t>(rng.Next() % (length - 1));
    const int64_t at_second =
        at_first + 1 + static_cast<int64_t>(rng.Next() % (length - 1 - at_first));
    e.tokens[at_first] = first + 1;
    e.tokens[at_second] = second + 1;
    e.label = static_cast<int>(second);
  }
  return out;
}

void WriteTexts(const std::string& path, const std::vector<TextExample>& texts) {
  std::string bytes;
  for (const TextExample& t : texts) {
    tf::Example example;
    auto* features = example.mutable_features()->mutable_feature();
    (*features)["label"].mutable_int64_list()->add_value(t.label);
    for (int64_t token : t.tokens) (*features)["tokens"].mutable_int64_list()->add_value(token);
    absl::StrAppend(&bytes, RecordWriter::Frame(example.SerializeAsString()));
  }
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(path, bytes).ok()) << path;
}

TEST_F(SequenceClusterTest, TheTextTransformerLearnsWhichMarkerCameLast) {
  const std::string data = dir_ + "/text";
  ASSERT_TRUE(Env::Default()->CreateDirs(data).ok());
  WriteTexts(data + "/train.tfrecords", MarkerTexts(40000, 1));
  const std::vector<TextExample> test = MarkerTexts(2000, 2);
  WriteTexts(data + "/test.tfrecords", test);
  // Sync with fixed seeds, as above, so the accuracy is the same run after
  // run: 1.0000 here after 250, 300, 400 and 1000 steps (and after 2000
  // async steps); the bound leaves 0.2 for another CPU's rounding.
  const std::string config = WriteClusterConfig(LoopbackConfig{
      .ps = 1,
      .workers = 2,
      .training = "  update: sync\n  replicas_to_aggregate: 2\n  chief_trains: false\n"
                  "  seed: 1\n  sync_timeout: 300\n"});
  ProcessResult r = Train(config, kSource + "/examples/models/text_transformer.yaml", data,
                          dir_ + "/job", 300, "0.003");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::regex eval_line(
      "Saving dict for global step 300: accuracy = ([0-9.]+), global_step = 300");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, eval_line)) << r.output;
  const double accuracy = std::stod(m[1]);
  std::printf(
      "text_transformer, which of 2 markers came last: test accuracy %.4f (a bag of "
      "words: at most 0.5)\n",
      accuracy);
  EXPECT_GT(accuracy, 0.8);

  // Its export answers token lists with the same classes.
  std::string instances;
  for (size_t i = 0; i < 500; ++i) {
    nlohmann::json instance;
    instance["tokens"] = test[i].tokens;
    absl::StrAppend(&instances, instance.dump(), "\n");
  }
  const nlohmann::json predictions = Predict(dir_ + "/job", instances);
  ASSERT_EQ(predictions.size(), 500u);
  int right = 0;
  for (size_t i = 0; i < 500; ++i) right += predictions[i]["classes"].get<int>() == test[i].label;
  std::printf("pstrain-predict on its export: %d of 500 right\n", right);
  EXPECT_GT(right, 0.75 * 500);
}

}  // namespace
}  // namespace pstrain
