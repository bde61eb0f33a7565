// Every built-in and example model's model.onnx, run by ONNX Runtime (npm
// onnxruntime-node, tests/onnx/ort_run.js) on 100 test images, gives
// pstrain-predict's classes and its probabilities within 1e-5; the onnx
// package's checker (Debian's python3-onnx, tests/onnx/check_onnx.py,
// full_check) accepts each file. Exports are made by make_test_export: initial
// values after three SGD steps, moving statistics from a batch. Images:
// Fashion-MNIST's test set for 28x28x1 models, fixed synthetic pixels for the
// others.
// Tabular models (the click and sequence models of examples/models/*.yaml, their dynamic
// tables made bucketed, and tests/onnx/tabular_*.yaml): ModelToOnnx of
// random values and trained rows (some ids absent), run by ONNX Runtime on a
// batch of dense features and padded ids (examples without values, with
// several, a feature without any), gives what Model::Infer computes from the
// same batch, within 1e-5 relative; the checker accepts the file.
// Without node, onnxruntime-node or python3-onnx every test is skipped,
// saying what is missing.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/env.h"
#include "config/model_spec.h"
#include "data/formats/mnist.h"
#include "data/sparse_features.h"
#include "gtest/gtest.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"
#include "onnx/onnx_export.h"

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

// The tabular models: every click model of examples/models (input [n]),
// sequence models too, and tests/onnx/tabular_*.yaml.
std::vector<std::string> TabularModels() {
  std::vector<std::string> models;
  std::error_code error;
  for (const std::string dir : {"/examples/models", "/tests/onnx"}) {
    for (const auto& entry : std::filesystem::directory_iterator(kSource + dir, error)) {
      if (entry.path().extension() != ".yaml") continue;
      absl::StatusOr<std::string> text = Env::Default()->ReadFile(entry.path().string());
      if (!text.ok()) continue;
      absl::StatusOr<ModelSpec> spec = ParseModelSpec(*text, entry.path().string());
      if (!spec.ok() || spec->input.size() != 1) continue;
      models.push_back(entry.path().string());
    }
    // A directory that cannot be read is a case that fails, not no case.
    if (error) models.push_back(absl::StrCat(kSource, dir, " (unreadable: ", error.message(), ")"));
  }
  std::sort(models.begin(), models.end());
  return models;
}

constexpr int kExamples = 64;
constexpr int64_t kExampleBuckets = 1000;  // what a dynamic table of an example becomes

// A tabular model with random values and trained rows, and a batch for it.
struct TabularCase {
  std::unique_ptr<Model> model;
  std::vector<float> params, state;
  std::vector<TrainedTableRows> tables;
  std::vector<float> dense;  // kExamples x n
  SparseBatch batch;         // one column per model.sparse_features()
};

// The spec `text` as ModelToOnnx can export it: dynamic tables given
// kExampleBuckets buckets, lines of linear's `crosses:` dropped (crossed
// tables have no ONNX form).
std::string ExportableSpec(const std::string& text) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "crosses:")) continue;
    lines.push_back(
        absl::StrReplaceAll(line, {{"dynamic: true", absl::StrCat("buckets: ", kExampleBuckets)}}));
  }
  return absl::StrJoin(lines, "\n");
}

