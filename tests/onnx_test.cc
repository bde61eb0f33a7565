// ONNX in and out with runtimes no one here wrote: a PyTorch CNN exported by
// torch.onnx.export computes in pstrain what it computes in PyTorch (logits
// and one step's gradients), trains on a sync cluster, and the export's
// model.onnx answers in ONNX Runtime as pstrain-predict does; an export
// re-imported starts where it ended. PyTorch is Debian's python3-torch, ONNX
// Runtime the npm onnxruntime-node that deploy/install-deps.sh puts in
// .deps/node; without them the tests say so and are skipped.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "config/model_spec.h"
#include "data/load.h"
#include "gtest/gtest.h"
#include "models/spec_builder.h"
#include "nlohmann/json.hpp"
#include "onnx/onnx_import.h"
#include "onnx/onnx_weights.h"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using json = nlohmann::json;
using testing_util::ProcessResult;
using testing_util::RunProcess;

const std::string kBin = PSTRAIN_BIN_DIR;
const std::string kSource = PSTRAIN_SOURCE_DIR;
const std::string kPython = "/usr/bin/python3";
const std::string kFashion = "/usr/share/datasets/fashion-mnist";
const std::string kNodeModules = kSource + "/.deps/node/node_modules";

std::vector<float> ReadFloats(const std::string& path) {
  absl::StatusOr<std::string> bytes = Env::Default()->ReadFile(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (!bytes.ok()) return {};
  std::vector<float> v(bytes->size() / sizeof(float));
  std::memcpy(v.data(), bytes->data(), v.size() * sizeof(float));
  return v;
}

// Why the tests cannot run here ("" if they can).
std::string Missing(bool need_node) {
  if (!Env::Default()->FileExists(kFashion + "/t10k-labels-idx1-ubyte.gz")) {
    return "no Fashion-MNIST in " + kFashion + " (Debian's dataset-fashion-mnist)";
  }
  if (RunProcess({kPython, "-c", "import torch, numpy"}, 60).exit_code != 0) {
    return "no PyTorch for " + kPython + " (Debian's python3-torch)";
  }
  if (need_node && !Env::Default()->FileExists(kNodeModules + "/onnxruntime-node/package.json")) {
    return "no onnxruntime-node in " + kNodeModules;
  }
  return "";
}

// tests/run.sh sets PSTRAIN_REQUIRE_ONNX_TOOLS=1 after deploy/install-deps.sh:
// there a missing tool is a failure, not a skip.
bool ToolsRequired() {
  const char* v = std::getenv("PSTRAIN_REQUIRE_ONNX_TOOLS");
  return v != nullptr && std::string(v) == "1";
}

class OnnxTest : public testing_util::ClusterTestBase {
 protected:
  OnnxTest() : ClusterTestBase("onnx") {}
};

TEST_F(OnnxTest, ATorchCnnComputesInPstrainWhatItComputesInPyTorch) {
  if (std::string missing = Missing(false); !missing.empty()) {
    if (ToolsRequired()) FAIL() << missing << " (PSTRAIN_REQUIRE_ONNX_TOOLS=1)";
    GTEST_SKIP() << "SKIPPED: " << missing << "; deploy/install-deps.sh installs it";
  }
  constexpr int kBatch = 32;
  ProcessResult ref = RunProcess({kPython, kSource + "/tests/onnx/torch_reference.py", "agreement",
                                  dir_, absl::StrCat("--batch=", kBatch)},
                                 300);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const std::string net = dir_ + "/net.onnx";
  absl::StatusOr<std::string> bytes = Env::Default()->ReadFile(net);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<ImportedOnnx> imported = ImportOnnx(*bytes, net);
  ASSERT_TRUE(imported.ok()) << imported.status();
  ModelSpec spec = imported->spec;
  EXPECT_EQ(spec.input, (std::vector<int64_t>{28, 28, 1}));
  EXPECT_EQ(spec.classes, 10);
  spec.weights = net;
  absl::StatusOr<std::unique_ptr<Model>> model = BuildModelFromSpec(spec, net);
  ASSERT_TRUE(model.ok()) << model.status() << "\n" << ModelSpecToYaml(spec);
  (*model)->set_spec(spec);  // as BuildJobModel's models have it
  std::vector<float> params((*model)->num_params()), state((*model)->num_state());
  // The starting values are the file's, whatever the seed.
  ASSERT_TRUE(
      InitializeModelVariables(Env::Default(), **model, /*seed=*/7, params.data(), state.data())
          .ok());

  const std::vector<float> images = ReadFloats(dir_ + "/images.f32");
  ASSERT_EQ(images.size(), static_cast<size_t>(kBatch * 28 * 28));
  const std::vector<float> torch_logits = ReadFloats(dir_ + "/logits.f32");
  ASSERT_EQ(torch_logits.size(), static_cast<size_t>(kBatch * 10));
  const Tensor& logits = (*model)->Infer(params.data(), state.data(), images.data(), kBatch);
  double max_diff = 0;
  for (int i = 0; i < kBatch * 10; ++i) {
    max_diff = std::max<double>(max_diff, std::fabs(logits.data()[i] - torch_logits[i]));
  }
  std::printf("evaluation-mode logits: max |pstrain - PyTorch| = %.3g over %d values\n", max_diff,
              kBatch * 10);
  EXPECT_LE(max_diff, 1e-4);

  // One training-mode step (batch statistics), dropout off on both sides.
  for (LayerSpec& layer : spec.layers) {
    if (layer.type == "dropout") layer.rate = 0.0f;
  }
  absl::StatusOr<std::unique_ptr<Model>> train_model = BuildModelFromSpec(spec, net);
  ASSERT_TRUE(train_model.ok()) << train_model.status();
  absl::StatusOr<std::string> label_bytes = Env::Default()->ReadFile(dir_ + "/labels.i32");
  ASSERT_TRUE(label_bytes.ok());
  std::vector<int32_t> classes(kBatch);
  ASSERT_EQ(label_bytes->size(), classes.size() * sizeof(int32_t));
  std::memcpy(classes.data(), label_bytes->data(), label_bytes->size());
  const std::vector<float> labels(classes.begin(), classes.end());
  std::vector<float> grads(params.size()), batch_stats(state.size());
  const LossResult loss = (*train_model)
                              ->TrainStep(params.data(), state.data(), images.data(), labels.data(),
                                          kBatch, /*seed=*/1, grads.data(), batch_stats.data());
  absl::StatusOr<std::string> torch_loss_text = Env::Default()->ReadFile(dir_ + "/loss.txt");
  ASSERT_TRUE(torch_loss_text.ok());
  double torch_loss = 0;
  ASSERT_TRUE(absl::SimpleAtod(absl::StripAsciiWhitespace(*torch_loss_text), &torch_loss));
  const double pstrain_loss = loss.loss_sum / kBatch;
  std::printf("one step's loss: pstrain %.7f, PyTorch %.7f\n", pstrain_loss, torch_loss);
  EXPECT_NEAR(pstrain_loss, torch_loss, 1e-5 * std::max(1.0, std::fabs(torch_loss)));

  // PyTorch's gradients, in pstrain's layout through the same import.
  absl::StatusOr<std::string> grad_bytes = Env::Default()->ReadFile(dir_ + "/grads.onnx");
  ASSERT_TRUE(grad_bytes.ok());
  absl::StatusOr<ImportedOnnx> torch_grads = ImportOnnx(*grad_bytes, "grads.onnx");
  ASSERT_TRUE(torch_grads.ok()) << torch_grads.status();
  // Each tensor within 1e-3 of PyTorch's, relative to its own size: |pstrain
  // - PyTorch| <= 1e-3 |PyTorch| (norms). The bias of a convolution that
  // batch norm follows has a gradient of exactly 0 in exact arithmetic (the
  // normalization takes it out): float noise on both sides, so a tensor whose
  // gradient is below 1e-4 of the largest tensor's must itself be below it.
  auto norm = [](const float* v, int64_t n) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(v[i]) * v[i];
    return std::sqrt(sum);
  };
  double largest = 0;
  for (const ImportedTensor& t : torch_grads->weights) {
    largest = std::max(largest, norm(t.values.data(), static_cast<int64_t>(t.values.size())));
  }
  ASSERT_GT(largest, 0);
  int compared = 0;
  double worst = 0;
  for (const ImportedTensor& t : torch_grads->weights) {
    const VariableInfo* v = nullptr;
    for (const VariableInfo& info : (*train_model)->variables()) {
      if (info.name == t.name) v = &info;
    }
    ASSERT_NE(v, nullptr) << t.name;
    if (!v->trainable) continue;  // moving statistics: no gradients
    ASSERT_EQ(static_cast<int64_t>(t.values.size()), v->size) << t.name;
    std::vector<float> diff(v->size);
    double max_abs = 0;
    for (int64_t i = 0; i < v->size; ++i) {
      diff[i] = grads[v->offset + i] - t.values[i];
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(diff[i])));
    }
    const double ref = norm(t.values.data(), v->size);
    const double d = norm(diff.data(), v->size);
    if (ref < 1e-4 * largest) {
      std::printf("  %-14s zero in exact arithmetic: |PyTorch| = %.3g, |pstrain| = %.3g\n",
                  t.name.c_str(), ref, norm(grads.data() + v->offset, v->size));
      EXPECT_LE(norm(grads.data() + v->offset, v->size), 1e-4 * largest) << t.name;
      continue;
    }
    std::printf("  %-14s |pstrain - PyTorch| / |PyTorch| = %.3g, max abs difference %.3g\n",
                t.name.c_str(), d / ref, max_abs);
    EXPECT_LE(d / ref, 1e-3) << t.name;
    worst = std::max(worst, d / ref);
    ++compared;
  }
  std::printf("gradients of %d variables: worst relative difference %.3g\n", compared, worst);
  EXPECT_GE(compared, 8);
}

