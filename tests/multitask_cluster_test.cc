// Multi-task models end to end on real processes (issue 53): impressions
// with a click, a purchase and a dwell time (pstrain-data
// synthetic-multitask, planted models of known quality), a job of two heads
// (binary + regression) and the MMoE example (two binary heads) trained from
// CSV and from Examples, evaluated per head, and their exports answering by
// head through pstrain-predict, pstrain-serve's REST API (raw rows) and
// Python, each agreeing with the others.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using nlohmann::json;
using testing_util::Background;
using testing_util::Curl;
using testing_util::FreePort;
using testing_util::LoopbackConfig;
using testing_util::ProcessResult;
using testing_util::ReadAll;
using testing_util::RunProcess;
using testing_util::StartProcess;
using testing_util::WaitProcess;

const std::string kBin = PSTRAIN_BIN_DIR;
const std::string kSource = PSTRAIN_SOURCE_DIR;

// Click (binary) and dwell (regression) from the same features: a shared
// layer, a tower per head.
constexpr char kTwoHeads[] =
    "name: click_dwell\ninput: [1]\n"
    "heads:\n"
    "  - {name: click, kind: binary, input: click_logit}\n"
    "  - {name: dwell, kind: regression, input: dwell_out, weight: 0.02}\n"
    "layers:\n"
    "  - embedding: {feature: user, dim: 8, buckets: 5000, name: user_emb}\n"
    "  - embedding: {feature: item, dim: 8, buckets: 2000, name: item_emb}\n"
    "  - embedding: {feature: hour, dim: 2, buckets: 2, name: hour_emb}\n"
    "  - concat: {input: input, inputs: [user_emb, item_emb, hour_emb], name: features}\n"
    "  - dense: {units: 32, activation: relu, name: shared}\n"
    "  - dense: {units: 1, name: click_logit}\n"
    "  - dense: {input: shared, units: 16, activation: relu, name: dwell_tower}\n"
    "  - dense: {units: 1, name: dwell_out}\n";

constexpr char kTwoHeadsSchema[] =
    "csv:\n  labels: [click, dwell]\n  numeric:\n    - {name: price, transform: log1p}\n"
    "  categorical:\n    - {name: user, hash_buckets: 5000}\n"
    "    - {name: item, hash_buckets: 2000}\n    - {name: hour, bucketize: [18]}\n";

struct Planted {
  double click_auc = 0, convert_auc = 0, dwell_rmse = 0;
};

// The metrics of the last "Saving dict" line, by key.
std::map<std::string, double> LastEvaluation(const std::string& output) {
  std::map<std::string, double> metrics;
  const size_t at = output.rfind("Saving dict for global step ");
  if (at == std::string::npos) return metrics;
  const std::string line = output.substr(at, output.find('\n', at) - at);
  const std::regex item("([a-z_/]+) = ([-0-9.e]+)");
  for (std::sregex_iterator it(line.begin(), line.end(), item), end; it != end; ++it) {
    metrics[(*it)[1]] = std::stod((*it)[2]);
  }
  return metrics;
}

class MultitaskClusterTest : public testing_util::ClusterTestBase {
 protected:
  MultitaskClusterTest() : ClusterTestBase("multitask_cluster") {}

  // Writes DIR/csv/{train,test}.csv and returns the planted models' quality.
  Planted MakeData() {
    ProcessResult r =
        RunProcess({kBin + "/pstrain-data", "synthetic-multitask", "--out", dir_ + "/csv",
                    "--examples", "120000", "--test_examples", "10000"},
                   120);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::smatch m;
    const std::regex line("click auc = ([0-9.]+), convert auc = ([0-9.]+), dwell rmse = ([0-9.]+)");
    Planted p;
    if (std::regex_search(r.output, m, line)) {
      p = {std::stod(m[1]), std::stod(m[2]), std::stod(m[3])};
    } else {
      ADD_FAILURE() << r.output;
    }
    return p;
  }

  ProcessResult Train(const std::string& model, const std::vector<std::string>& input,
                      const std::string& job, int steps) {
    const std::string config = WriteClusterConfig(LoopbackConfig{.ps = 1, .workers = 1});
    std::vector<std::string> args = {kBin + "/pstrain-launch",
                                     "--config=" + config,
                                     "--model=" + model,
                                     "--job_dir=" + job,
                                     absl::StrCat("--train_steps=", steps),
                                     "--eval_steps=0",
                                     "--log_every_n_steps=1000",
                                     "--batch_size=128",
                                     "--learning_rate=0.003",
                                     "--embedding_learning_rate=0.05",
                                     "--eval_batch_size=1000"};
    args.insert(args.end(), input.begin(), input.end());
    return RunProcess(args, 600);
  }
};

