// A regression head end to end on real processes (issue 53): CSV shards
// whose label is a number, a job of 1 ps, a worker and the chief, the
// chief's evaluation by its errors (the Saving dict line), and the export's
// predictions through pstrain-predict, which give the errors the chief
// evaluated on the same rows.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "models/random.h"
#include "nlohmann/json.hpp"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using testing_util::LoopbackConfig;
using testing_util::ProcessResult;
using testing_util::RunProcess;

const std::string kBin = PSTRAIN_BIN_DIR;

// y = 3 x1 - 2 x2 + effect(cat) + noise: x uniform in [-1, 1], 20
// categories with effects in [-2, 2], noise uniform in [-0.5, 0.5] (its
// root mean square 0.29, the best rmse a model can reach).
struct Row {
  float x1 = 0, x2 = 0;
  int cat = 0;
  float y = 0;
};

std::vector<Row> Rows(int n, uint64_t seed) {
  SplitMix64 effects_rng(77);
  std::vector<float> effect(20);
  for (float& e : effect) e = effects_rng.Uniform() * 4 - 2;
  SplitMix64 rng(seed);
  std::vector<Row> rows(n);
  for (Row& r : rows) {
    r.x1 = rng.Uniform() * 2 - 1;
    r.x2 = rng.Uniform() * 2 - 1;
    r.cat = static_cast<int>(rng.Next() % 20);
    r.y = 3 * r.x1 - 2 * r.x2 + effect[r.cat] + (rng.Uniform() - 0.5f);
  }
  return rows;
}

std::string Csv(const std::vector<Row>& rows) {
  std::string text = "y,x1,x2,cat\n";
  for (const Row& r : rows) {
    absl::StrAppend(&text, absl::StrFormat("%.6g,%.6g,%.6g,c%d\n", r.y, r.x1, r.x2, r.cat));
  }
  return text;
}

constexpr char kSchema[] =
    "csv:\n  label: y\n  numeric:\n    - {name: x1}\n    - {name: x2}\n  categorical:\n"
    "    - {name: cat, hash_buckets: 100}\n";

constexpr char kModel[] =
    "name: delay\ninput: [2]\nhead: regression\nloss: huber\nhuber_delta: 1.0\nlayers:\n"
    "  - embedding: {feature: cat, dim: 4, buckets: 100, name: emb}\n"
    "  - concat: {input: input, inputs: [emb]}\n"
    "  - dense: {units: 16, activation: relu}\n"
    "  - dense: {units: 1}\n";

class RegressionClusterTest : public testing_util::ClusterTestBase {
 protected:
  RegressionClusterTest() : ClusterTestBase("regression_cluster") {}
};