// The model of the spec at `path` (ExportableSpec), its initial values perturbed, every table's
// rows trained at about 60% of its ids, and a batch: example 0 without values in any feature,
// example 1 with four in each, example 2 with 40 in each sequence feature, the rest 0 to 4;
// feature `none` without a value in any example.
TabularCase MakeTabularCase(const std::string& path) {
  TabularCase c;
  const std::string text = ExportableSpec(Env::Default()->ReadFile(path).value_or(""));
  absl::StatusOr<std::unique_ptr<Model>> model = BuildModelFromSpecText(text, path);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return c;
  c.model = std::move(*model);
  const Model& m = *c.model;
  std::mt19937_64 random(17);
  std::uniform_real_distribution<float> uniform(-0.5f, 0.5f);
  c.params.resize(m.num_params());
  c.state.resize(m.num_state());
  m.InitializeVariables(5, c.params.data(), c.state.data());
  for (float& p : c.params) p += 0.1f * uniform(random);
  for (const SparseTableInfo& t : m.sparse_tables()) {
    TrainedTableRows& rows = c.tables.emplace_back();
    for (int64_t id = t.buckets - 1; id >= 0; --id) {  // not in id order
      if (random() % 10 >= 6) continue;
      rows.ids.push_back(id);
      for (int64_t j = 0; j < t.dim; ++j) rows.weights.push_back(uniform(random));
    }
  }
  // A feature's ids fit every table that reads it.
  std::vector<int64_t> buckets(m.sparse_features().size(), INT64_MAX);
  for (const SparseTableInfo& t : m.sparse_tables()) {
    buckets[t.feature] = std::min(buckets[t.feature], t.buckets);
    for (int f : t.shared_features) buckets[f] = std::min(buckets[f], t.buckets);
  }
  // The features of sequence embeddings.
  std::set<std::string> sequences;
  for (const LayerSpec& l : m.spec()->layers) {
    if (l.max_length > 0) sequences.insert(l.feature);
  }
  const int64_t n = m.input_shape()[0];
  c.dense.resize(kExamples * n);
  for (float& x : c.dense) x = 2.0f * uniform(random);
  for (size_t f = 0; f < m.sparse_features().size(); ++f) {
    SparseFeatureColumn& column = c.batch.features.emplace_back();
    column.name = m.sparse_features()[f];
    for (int i = 0; i < kExamples; ++i) {
      // Example 2 has more values than the examples' sequences keep (30, 32).
      const int count = column.name == "none" || i == 0          ? 0
                        : i == 1                                 ? 4
                        : i == 2 && sequences.count(column.name) ? 40
                                                                 : random() % 5;
      for (int k = 0; k < count; ++k) column.values.push_back(random() % buckets[f]);
      column.offsets.push_back(static_cast<int64_t>(column.values.size()));
    }
  }
  return c;
}

// Model::Infer's logits for the case's batch, the rows filled from its
// trained rows (zeros for the others).
std::vector<float> PstrainLogits(TabularCase& c) {
  SparseStep step;
  const absl::Status prepared = c.model->PrepareSparse(c.batch, kExamples, &step);
  EXPECT_TRUE(prepared.ok()) << prepared;
  for (size_t t = 0; t < step.tables.size(); ++t) {
    const int64_t dim = c.model->sparse_tables()[t].dim;
    std::map<int64_t, size_t> index;
    for (size_t k = 0; k < c.tables[t].ids.size(); ++k) index[c.tables[t].ids[k]] = k;
    TableStep& table = step.tables[t];
    table.rows.assign(table.ids.size() * dim, 0.0f);
    for (size_t r = 0; r < table.ids.size(); ++r) {
      auto it = index.find(table.ids[r]);
      if (it == index.end()) continue;
      std::copy_n(c.tables[t].weights.begin() + it->second * dim, dim,
                  table.rows.begin() + r * dim);
    }
  }
  const Tensor& logits =
      c.model->Infer(c.params.data(), c.state.data(), c.dense.data(), kExamples, &step);
  return std::vector<float>(logits.data(), logits.data() + logits.size());
}

// The graph's inputs for the case's batch, as ort_run.js reads them: dense
// [N, n] when n > 0, each feature's ids [N, L] padded with -1.
json OrtInputs(const TabularCase& c) {
  json inputs = json::object();
  const int64_t n = c.model->input_shape()[0];
  if (n > 0) {
    json data = json::array();
    for (float x : c.dense) data.push_back(static_cast<double>(x));
    inputs[kOnnxDenseInputName] = {{"type", "float32"}, {"dims", {kExamples, n}}, {"data", data}};
  }
  for (const SparseFeatureColumn& column : c.batch.features) {
    int64_t longest = 0;
    for (int i = 0; i < kExamples; ++i) {
      longest = std::max(longest, column.offsets[i + 1] - column.offsets[i]);
    }
    json data = json::array();
    for (int i = 0; i < kExamples; ++i) {
      for (int64_t k = 0; k < longest; ++k) {
        const int64_t at = column.offsets[i] + k;
        data.push_back(at < column.offsets[i + 1] ? static_cast<int64_t>(column.values[at]) : -1);
      }
    }
    inputs[column.name] = {{"type", "int64"}, {"dims", {kExamples, longest}}, {"data", data}};
  }
  return inputs;
}

class TabularOnnxAgreementTest : public OnnxRuntimeAgreementTest {};

