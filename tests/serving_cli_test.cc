// A trained job's export answers predictions through pstrain-predict and
// pstrain-serve (driven over HTTP by curl on loopback) with the classes the
// chief's evaluation saw: the accuracy over the test set is the same.
#include <signal.h>

#include <regex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "data/load.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using nlohmann::json;
using testing_util::Background;
using testing_util::Curl;
using testing_util::FreePort;
using testing_util::ProcessResult;
using testing_util::ReadAll;
using testing_util::RunProcess;
using testing_util::StartProcess;
using testing_util::WaitProcess;

const std::string kBin = PSTRAIN_BIN_DIR;

// The one entry of directory `dir` ("" if it has not exactly one).
std::string ListOne(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = Env::Default()->ListDir(dir);
  return names.ok() && names->size() == 1 ? names->front() : "";
}

class ServingCliTest : public testing_util::ClusterTestBase {
 protected:
  ServingCliTest() : ClusterTestBase("serving") {}
};

TEST_F(ServingCliTest, TheExportAnswersAsTheChiefEvaluatedThroughTheCliAndRest) {
  const std::string config = WriteClusterConfig(
      {.training = absl::StrCat("  data_dir: ", data_, "\n  job_dir: ", job_dir(),
                                "\n  update: sync\n  batch_size: 20\n  train_steps: 30"
                                "\n  eval_steps: 0\n  log_every_n_steps: 10\n  "
                                "threads: 1\n  exports_to_keep: 2\n"),
       .credentials = false});
  ProcessResult train = RunProcess({kBin + "/pstrain-launch", "--config=" + config}, 300);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(train.output, m,
                                std::regex("Saving dict for global step 30: accuracy = ([0-9.]+)")))
      << train.output;
  const std::string chief_accuracy = m[1];
  EXPECT_NE(train.output.find("Exported the model for serving to " + job_dir() + "/export/"),
            std::string::npos)
      << train.output;

  // The test set as instances, one JSON list per line (pixel / 255).
  absl::StatusOr<Dataset> test = LoadDataset(Env::Default(), data_, Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  std::string lines;
  json all = json::array();
  for (int64_t i = 0; i < test->size(); ++i) {
    std::vector<float> image;
    for (int64_t k = 0; k < test->example_size(); ++k) {
      image.push_back(test->images[i * test->example_size() + k] / 255.0f);
    }
    absl::StrAppend(&lines, json(image).dump(), "\n");
    all.push_back(image);
  }
  const std::string instances = JoinPath(dir_, "instances.json");
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(instances, lines).ok());
  auto accuracy = [&](const std::vector<int64_t>& classes) {
    int correct = 0;
    for (size_t i = 0; i < classes.size(); ++i) correct += classes[i] == test->labels[i];
    char text[16];
    std::snprintf(text, sizeof(text), "%.4f", static_cast<double>(correct) / classes.size());
    return std::string(text);
  };

  // The CLI: JSON, then gcloud's table with the same classes.
  ProcessResult predict = RunProcess({kBin + "/pstrain-predict", "--model-dir=" + job_dir(),
                                      "--json-instances=" + instances, "--format=json"},
                                     120);
  ASSERT_EQ(predict.exit_code, 0) << predict.output;
  std::vector<int64_t> cli_classes;
  const json cli = json::parse(predict.output);
  for (const json& p : cli["predictions"]) cli_classes.push_back(p["classes"]);
  ASSERT_EQ(cli_classes.size(), static_cast<size_t>(test->size()));
  EXPECT_EQ(accuracy(cli_classes), chief_accuracy);
  ProcessResult table = RunProcess(
      {kBin + "/pstrain-predict", "--model_dir=" + job_dir(), "--json_instances=" + instances},
      120);
  ASSERT_EQ(table.exit_code, 0) << table.output;
  std::vector<std::string> rows = absl::StrSplit(table.output, '\n', absl::SkipEmpty());
  ASSERT_EQ(rows.size(), cli_classes.size() + 1);
  EXPECT_EQ(rows[0], "CLASSES  PROBABILITIES");
  EXPECT_EQ(rows[1].substr(0, rows[1].find(' ')), std::to_string(cli_classes[0]));

  // The REST server.
  const int port = FreePort();
  const std::string base = absl::StrCat("http://127.0.0.1:", port, "/v1/models/mnist");
  Background serve =
      StartProcess({kBin + "/pstrain-serve", "--model_base_path=" + job_dir() + "/export",
                    "--model_name=mnist", "--host=127.0.0.1", absl::StrCat("--port=", port),
                    "--file_system_poll_wait_seconds=1", "--max_request_bytes=3000000"},
                   JoinPath(dir_, "serve.log"));
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    up = Curl("GET", absl::StrCat("http://127.0.0.1:", port, "/healthz")).first == 200;
    if (!up) usleep(100000);
  }
  ASSERT_TRUE(up) << ReadAll(serve.log_path);
  const std::string request = JoinPath(dir_, "request.json");
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(request, json({{"instances", all}}).dump()).ok());
  auto [status, body] = Curl("POST", base + ":predict", request);
  ASSERT_EQ(status, 200) << body;
  std::vector<int64_t> rest_classes;
  const json rest = json::parse(body);
  for (const json& p : rest["predictions"]) rest_classes.push_back(p["classes"]);
  EXPECT_EQ(rest_classes, cli_classes);

  // Bad input: a 4xx with {"error"}, and the server keeps serving.
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(request, "{\"instances\": [[0.5, ").ok());
  auto [bad_status, bad_body] = Curl("POST", base + ":predict", request);
  EXPECT_EQ(bad_status, 400) << bad_body;
  EXPECT_NE(bad_body.find("\"error\":\"malformed JSON"), std::string::npos) << bad_body;
  EXPECT_EQ(Curl("GET", absl::StrCat("http://127.0.0.1:", port, "/v1/models/other")).first, 404);
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(request, std::string(3000001, ' ')).ok());
  auto [big_status, big_body] = Curl("POST", base + ":predict", request);
  EXPECT_EQ(big_status, 413) << big_body;
  EXPECT_NE(big_body.find("over --max_request_bytes"), std::string::npos) << big_body;

  // A new version (pstrain-export of the last checkpoint) is picked up.
  const std::string first =
      json::parse(Curl("GET", base).second)["model_version_status"][0]["version"];
  ProcessResult exported = RunProcess({kBin + "/pstrain-export", job_dir()}, 120);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  std::string now = first;
  for (int i = 0; i < 100 && now == first; ++i) {
    usleep(100000);
    now = json::parse(Curl("GET", base).second)["model_version_status"][0]["version"];
  }
  EXPECT_NE(now, first) << ReadAll(serve.log_path);

  // SIGTERM: it stops and exits 0.
  ASSERT_EQ(::kill(serve.pid, SIGTERM), 0);
  EXPECT_EQ(WaitProcess(&serve, 20), 0) << ReadAll(serve.log_path);
}