TEST_F(RegressionClusterTest, ACsvJobIsEvaluatedByItsErrorsAndItsExportPredictsTheValues) {
  Env* env = Env::Default();
  const std::string csv = dir_ + "/csv";
  ASSERT_TRUE(env->CreateDirs(csv).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        env->WriteFileAtomic(absl::StrCat(csv, "/train-", i, ".csv"), Csv(Rows(4000, 1 + i))).ok());
  }
  const std::vector<Row> test = Rows(1000, 9);
  ASSERT_TRUE(env->WriteFileAtomic(csv + "/test.csv", Csv(test)).ok());
  ASSERT_TRUE(env->WriteFileAtomic(csv + "/schema.yaml", kSchema).ok());
  ASSERT_TRUE(env->WriteFileAtomic(dir_ + "/delay.yaml", kModel).ok());
  const std::string config = WriteClusterConfig(LoopbackConfig{.ps = 1, .workers = 1});
  ProcessResult r = RunProcess(
      {kBin + "/pstrain-launch", "--config=" + config, "--model=" + dir_ + "/delay.yaml",
       "--train_files=" + csv + "/train-*.csv", "--eval_files=" + csv + "/test.csv",
       "--csv_schema=" + csv + "/schema.yaml", "--job_dir=" + job_dir(), "--train_steps=1000",
       "--eval_steps=0", "--log_every_n_steps=250", "--batch_size=64", "--learning_rate=0.01",
       "--embedding_learning_rate=0.05", "--eval_batch_size=500"},
      300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  const std::regex line(
      "Saving dict for global step 1000: loss = ([0-9.]+), mae = ([0-9.]+), rmse = ([0-9.]+), "
      "global_step = 1000");
  ASSERT_TRUE(std::regex_search(r.output, m, line)) << r.output;
  const double loss = std::stod(m[1]), mae = std::stod(m[2]), rmse = std::stod(m[3]);
  double mean = 0, variance = 0;
  for (const Row& row : test) mean += row.y / test.size();
  for (const Row& row : test) variance += (row.y - mean) * (row.y - mean) / test.size();
  std::printf(
      "regression from CSV, 12000 rows, 1000 steps: test loss (huber) %.4f, mae %.4f, rmse %.4f; "
      "the labels' standard deviation %.4f, the noise's rmse 0.29\n",
      loss, mae, rmse, std::sqrt(variance));
  // The labels' spread is ~2.3; predicting their mean scores that much.
  EXPECT_LT(rmse, 0.25 * std::sqrt(variance)) << r.output;
  EXPECT_LE(mae, rmse);
  // TensorBoard's eval run has the errors (and no accuracy).
  ProcessResult events = RunProcess({kBin + "/pstrain-events", job_dir()}, 60);
  ASSERT_EQ(events.exit_code, 0) << events.output;
  const size_t eval_run = events.output.find("\nrun eval:");
  ASSERT_NE(eval_run, std::string::npos) << events.output;
  const std::string eval_tags =
      events.output.substr(eval_run + 1, events.output.find("\nrun ", eval_run + 1) - eval_run);
  for (const std::string tag : {"mae", "rmse", "loss"}) {
    EXPECT_TRUE(std::regex_search(eval_tags, std::regex("\n  " + tag + " +scalar +1 points")))
        << tag << "\n"
        << eval_tags;
  }
  EXPECT_EQ(eval_tags.find("accuracy"), std::string::npos) << eval_tags;
  ProcessResult described =
      RunProcess({kBin + "/pstrain-model", "describe", dir_ + "/delay.yaml"}, 60);
  ASSERT_EQ(described.exit_code, 0) << described.output;
  EXPECT_NE(described.output.find("regression head: one value, huber loss"), std::string::npos)
      << described.output;

  // The export answers each test row, given as its columns' values (the
  // category as the token the CSV had: a bucketed table hashes it as the
  // schema's hash_buckets did), with its value: the errors of the served
  // values are the chief's.
  std::string instances;
  for (const Row& row : test) {
    absl::StrAppend(
        &instances,
        nlohmann::json({{"dense", {row.x1, row.x2}}, {"cat", {absl::StrCat("c", row.cat)}}}).dump(),
        "\n");
  }
  ASSERT_TRUE(env->WriteFileAtomic(dir_ + "/instances.json", instances).ok());
  ProcessResult predicted =
      RunProcess({kBin + "/pstrain-predict", "--model_dir=" + job_dir(),
                  "--json_instances=" + dir_ + "/instances.json", "--format=json"},
                 120);
  ASSERT_EQ(predicted.exit_code, 0) << predicted.output;
  const size_t at = predicted.output.rfind("{\"predictions\"");
  ASSERT_NE(at, std::string::npos) << predicted.output;
  const nlohmann::json values = nlohmann::json::parse(predicted.output.substr(at))["predictions"];
  ASSERT_EQ(values.size(), test.size());
  double served_abs = 0, served_squared = 0;
  for (size_t i = 0; i < test.size(); ++i) {
    ASSERT_TRUE(values[i].is_number()) << values[i];
    const double d = values[i].get<double>() - test[i].y;
    served_abs += std::abs(d) / test.size();
    served_squared += d * d / test.size();
  }
  EXPECT_NEAR(served_abs, mae, 1e-4);
  EXPECT_NEAR(std::sqrt(served_squared), rmse, 1e-4);

  // The export keeps the job's CSV schema: the test file's raw rows, as CSV
  // lines and as JSON objects of their columns (a whole row, label and all),
  // are predicted with the same values, and those are the values of the
  // features given as above (up to the CSV's 6 digits).
  std::string raw_rows;
  const std::string test_csv = Csv(test);
  for (absl::string_view record : absl::StrSplit(test_csv, '\n', absl::SkipEmpty())) {
    if (record.substr(0, 2) == "y,") continue;  // the header
    const std::vector<std::string> f = absl::StrSplit(record, ',');
    absl::StrAppend(&raw_rows,
                    nlohmann::json({{"y", nlohmann::json::parse(f[0])},
                                    {"x1", nlohmann::json::parse(f[1])},
                                    {"x2", nlohmann::json::parse(f[2])},
                                    {"cat", f[3]}})
                        .dump(),
                    "\n");
  }
  ASSERT_TRUE(env->WriteFileAtomic(dir_ + "/raw.json", raw_rows).ok());
  std::vector<nlohmann::json> raw_values;
  for (const std::string& flag :
       {"--csv_instances=" + csv + "/test.csv", "--json_instances=" + dir_ + "/raw.json"}) {
    ProcessResult raw = RunProcess(
        {kBin + "/pstrain-predict", "--model_dir=" + job_dir(), flag, "--format=json"}, 120);
    ASSERT_EQ(raw.exit_code, 0) << flag << "\n" << raw.output;
    raw_values.push_back(nlohmann::json::parse(
        raw.output.substr(raw.output.rfind("{\"predictions\"")))["predictions"]);
    ASSERT_EQ(raw_values.back().size(), test.size()) << flag;
  }
  EXPECT_EQ(raw_values[0], raw_values[1]);
  for (size_t i = 0; i < test.size(); ++i) {
    EXPECT_NEAR(raw_values[0][i].get<double>(), values[i].get<double>(), 1e-4) << "row " << i;
  }

  // pstrain.Predictor gives the same values, as an array "predictions".
  if (std::string(PSTRAIN_PYTHON_DIR).empty()) {
    GTEST_SKIP() << "SKIPPED: the Python check (this build has no Python module)";
  }
  ASSERT_TRUE(env->WriteFileAtomic(dir_ + "/predict.py",
                                   "import json, sys, pstrain\n"
                                   "model = pstrain.Predictor(sys.argv[1])\n"
                                   "rows = [json.loads(line) for line in open(sys.argv[2])]\n"
                                   "out = model.predict(rows)\n"
                                   "print(json.dumps({'keys': sorted(out), "
                                   "'values': out['predictions'].tolist()}))\n")
                  .ok());
  ProcessResult python =
      RunProcess({"/usr/bin/env", "PYTHONPATH=" + std::string(PSTRAIN_PYTHON_DIR),
                  "/usr/bin/python3", dir_ + "/predict.py", job_dir(), dir_ + "/instances.json"},
                 120);
  ASSERT_EQ(python.exit_code, 0) << python.output;
  const nlohmann::json py = nlohmann::json::parse(python.output.substr(python.output.rfind('{')));
  EXPECT_EQ(py["keys"], nlohmann::json({"predictions"}));
  ASSERT_EQ(py["values"].size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(py["values"][i].get<float>(), values[i].get<float>()) << "instance " << i;
  }
  // And for the raw rows, pstrain-predict's values.
  python = RunProcess({"/usr/bin/env", "PYTHONPATH=" + std::string(PSTRAIN_PYTHON_DIR),
                       "/usr/bin/python3", dir_ + "/predict.py", job_dir(), dir_ + "/raw.json"},
                      120);
  ASSERT_EQ(python.exit_code, 0) << python.output;
  const nlohmann::json py_raw =
      nlohmann::json::parse(python.output.substr(python.output.rfind('{')));
  ASSERT_EQ(py_raw["values"].size(), raw_values[0].size());
  for (size_t i = 0; i < raw_values[0].size(); ++i) {
    EXPECT_EQ(py_raw["values"][i].get<float>(), raw_values[0][i].get<float>()) << "row " << i;
  }
  ProcessResult table = RunProcess({kBin + "/pstrain-predict", "--model_dir=" + job_dir(),
                                    "--json_instances=" + dir_ + "/instances.json"},
                                   120);
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("PREDICTIONS\n"), std::string::npos) << table.output.substr(0, 2000);
}