TEST_F(MultitaskClusterTest, TwoHeadsTrainFromCsvAndExamplesAndTheirExportAnswersByHead) {
  Env* env = Env::Default();
  const Planted planted = MakeData();
  const std::string csv = dir_ + "/csv";
  ASSERT_TRUE(env->WriteFileAtomic(dir_ + "/schema.yaml", kTwoHeadsSchema).ok());
  ASSERT_TRUE(env->WriteFileAtomic(dir_ + "/click_dwell.yaml", kTwoHeads).ok());
  const std::string job = dir_ + "/job_csv";
  ProcessResult r =
      Train(dir_ + "/click_dwell.yaml",
            {"--train_files=" + csv + "/train.csv", "--eval_files=" + csv + "/test.csv",
             "--csv_schema=" + dir_ + "/schema.yaml"},
            job, 3000);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Every head's metrics by name, in key order, then the model's loss.
  EXPECT_TRUE(std::regex_search(
      r.output,
      std::regex("Saving dict for global step 3000: click/accuracy = [0-9.]+, click/auc = "
                 "[0-9.]+, click/loss = [0-9.]+, dwell/loss = [0-9.]+, dwell/mae = [0-9.]+, "
                 "dwell/rmse = [0-9.]+, global_step = 3000, loss = [0-9.]+")))
      << r.output;
  const std::map<std::string, double> from_csv = LastEvaluation(r.output);
  std::printf(
      "two heads from CSV, 3000 steps of 128: click auc %.4f (planted %.4f), dwell rmse %.3f "
      "(planted %.3f)\n",
      from_csv.at("click/auc"), planted.click_auc, from_csv.at("dwell/rmse"), planted.dwell_rmse);
  EXPECT_GT(from_csv.at("click/auc"), planted.click_auc - 0.06);
  // The dwell's spread is ~13 s (predicting its mean scores that); its
  // planted noise 5 s.
  EXPECT_LT(from_csv.at("dwell/rmse"), 1.6 * planted.dwell_rmse);
  // TensorBoard's eval run has each head's metrics under its name.
  ProcessResult events = RunProcess({kBin + "/pstrain-events", job}, 60);
  ASSERT_EQ(events.exit_code, 0) << events.output;
  for (const std::string tag : {"click/auc", "click/pr_curve", "dwell/rmse", "dwell/mae", "loss"}) {
    EXPECT_NE(events.output.find("  " + tag + " "), std::string::npos) << tag << events.output;
  }

  // The same rows as Examples (a feature per label, float labels) train the
  // same job.
  for (const std::string name : {"train", "test"}) {
    ProcessResult converted =
        RunProcess({kBin + "/pstrain-data", "convert", csv + "/" + name + ".csv", "--out",
                    dir_ + "/examples/" + name, "--csv_schema", dir_ + "/schema.yaml",
                    "--label_type", "float"},
                   120);
    ASSERT_EQ(converted.exit_code, 0) << converted.output;
  }
  ProcessResult from_examples_run = Train(
      dir_ + "/click_dwell.yaml",
      {"--train_files=" + dir_ + "/examples/train*", "--eval_files=" + dir_ + "/examples/test*",
       // The schema the rows were converted with: the export keeps it and
       // takes raw rows.
       "--csv_schema=" + dir_ + "/schema.yaml"},
      dir_ + "/job_examples", 3000);
  ASSERT_EQ(from_examples_run.exit_code, 0) << from_examples_run.output;
  const std::map<std::string, double> from_examples = LastEvaluation(from_examples_run.output);
  std::printf("the same from Examples: click auc %.4f, dwell rmse %.3f\n",
              from_examples.at("click/auc"), from_examples.at("dwell/rmse"));
  EXPECT_NEAR(from_examples.at("click/auc"), from_csv.at("click/auc"), 0.02);
  EXPECT_NEAR(from_examples.at("dwell/rmse"), from_csv.at("dwell/rmse"), 0.1 * planted.dwell_rmse);

  // The export answers raw rows by head: pstrain-predict from the CSV lines
  // and from JSON rows, pstrain-serve over REST, and Python, the same values.
  const std::string lines = ReadAll(csv + "/test.csv");
  std::vector<std::string> rows = absl::StrSplit(lines, '\n', absl::SkipEmpty());
  rows.resize(201);  // the header and 200 rows
  std::string few_csv, raw_json;
  json instances = json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    absl::StrAppend(&few_csv, rows[i], "\n");
    if (i == 0) continue;
    std::vector<std::string> f = absl::StrSplit(rows[i], ',');
    const json row = {
        {"user", f[0]}, {"item", f[1]}, {"price", std::stod(f[2])}, {"hour", std::stoi(f[3])}};
    instances.push_back(row);
    absl::StrAppend(&raw_json, row.dump(), "\n");
  }
  ASSERT_TRUE(env->WriteFileAtomic(dir_ + "/few.csv", few_csv).ok());
  ASSERT_TRUE(env->WriteFileAtomic(dir_ + "/raw.json", raw_json).ok());
  std::vector<json> answers;
  for (const std::string& flag :
       {"--csv_instances=" + dir_ + "/few.csv", "--json_instances=" + dir_ + "/raw.json"}) {
    ProcessResult p =
        RunProcess({kBin + "/pstrain-predict", "--model_dir=" + job, flag, "--format=json"}, 120);
    ASSERT_EQ(p.exit_code, 0) << p.output;
    answers.push_back(
        json::parse(p.output.substr(p.output.rfind("{\"predictions\"")))["predictions"]);
    ASSERT_EQ(answers.back().size(), 200u);
  }
  EXPECT_EQ(answers[0], answers[1]);
  // The job from Examples with that schema answers raw rows too.
  ProcessResult examples_raw =
      RunProcess({kBin + "/pstrain-predict", "--model_dir=" + dir_ + "/job_examples",
                  "--csv_instances=" + dir_ + "/few.csv", "--format=json"},
                 120);
  ASSERT_EQ(examples_raw.exit_code, 0) << examples_raw.output;
  EXPECT_EQ(json::parse(examples_raw.output.substr(
                examples_raw.output.rfind("{\"predictions\"")))["predictions"]
                .size(),
            200u);
  const json& first = answers[0][0];
  ASSERT_TRUE(first.is_object() && first.contains("click") && first.contains("dwell")) << first;
  EXPECT_GT(first["click"].get<double>(), 0.0);
  EXPECT_LT(first["click"].get<double>(), 1.0);

  const int port = FreePort();
  Background serve =
      StartProcess({kBin + "/pstrain-serve", "--model_base_path=" + job + "/export",
                    "--model_name=shop", "--host=127.0.0.1", absl::StrCat("--port=", port)},
                   dir_ + "/serve.log");
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    up = Curl("GET", absl::StrCat("http://127.0.0.1:", port, "/healthz")).first == 200;
    if (!up) usleep(100000);
  }
  ASSERT_TRUE(up) << ReadAll(serve.log_path);
  const std::string base = absl::StrCat("http://127.0.0.1:", port, "/v1/models/shop");
  ASSERT_TRUE(
      env->WriteFileAtomic(dir_ + "/request.json", json({{"instances", instances}}).dump()).ok());
  auto [status, body] = Curl("POST", base + ":predict", dir_ + "/request.json");
  ASSERT_EQ(status, 200) << body;
  EXPECT_EQ(json::parse(body)["predictions"], answers[0]);
  // The signature names an output per head.
  auto [meta_status, meta] = Curl("GET", base + "/metadata");
  ASSERT_EQ(meta_status, 200) << meta;
  EXPECT_NE(meta.find("\"click\""), std::string::npos) << meta;
  EXPECT_NE(meta.find("\"dwell\""), std::string::npos) << meta;
  // A bad column is a 400 naming it.
  ASSERT_TRUE(env->WriteFileAtomic(dir_ + "/bad.json",
                                   R"({"instances": [{"user": "1", "item": "2", "price": "cheap",
                                   "hour": 3}]})")
                  .ok());
  auto [bad_status, bad_body] = Curl("POST", base + ":predict", dir_ + "/bad.json");
  EXPECT_EQ(bad_status, 400) << bad_body;
  EXPECT_NE(bad_body.find("price"), std::string::npos) << bad_body;
  ASSERT_EQ(::kill(serve.pid, SIGTERM), 0);
  EXPECT_EQ(WaitProcess(&serve, 20), 0) << ReadAll(serve.log_path);

  if (std::string(PSTRAIN_PYTHON_DIR).empty()) {
    GTEST_SKIP() << "SKIPPED: the Python check (this build has no Python module)";
  }
  ASSERT_TRUE(env->WriteFileAtomic(dir_ + "/predict.py",
                                   "import json, sys, pstrain\n"
                                   "model = pstrain.Predictor(sys.argv[1])\n"
                                   "rows = [json.loads(line) for line in open(sys.argv[2])]\n"
                                   "out = model.predict(rows)\n"
                                   "print(json.dumps({k: v.tolist() for k, v in out.items()}))\n")
                  .ok());
  ProcessResult python =
      RunProcess({"/usr/bin/env", "PYTHONPATH=" + std::string(PSTRAIN_PYTHON_DIR),
                  "/usr/bin/python3", dir_ + "/predict.py", job, dir_ + "/raw.json"},
                 120);
  ASSERT_EQ(python.exit_code, 0) << python.output;
  const json py = json::parse(python.output.substr(python.output.rfind('{')));
  ASSERT_EQ(py.size(), 2u) << py;
  for (size_t i = 0; i < 200; ++i) {
    EXPECT_EQ(py["click"][i].get<float>(), answers[0][i]["click"].get<float>()) << i;
    EXPECT_EQ(py["dwell"][i].get<float>(), answers[0][i]["dwell"].get<float>()) << i;
  }
}