TEST_P(TabularOnnxAgreementTest, OnnxRuntimeGivesPstrainsInference) {
  TabularCase c = MakeTabularCase(GetParam());
  ASSERT_NE(c.model, nullptr);
  const std::vector<float> logits = PstrainLogits(c);
  absl::StatusOr<std::string> bytes = ModelToOnnx(*c.model, c.params, c.state, c.tables);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const std::string onnx = dir_ + "/model.onnx";
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(onnx, *bytes).ok());
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(dir_ + "/inputs.json", OrtInputs(c).dump()).ok());

  const CommandResult check =
      RunCommand({kPython, kSource + "/tests/onnx/check_onnx.py", onnx}, dir_ + "/check");
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  const CommandResult ort =
      RunCommand({"/usr/bin/env", "NODE_PATH=" + kNodePath, "node",
                  kSource + "/tests/onnx/ort_run.js", onnx, dir_ + "/inputs.json"},
                 dir_ + "/ort");
  ASSERT_EQ(ort.exit_code, 0) << ort.err;
  const json out = json::parse(ort.out, nullptr, false);
  ASSERT_TRUE(out.is_object()) << ort.out;

  if (c.model->multi_head()) {
    // An output per head, named as the head: a binary head's sigmoid, a
    // regression head's value ([N] each), a softmax head's probabilities.
    const Model& m = *c.model;
    const int width = m.num_logits();
    EXPECT_EQ(out.size(), m.heads().size()) << ort.out;
    double max_relative = 0;
    for (size_t h = 0; h < m.heads().size(); ++h) {
      const ModelHead& head = m.heads()[h];
      ASSERT_TRUE(out.contains(head.name)) << head.name << ": " << ort.out;
      const std::vector<double> theirs = out[head.name]["data"].get<std::vector<double>>();
      const int k = head.num_logits();
      EXPECT_EQ(out[head.name]["dims"],
                head.kind == Head::kSoftmax ? json({kExamples, k}) : json({kExamples}));
      ASSERT_EQ(theirs.size(), static_cast<size_t>(kExamples * k)) << head.name;
      // A regression head's value is a sum whose terms may cancel: its
      // rounding is of the size of the head's values, not of one near zero
      // (0.0013771 against 0.0013771 + 1.9e-8 on an AVX-512 host). Its
      // difference is relative to the largest value the head gave.
      double scale = 1e-3;
      if (head.kind == Head::kRegression) {
        for (int i = 0; i < kExamples; ++i) {
          scale =
              std::max(scale, std::fabs(static_cast<double>(logits[i * width + m.head_offset(h)])));
        }
      }
      for (int i = 0; i < kExamples; ++i) {
        const float* z = &logits[i * width + m.head_offset(h)];
        std::vector<double> ours(k);
        if (head.kind == Head::kRegression) {
          ours[0] = z[0];
        } else if (head.kind == Head::kBinary) {
          ours[0] = 1.0 / (1.0 + std::exp(-static_cast<double>(z[0])));
        } else {
          const double max = *std::max_element(z, z + k);
          double sum = 0;
          for (int j = 0; j < k; ++j) sum += ours[j] = std::exp(z[j] - max);
          for (double& p : ours) p /= sum;
        }
        for (int j = 0; j < k; ++j) {
          const double relative =
              std::fabs(theirs[i * k + j] - ours[j]) / std::max(std::fabs(ours[j]), scale);
          max_relative = std::max(max_relative, relative);
          EXPECT_LE(relative, kTolerance)
              << head.name << "[" << i << "][" << j << "]: ONNX Runtime " << theirs[i * k + j]
              << ", pstrain " << ours[j];
        }
      }
    }
    EXPECT_EQ(check.exit_code, 0);
    std::printf(
        "%s: ONNX Runtime vs Model::Infer on %d examples, %zu heads: max relative difference "
        "%.3g\n",
        std::filesystem::path(GetParam()).filename().c_str(), kExamples, m.heads().size(),
        max_relative);
    return;
  }
  if (c.model->head() == Head::kRegression) {
    // One output, the values pstrain computes.
    ASSERT_TRUE(out.contains("predictions")) << ort.out;
    EXPECT_EQ(out.size(), 1u) << ort.out;
    EXPECT_EQ(out["predictions"]["dims"], json({kExamples}));
    const std::vector<double> theirs = out["predictions"]["data"].get<std::vector<double>>();
    ASSERT_EQ(theirs.size(), static_cast<size_t>(kExamples));
    double max_relative = 0;
    double scale = 1e-3;  // relative to the largest value, as a multi-task model's heads'
    for (int i = 0; i < kExamples; ++i) scale = std::max(scale, std::fabs(double{logits[i]}));
    for (int i = 0; i < kExamples; ++i) {
      const double relative =
          std::fabs(theirs[i] - logits[i]) / std::max(std::fabs(double{logits[i]}), scale);
      max_relative = std::max(max_relative, relative);
      EXPECT_LE(relative, kTolerance)
          << "predictions[" << i << "]: ONNX Runtime " << theirs[i] << ", pstrain " << logits[i];
    }
    EXPECT_EQ(check.exit_code, 0);
    std::printf("%s: ONNX Runtime vs Model::Infer on %d examples: max relative difference %.3g\n",
                std::filesystem::path(GetParam()).filename().c_str(), kExamples, max_relative);
    return;
  }
  // What the graph should give, from pstrain's logits (in double).
  const bool binary = c.model->head() == Head::kBinary;
  const int classes = c.model->num_classes();
  std::vector<double> probabilities(kExamples * classes);
  std::vector<int64_t> expected_classes(kExamples);
  for (int i = 0; i < kExamples; ++i) {
    double* p = &probabilities[i * classes];
    if (binary) {
      const double z = logits[i];
      p[1] = 1.0 / (1.0 + std::exp(-z));
      p[0] = 1.0 - p[1];
      // As pstrain's Predictor decides: sigmoid(z) in float32 > 0.5.
      expected_classes[i] = 1.0f / (1.0f + std::exp(-logits[i])) > 0.5f;
      continue;
    }
    const float* z = &logits[i * classes];
    const double max = *std::max_element(z, z + classes);
    double sum = 0;
    for (int k = 0; k < classes; ++k) sum += p[k] = std::exp(z[k] - max);
    for (int k = 0; k < classes; ++k) p[k] /= sum;
    expected_classes[i] = std::max_element(z, z + classes) - z;
  }
  std::vector<std::string> names = {"probabilities", "classes"};
  if (binary) names.push_back("logistic");
  for (const std::string& name : names) ASSERT_TRUE(out.contains(name)) << name << ": " << ort.out;
  EXPECT_EQ(out.size(), names.size()) << ort.out;
  EXPECT_EQ(out["probabilities"]["dims"], json({kExamples, classes}));
  EXPECT_EQ(out["classes"]["dims"], json({kExamples}));
  EXPECT_EQ(out["classes"]["data"].get<std::vector<int64_t>>(), expected_classes);
  // |difference| <= 1e-5 |expected|, with 1e-3 the smallest |expected| that
  // counts (1 - sigmoid of a large logit is all rounding in float32).
  double max_relative = 0;
  const auto compare = [&](double theirs, double ours, const std::string& what) {
    const double relative = std::fabs(theirs - ours) / std::max(std::fabs(ours), 1e-3);
    max_relative = std::max(max_relative, relative);
    EXPECT_LE(relative, kTolerance) << what << ": ONNX Runtime " << theirs << ", pstrain " << ours;
  };
  const std::vector<double> theirs = out["probabilities"]["data"].get<std::vector<double>>();
  ASSERT_EQ(theirs.size(), probabilities.size());
  for (size_t i = 0; i < theirs.size(); ++i) {
    compare(theirs[i], probabilities[i],
            absl::StrCat("probabilities[", i / classes, "][", i % classes, "]"));
  }
  if (binary) {
    EXPECT_EQ(out["logistic"]["dims"], json({kExamples, 1}));
    const std::vector<double> logistic = out["logistic"]["data"].get<std::vector<double>>();
    ASSERT_EQ(logistic.size(), static_cast<size_t>(kExamples));
    for (int i = 0; i < kExamples; ++i) {
      compare(logistic[i], probabilities[i * 2 + 1], absl::StrCat("logistic[", i, "]"));
    }
  }
  std::printf(
      "%s: ONNX Runtime vs Model::Infer on %d examples: max relative probability difference "
      "%.3g; onnx.checker full_check %s\n",
      std::filesystem::path(GetParam()).filename().c_str(), kExamples, max_relative,
      check.exit_code == 0 ? "passes" : "FAILS");
}

INSTANTIATE_TEST_SUITE_P(Tabular, TabularOnnxAgreementTest, testing::ValuesIn(TabularModels()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return TestName(info.param);
                         });

}  // namespace
}  // namespace pstrain