// The same rows as Examples (pstrain-data convert --csv_schema
// --label_type=float writes the labels as floats) train the same
// regression job; its evaluation on the converted test rows is by errors.
TEST_F(RegressionClusterTest, TheRowsConvertedToExamplesTrainTheSameJob) {
  Env* env = Env::Default();
  const std::string csv = dir_ + "/csv";
  ASSERT_TRUE(env->CreateDirs(csv).ok());
  ASSERT_TRUE(env->WriteFileAtomic(csv + "/train.csv", Csv(Rows(6000, 1))).ok());
  const std::vector<Row> test = Rows(1000, 9);
  ASSERT_TRUE(env->WriteFileAtomic(csv + "/test.csv", Csv(test)).ok());
  ASSERT_TRUE(env->WriteFileAtomic(csv + "/schema.yaml", kSchema).ok());
  ASSERT_TRUE(env->WriteFileAtomic(dir_ + "/delay.yaml", kModel).ok());
  for (const std::string name : {"train", "test"}) {
    ProcessResult converted =
        RunProcess({kBin + "/pstrain-data", "convert", csv + "/" + name + ".csv", "--out",
                    dir_ + "/examples/" + name, "--shards", "2", "--csv_schema",
                    csv + "/schema.yaml", "--label_type", "float"},
                   120);
    ASSERT_EQ(converted.exit_code, 0) << converted.output;
  }
  const std::string config = WriteClusterConfig(LoopbackConfig{.ps = 1, .workers = 1});
  ProcessResult r = RunProcess(
      {kBin + "/pstrain-launch", "--config=" + config, "--model=" + dir_ + "/delay.yaml",
       "--train_files=" + dir_ + "/examples/train-*", "--eval_files=" + dir_ + "/examples/test-*",
       "--job_dir=" + job_dir(), "--train_steps=600", "--eval_steps=0", "--log_every_n_steps=200",
       "--batch_size=64", "--learning_rate=0.01", "--embedding_learning_rate=0.05",
       "--eval_batch_size=500"},
      300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  const std::regex line(
      "Saving dict for global step 600: loss = ([0-9.]+), mae = ([0-9.]+), rmse = ([0-9.]+), "
      "global_step = 600");
  ASSERT_TRUE(std::regex_search(r.output, m, line)) << r.output;
  const double rmse = std::stod(m[3]);
  std::printf("regression from Examples converted from CSV, 600 steps: rmse %.4f\n", rmse);
  // The labels' spread is ~2.2 (the CSV job's test); the noise's rmse 0.29.
  EXPECT_LT(rmse, 0.5) << r.output;
}

}  // namespace
}  // namespace pstrain