// The issue's own command: the quickstart's cluster YAML with a model spec
// file instead of its built-in model, on Fashion-MNIST; the export holds the
// spec, and pstrain-predict and pstrain-serve answer from it alone.
TEST_F(ServingCliTest, TheQuickstartClusterTrainsAModelSpecFileAndItsExportAnswers) {
  const std::string fashion = "/usr/share/datasets/fashion-mnist";
  if (!Env::Default()->FileExists(fashion + "/t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "SKIPPED: no Fashion-MNIST in " << fashion
                 << " (Debian's dataset-fashion-mnist; deploy/install-deps.sh installs it)";
  }
  const std::string source = PSTRAIN_SOURCE_DIR;
  ProcessResult train = RunProcess(
      {kBin + "/pstrain-launch", "--config=" + source + "/deploy/local/cluster.yaml",
       "--model=" + source + "/examples/models/fashion_cnn_bn.yaml", "--job_dir=" + job_dir(),
       "--train_steps=40", "--eval_steps=0", "--log_every_n_steps=20", "--threads=1"},
      600);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_NE(train.output.find(": fashion_cnn_bn, sync updates"), std::string::npos) << train.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(train.output, m,
                                std::regex("Saving dict for global step 40: accuracy = ([0-9.]+)")))
      << train.output;
  // 40 sync steps of 2 x 100 images: far above chance (0.1).
  EXPECT_GT(std::stod(m[1]), 0.5) << train.output;

  // The export names the spec's model and holds the spec.
  const std::string exports = JoinPath(job_dir(), "export");
  absl::StatusOr<std::string> manifest_text =
      Env::Default()->ReadFile(JoinPath(JoinPath(exports, ListOne(exports)), "model.json"));
  ASSERT_TRUE(manifest_text.ok()) << manifest_text.status();
  const json manifest = json::parse(*manifest_text);
  EXPECT_EQ(manifest["model"], "fashion_cnn_bn");
  EXPECT_NE(manifest["model_spec"].get<std::string>().find("batch_norm"), std::string::npos);

  // The checkpoint holds it too.
  ProcessResult ckpt = RunProcess({kBin + "/pstrain-ckpt", job_dir()}, 60);
  ASSERT_EQ(ckpt.exit_code, 0) << ckpt.output;
  EXPECT_NE(ckpt.output.find("model: fashion_cnn_bn\nmodel spec: 10 layers, in the index"),
            std::string::npos)
      << ckpt.output;

  // 200 test images through pstrain-predict and pstrain-serve.
  absl::StatusOr<Dataset> test = LoadDataset(Env::Default(), fashion, Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  constexpr int kImages = 200;
  std::string lines;
  json all = json::array();
  for (int64_t i = 0; i < kImages; ++i) {
    std::vector<float> image;
    for (int64_t k = 0; k < test->example_size(); ++k) {
      image.push_back(test->images[i * test->example_size() + k] / 255.0f);
    }
    absl::StrAppend(&lines, json(image).dump(), "\n");
    all.push_back(image);
  }
  const std::string instances = JoinPath(dir_, "instances.json");
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(instances, lines).ok());
  ProcessResult predict = RunProcess({kBin + "/pstrain-predict", "--model_dir=" + job_dir(),
                                      "--json_instances=" + instances, "--format=json"},
                                     120);
  ASSERT_EQ(predict.exit_code, 0) << predict.output;
  std::vector<int64_t> cli_classes;
  const json cli = json::parse(predict.output);
  for (const json& p : cli["predictions"]) cli_classes.push_back(p["classes"]);
  ASSERT_EQ(cli_classes.size(), static_cast<size_t>(kImages));
  int correct = 0;
  for (int i = 0; i < kImages; ++i) correct += cli_classes[i] == test->labels[i];
  EXPECT_GT(correct, kImages / 2);

  const int port = FreePort();
  Background serve =
      StartProcess({kBin + "/pstrain-serve", "--model_base_path=" + job_dir() + "/export",
                    "--model_name=fashion", "--host=127.0.0.1", absl::StrCat("--port=", port)},
                   JoinPath(dir_, "serve-spec.log"));
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    up = Curl("GET", absl::StrCat("http://127.0.0.1:", port, "/healthz")).first == 200;
    if (!up) usleep(100000);
  }
  ASSERT_TRUE(up) << ReadAll(serve.log_path);
  const std::string request = JoinPath(dir_, "request-spec.json");
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(request, json({{"instances", all}}).dump()).ok());
  auto [status, body] =
      Curl("POST", absl::StrCat("http://127.0.0.1:", port, "/v1/models/fashion:predict"), request);
  ASSERT_EQ(status, 200) << body;
  std::vector<int64_t> rest_classes;
  const json rest = json::parse(body);
  for (const json& p : rest["predictions"]) rest_classes.push_back(p["classes"]);
  EXPECT_EQ(rest_classes, cli_classes);
  ASSERT_EQ(::kill(serve.pid, SIGTERM), 0);
  EXPECT_EQ(WaitProcess(&serve, 20), 0) << ReadAll(serve.log_path);
}

}  // namespace
}  // namespace pstrain
