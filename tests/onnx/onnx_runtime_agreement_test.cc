// Every built-in and example model's model.onnx, run by ONNX Runtime (npm
// onnxruntime-node, tests/onnx/ort_run.js) on 100 test images, gives
// pstrain-predict's classes and its probabilities within 1e-5; the onnx
// package's checker (Debian's python3-onnx, tests/onnx/check_onnx.py,
// full_check) accepts each file. Exports are made by make_test_export: initial
// values after three SGD steps, moving statistics from a batch. Images:
// Fashion-MNIST's test set for 28x28x1 models, fixed synthetic pixels for the
// others. Without node, onnxruntime-node or python3-onnx every test is
// skipped, saying what is missing.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/env.h"
#include "config/model_spec.h"
#include "data/mnist.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using json = nlohmann::json;

const std::string kBin = PSTRAIN_BIN_DIR;
const std::string kSource = PSTRAIN_SOURCE_DIR;
const std::string kNodePath = PSTRAIN_NODE_PATH;
const std::string kPython = "/usr/bin/python3";
constexpr int kImages = 100;
constexpr double kTolerance = 1e-5;

struct CommandResult {
  int exit_code = -1;  // -1: killed by a signal or timed out
  std::string out, err;
};

// Runs `args` (at most `timeout_secs`), stdout and stderr apart.
CommandResult RunCommand(const std::vector<std::string>& args, const std::string& scratch,
                         int timeout_secs = 120) {
  std::string command = absl::StrCat("timeout --kill-after=5 ", timeout_secs);
  for (const std::string& a : args) absl::StrAppend(&command, " '", a, "'");
  absl::StrAppend(&command, " >'", scratch, ".out' 2>'", scratch, ".err'");
  CommandResult r;
  const int status = std::system(command.c_str());
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = Env::Default()->ReadFile(scratch + ".out").value_or("");
  r.err = Env::Default()->ReadFile(scratch + ".err").value_or("");
  return r;
}

// Why the agreement cannot be checked here ("" if it can).
std::string MissingTools(const std::string& scratch) {
  if (RunCommand({"node", "--version"}, scratch, 30).exit_code != 0) {
    return "no node on PATH (Debian's nodejs)";
  }
  if (!Env::Default()->FileExists(kNodePath + "/onnxruntime-node/package.json")) {
    return "no onnxruntime-node in " + kNodePath + " (deploy/install-deps.sh installs it)";
  }
  if (RunCommand({kPython, "-c", "import onnx.checker"}, scratch, 60).exit_code != 0) {
    return "no onnx package for " + kPython + " (Debian's python3-onnx)";
  }
  return "";
}

// The models: the built-ins, every image model of examples/models/*.yaml,
// and the spec with every layer type. The click models there (a flat input
// of dense features, embedding tables) are not image models: their export
// is not an image classifier's.
std::vector<std::string> Models() {
  std::vector<std::string> models = {"mnist_cnn", "cifar10_resnet:20"};
  std::vector<std::string> examples;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator(kSource + "/examples/models", error)) {
    if (entry.path().extension() != ".yaml") continue;
    absl::StatusOr<std::string> text = Env::Default()->ReadFile(entry.path().string());
    if (!text.ok()) continue;
    absl::StatusOr<ModelSpec> spec = ParseModelSpec(*text, entry.path().string());
    if (spec.ok() && spec->input.size() != 3) continue;  // a click model
    examples.push_back(entry.path().string());
  }
  std::sort(examples.begin(), examples.end());
  models.insert(models.end(), examples.begin(), examples.end());
  models.push_back(kSource + "/tests/onnx/every_layer.yaml");
  return models;
}

std::string TestName(const std::string& model) {
  std::string name = std::filesystem::path(model).stem().string();
  return absl::StrReplaceAll(name, {{":", "_"}, {"-", "_"}, {".", "_"}});
}

// 100 images of `shape` (HWC), pixels in [0, 1]: Fashion-MNIST's first test
// images for 28x28x1, else a fixed hash of the position.
std::vector<float> Images(const std::vector<int64_t>& shape) {
  const int64_t n = shape[0] * shape[1] * shape[2];
  std::vector<float> images(kImages * n);
  if (shape == std::vector<int64_t>{28, 28, 1}) {
    absl::StatusOr<Dataset> test = LoadMnist(Env::Default(), kDefaultFashionMnistDir, Split::kTest);
    if (test.ok()) {
      for (int64_t i = 0; i < kImages * n; ++i) images[i] = test->images[i] / 255.0f;
      return images;
    }
    ADD_FAILURE() << "Fashion-MNIST: " << test.status();
  }
  uint64_t state = 88172645463325252ULL;
  for (float& x : images) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    x = static_cast<float>(state % 256) / 255.0f;
  }
  return images;
}

class OnnxRuntimeAgreementTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ =
        absl::StrCat(testing::TempDir(), "/onnx_agreement_", TestName(GetParam()), "_", ::getpid());
    ASSERT_TRUE(Env::Default()->CreateDirs(dir_).ok());
    const std::string missing = MissingTools(dir_ + "/probe");
    // tests/run.sh sets PSTRAIN_REQUIRE_ONNX_TOOLS=1 after deploy/install-deps.sh:
    // there a missing tool is a failure, not a skip.
    const char* required = std::getenv("PSTRAIN_REQUIRE_ONNX_TOOLS");
    if (!missing.empty() && required != nullptr && std::string(required) == "1") {
      FAIL() << missing << " (PSTRAIN_REQUIRE_ONNX_TOOLS=1)";
    }
    if (!missing.empty()) {
      std::fprintf(stderr, "SKIPPED: ONNX Runtime agreement not checked: %s\n", missing.c_str());
      GTEST_SKIP() << "ONNX Runtime agreement not checked: " << missing;
    }
  }
  void TearDown() override {
    std::error_code error;
    std::filesystem::remove_all(dir_, error);
  }
  std::string dir_;
};

TEST_P(OnnxRuntimeAgreementTest, OnnxRuntimeGivesPstrainPredictsOutputs) {
  const std::string model = GetParam();
  const CommandResult made =
      RunCommand({kBin + "/make_test_export", dir_ + "/export", "7", model}, dir_ + "/make");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string version = std::string(absl::StripAsciiWhitespace(made.out));
  const std::string onnx = version + "/model.onnx";
  ASSERT_TRUE(Env::Default()->FileExists(onnx)) << "the export " << version << " has no model.onnx";

  const CommandResult check =
      RunCommand({kPython, kSource + "/tests/onnx/check_onnx.py", onnx}, dir_ + "/check");
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;

  const json manifest = json::parse(*Env::Default()->ReadFile(version + "/model.json"));
  const std::vector<int64_t> shape = manifest["input"]["shape"].get<std::vector<int64_t>>();
  const int classes = manifest["num_classes"].get<int>();
  const std::vector<float> images = Images(shape);
  const int64_t n = shape[0] * shape[1] * shape[2];
  std::string lines;
  for (int i = 0; i < kImages; ++i) {
    absl::StrAppend(&lines, json(std::vector<float>(&images[i * n], &images[(i + 1) * n])).dump(),
                    "\n");
  }
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(dir_ + "/instances.json", lines).ok());
  ASSERT_TRUE(Env::Default()
                  ->WriteFileAtomic(dir_ + "/images.f32",
                                    std::string(reinterpret_cast<const char*>(images.data()),
                                                images.size() * sizeof(float)))
                  .ok());

  const CommandResult predict =
      RunCommand({kBin + "/pstrain-predict", "--model_dir=" + version,
                  "--json_instances=" + dir_ + "/instances.json", "--format=json"},
                 dir_ + "/predict");
  ASSERT_EQ(predict.exit_code, 0) << predict.err;
  const CommandResult ort = RunCommand(
      {"/usr/bin/env", "NODE_PATH=" + kNodePath, "node", kSource + "/tests/onnx/ort_run.js", onnx,
       dir_ + "/images.f32", std::to_string(kImages), std::to_string(shape[0]),
       std::to_string(shape[1]), std::to_string(shape[2])},
      dir_ + "/ort");
  ASSERT_EQ(ort.exit_code, 0) << ort.err;

  const json ours = json::parse(predict.out, nullptr, false)["predictions"];
  const json theirs = json::parse(ort.out, nullptr, false);
  ASSERT_TRUE(ours.is_array() && ours.size() == kImages) << predict.out;
  ASSERT_TRUE(theirs.is_object() && theirs["classes"].size() == kImages &&
              theirs["probabilities"].size() == kImages)
      << ort.out;
  double max_diff = 0;
  int same_classes = 0;
  for (int i = 0; i < kImages; ++i) {
    const int64_t ours_class = ours[i]["classes"].get<int64_t>();
    const int64_t theirs_class = theirs["classes"][i].get<int64_t>();
    EXPECT_EQ(ours_class, theirs_class) << "image " << i;
    same_classes += ours_class == theirs_class;
    ASSERT_EQ(theirs["probabilities"][i].size(), static_cast<size_t>(classes));
    for (int k = 0; k < classes; ++k) {
      max_diff = std::max(max_diff, std::fabs(ours[i]["probabilities"][k].get<double>() -
                                              theirs["probabilities"][i][k].get<double>()));
    }
  }
  std::printf(
      "%s: ONNX Runtime vs pstrain-predict on %d images: %d/%d classes equal, max |probability "
      "difference| = %.3g; onnx.checker full_check %s\n",
      model.c_str(), kImages, same_classes, kImages, max_diff,
      check.exit_code == 0 ? "passes" : "FAILS");
  EXPECT_LE(max_diff, kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Models, OnnxRuntimeAgreementTest, testing::ValuesIn(Models()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return TestName(info.param);
                         });

}  // namespace
}  // namespace pstrain