TEST_F(OnnxTest, ASyncClusterTrainsATorchCnnAndItsOnnxExportAnswersInOnnxRuntime) {
  if (std::string missing = Missing(true); !missing.empty()) {
    if (ToolsRequired()) FAIL() << missing << " (PSTRAIN_REQUIRE_ONNX_TOOLS=1)";
    GTEST_SKIP() << "SKIPPED: " << missing << "; deploy/install-deps.sh installs it";
  }
  const std::string net = dir_ + "/torch_cnn.onnx";
  ProcessResult exported =
      RunProcess({kPython, kSource + "/tests/onnx/torch_cnn.py", "--export", net, "--seed=3"}, 300);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;

  // The model as a spec, from the command line.
  ProcessResult describe = RunProcess({kBin + "/pstrain-model", "spec", net}, 60);
  ASSERT_EQ(describe.exit_code, 0) << describe.output;
  EXPECT_NE(describe.output.find("conv2d"), std::string::npos) << describe.output;
  EXPECT_NE(describe.output.find("batch_norm"), std::string::npos) << describe.output;
  EXPECT_NE(describe.output.find("dropout"), std::string::npos) << describe.output;
  EXPECT_NE(describe.output.find("weights: \"" + net + "\""), std::string::npos) << describe.output;

  const std::regex accuracy_line("Saving dict for global step ([0-9]+): accuracy = ([0-9.]+)");
  ProcessResult train =
      RunProcess({kBin + "/pstrain-launch", "--config=" + kSource + "/deploy/local/cluster.yaml",
                  "--model=" + net, "--job_dir=" + job_dir(), "--train_steps=60", "--eval_steps=0",
                  "--log_every_n_steps=20", "--threads=1"},
                 600);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_NE(train.output.find("sync updates"), std::string::npos) << train.output;
  EXPECT_NE(train.output.find("starting values of 16 of 16 variables from " + net),
            std::string::npos)
      << train.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(train.output, m, accuracy_line)) << train.output;
  const double trained_accuracy = std::stod(m[2]);
  // 60 sync steps of 2 x 100 images: far above chance (0.1).
  EXPECT_GT(trained_accuracy, 0.6) << train.output;

  // The export's model.onnx in ONNX Runtime and pstrain-predict, on 100 test
  // images.
  absl::StatusOr<std::vector<std::string>> versions =
      Env::Default()->ListDir(job_dir() + "/export");
  ASSERT_TRUE(versions.ok() && versions->size() == 1);
  const std::string version_dir = job_dir() + "/export/" + versions->front();
  absl::StatusOr<Dataset> test = LoadDataset(Env::Default(), kFashion, Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  constexpr int kImages = 100;
  std::string lines, raw;
  for (int64_t i = 0; i < kImages; ++i) {
    std::vector<float> image;
    for (int64_t k = 0; k < test->example_size(); ++k) {
      image.push_back(test->images[i * test->example_size() + k] / 255.0f);
    }
    absl::StrAppend(&lines, json(image).dump(), "\n");
    raw.append(reinterpret_cast<const char*>(image.data()), image.size() * sizeof(float));
  }
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(dir_ + "/instances.json", lines).ok());
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(dir_ + "/images.f32", raw).ok());
  ProcessResult predict =
      RunProcess({kBin + "/pstrain-predict", "--model_dir=" + version_dir,
                  "--json_instances=" + dir_ + "/instances.json", "--format=json"},
                 120);
  ASSERT_EQ(predict.exit_code, 0) << predict.output;
  ProcessResult ort = RunProcess(
      {"/usr/bin/env", "NODE_PATH=" + kNodeModules, "node", kSource + "/tests/onnx/ort_run.js",
       version_dir + "/model.onnx", dir_ + "/images.f32", std::to_string(kImages), "28", "28", "1"},
      120);
  ASSERT_EQ(ort.exit_code, 0) << ort.output;
  const json ours = json::parse(predict.output)["predictions"];
  const json theirs = json::parse(ort.output);
  ASSERT_EQ(ours.size(), static_cast<size_t>(kImages));
  ASSERT_EQ(theirs["classes"].size(), static_cast<size_t>(kImages));
  double max_diff = 0;
  int correct = 0;
  for (int i = 0; i < kImages; ++i) {
    EXPECT_EQ(ours[i]["classes"].get<int64_t>(), theirs["classes"][i].get<int64_t>()) << i;
    correct += ours[i]["classes"].get<int64_t>() == test->labels[i];
    for (int k = 0; k < 10; ++k) {
      max_diff = std::max(max_diff, std::fabs(ours[i]["probabilities"][k].get<double>() -
                                              theirs["probabilities"][i][k].get<double>()));
    }
  }
  std::printf(
      "trained torch CNN: ONNX Runtime vs pstrain-predict on %d images: classes equal, "
      "max |probability difference| = %.3g; %d correct\n",
      kImages, max_diff, correct);
  EXPECT_LE(max_diff, 1e-5);

  // Fine-tuning: the export re-imported starts where the job ended (one
  // step at a learning rate too small to move anything).
  const std::string job2 = dir_ + "/finetune";
  ProcessResult again =
      RunProcess({kBin + "/pstrain-launch", "--config=" + kSource + "/deploy/local/cluster.yaml",
                  "--model=" + version_dir + "/model.onnx", "--job_dir=" + job2, "--train_steps=1",
                  "--learning_rate=1e-12", "--eval_steps=0", "--threads=1"},
                 600);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  ASSERT_TRUE(std::regex_search(again.output, m, accuracy_line)) << again.output;
  const double restarted_accuracy = std::stod(m[2]);
  std::printf("fine-tuning: exported accuracy %.4f, re-imported after 1 step %.4f\n",
              trained_accuracy, restarted_accuracy);
  EXPECT_NEAR(restarted_accuracy, trained_accuracy, 0.01) << again.output;
}

}  // namespace
}  // namespace pstrain