// The MMoE example (examples/models/shop_mmoe.yaml with its CSV schema) on
// the same kind of rows, from CSV and from Examples: both heads' AUCs near
// the planted models'.
TEST_F(MultitaskClusterTest, TheMmoeExampleLearnsClickAndPurchase) {
  const Planted planted = MakeData();
  const std::string csv = dir_ + "/csv";
  ProcessResult r =
      Train(kSource + "/examples/models/shop_mmoe.yaml",
            {"--train_files=" + csv + "/train.csv", "--eval_files=" + csv + "/test.csv",
             "--csv_schema=" + kSource + "/examples/csv/shop_schema.yaml"},
            dir_ + "/job_mmoe", 4000);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::map<std::string, double> m = LastEvaluation(r.output);
  ASSERT_TRUE(m.count("click/auc") && m.count("convert/auc")) << r.output;
  std::printf(
      "shop_mmoe from CSV, 4000 steps of 128: click auc %.4f (planted %.4f), convert auc %.4f "
      "(planted %.4f)\n",
      m.at("click/auc"), planted.click_auc, m.at("convert/auc"), planted.convert_auc);
  EXPECT_GT(m.at("click/auc"), planted.click_auc - 0.06);
  EXPECT_GT(m.at("convert/auc"), planted.convert_auc - 0.06);
  // The same rows as Examples (a feature per label) train it the same.
  for (const std::string name : {"train", "test"}) {
    ProcessResult converted = RunProcess(
        {kBin + "/pstrain-data", "convert", csv + "/" + name + ".csv", "--out",
         dir_ + "/examples/" + name, "--csv_schema", kSource + "/examples/csv/shop_schema.yaml"},
        120);
    ASSERT_EQ(converted.exit_code, 0) << converted.output;
  }
  ProcessResult examples_run = Train(
      kSource + "/examples/models/shop_mmoe.yaml",
      {"--train_files=" + dir_ + "/examples/train*", "--eval_files=" + dir_ + "/examples/test*"},
      dir_ + "/job_mmoe_examples", 4000);
  ASSERT_EQ(examples_run.exit_code, 0) << examples_run.output;
  const std::map<std::string, double> e = LastEvaluation(examples_run.output);
  std::printf("the same from Examples: click auc %.4f, convert auc %.4f\n", e.at("click/auc"),
              e.at("convert/auc"));
  EXPECT_NEAR(e.at("click/auc"), m.at("click/auc"), 0.02);
  EXPECT_NEAR(e.at("convert/auc"), m.at("convert/auc"), 0.02);
  ProcessResult p = RunProcess({kBin + "/pstrain-predict", "--model_dir=" + dir_ + "/job_mmoe",
                                "--csv_instances=" + csv + "/test.csv", "--format=json"},
                               120);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const json answers =
      json::parse(p.output.substr(p.output.rfind("{\"predictions\"")))["predictions"];
  ASSERT_EQ(answers.size(), 10000u);
  EXPECT_TRUE(answers[0].contains("click") && answers[0].contains("convert")) << answers[0];
}

}  // namespace
}  // namespace pstrain
