// A job's model: a spec inline in the job's YAML (the model section or
// training.model), a spec file training.model or --model names, or a
// built-in's name.
#include "role/model_source.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "config/cluster_config.h"
#include "config/model_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/config_test_util.h"

namespace pstrain {
namespace {

using config_test::ExpectInvalid;
using config_test::Message;
using ::testing::HasSubstr;

// The job's spec as ModelSpecToYaml writes it; empty when it has none.
std::string SpecText(const TrainingSpec& t) {
  return t.model_spec.has_value() ? ModelSpecToYaml(t.model_spec->spec) : "";
}

constexpr char kInline[] = R"(cluster:
  chief: ["127.0.0.1:23450"]
  ps: ["127.0.0.1:23453"]
# a small network, inline
model:
  name: tiny
  input: [8, 8, 1]
  classes: 3
  layers:
# comments inside the section belong to it
    - conv2d: {filters: 4, kernel: 3, padding: same, activation: relu}
    - flatten
    - dense: {units: 3}
training:
  job_dir: /tmp/job
  train_steps: 10
)";

TEST(ModelSourceTest, InlineModelSectionIsTheJobsSpecAndItsNameTheModel) {
  absl::StatusOr<JobConfig> job = ParseJobConfig(kInline, "cluster.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->training.model, "tiny");
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(SpecText(job->training), "stored");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "tiny");
  ASSERT_EQ(spec->layers.size(), 3u);
  EXPECT_EQ(spec->layers[0].filters, 4);
  // Kept as read: the job file's name and the lines of its layers there.
  EXPECT_TRUE(SameModelSpec(*spec, job->training.model_spec->spec));
  EXPECT_EQ(job->training.model_spec->source, "cluster.yaml");
  EXPECT_EQ(job->training.model_spec->spec.layers[0].line, 11);
}

TEST(ModelSourceTest, InlineSpecUnderTrainingModelToo) {
  constexpr char kYaml[] = R"(cluster:
  chief: ["127.0.0.1:23450"]
  ps: ["127.0.0.1:23453"]
training:
  job_dir: /tmp/job
  train_steps: 10
  model:
    name: tiny2
    input: [4, 4, 1]
    classes: 2
    layers: [flatten, {dense: {units: 2}}]
)";
  absl::StatusOr<JobConfig> job = ParseJobConfig(kYaml, "cluster.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->training.model, "tiny2");
  EXPECT_TRUE(job->training.model_spec.has_value());
}

TEST(ModelSourceTest, AnErrorInAnInlineSpecNamesTheJobFilesLine) {
  std::string yaml = kInline;
  yaml.replace(yaml.find("filters: 4"), 10, "filtres: 4");
  absl::StatusOr<JobConfig> job = ParseJobConfig(yaml, "cluster.yaml");
  // The conv2d line is line 11 of the job's file.
  ExpectInvalid(job.status(), {"cluster.yaml", "line 11", "filtres", "filters"});
}

TEST(ModelSourceTest, FlowStyleInlineSpecAndItsErrors) {
  constexpr char kYaml[] = R"(cluster: {chief: ["127.0.0.1:1"], ps: ["127.0.0.1:2"]}
training: {job_dir: /tmp/job, train_steps: 1}
model: {name: f, input: [4, 4, 1], classes: 2, layers: [flatten, {dense: {units: 0}}]}
)";
  absl::StatusOr<JobConfig> job = ParseJobConfig(kYaml, "cluster.yaml");
  ExpectInvalid(job.status(), {"cluster.yaml", "units"});
}

TEST(ModelSourceTest, TheModelGivenTwiceIsRefused) {
  std::string yaml = kInline;
  yaml.replace(yaml.find("  job_dir: /tmp/job"), 0, "  model: mnist_cnn\n");
  ExpectInvalid(ParseJobConfig(yaml, "cluster.yaml").status(), {"model is given twice"});
}

TEST(ModelSourceTest, ModelSectionMayNameABuiltInOrAFile) {
  constexpr char kYaml[] = R"(cluster: {chief: ["127.0.0.1:1"], ps: ["127.0.0.1:2"]}
training: {job_dir: /tmp/job, train_steps: 1}
model: cifar10_resnet
)";
  absl::StatusOr<JobConfig> job = ParseJobConfig(kYaml, "cluster.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->training.model, "cifar10_resnet");
  EXPECT_FALSE(job->training.model_spec.has_value());
}

TEST(ModelSourceTest, WrittenJobCarriesTheSpecAndReadsBackTheSame) {
  absl::StatusOr<JobConfig> job = ParseJobConfig(kInline, "cluster.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string yaml = JobConfigToYaml(*job);
  EXPECT_THAT(yaml, HasSubstr("model:"));
  absl::StatusOr<JobConfig> again = ParseJobConfig(yaml, "written");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
  EXPECT_EQ(*again, *job);
}

TEST(ModelSourceTest, NamingAModelAnewDropsTheInlineSpec) {
  absl::StatusOr<JobConfig> job = ParseJobConfig(kInline, "cluster.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(SetTrainingField(&job->training, "model", "mnist_cnn").ok());
  EXPECT_EQ(job->training.model, "mnist_cnn");
  EXPECT_FALSE(job->training.model_spec.has_value());
}

TEST(ModelSourceTest, AnUnnamedInlineSpecIsModelAndAnchorsAreRead) {
  constexpr char kYaml[] = R"(cluster: {chief: ["127.0.0.1:1"], ps: ["127.0.0.1:2"]}
training: {job_dir: /tmp/job, train_steps: 1}
model: &net
  input: [4, 4, 1]
  classes: 2
  layers: [flatten, {dense: {units: 2}}]
)";
  absl::StatusOr<JobConfig> job = ParseJobConfig(kYaml, "cluster.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->training.model, "model");
  EXPECT_EQ(ParseModelSpec(SpecText(job->training), "stored")->name, "model");
  EXPECT_TRUE(ValidateJobConfig(*job).ok());
  absl::StatusOr<JobConfig> again = ParseJobConfig(JobConfigToYaml(*job), "written");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *job);
}

TEST(ModelSourceTest, PathsAreSpecFilesAndNamesAreBuiltIns) {
  EXPECT_TRUE(IsModelSpecPath("net.yaml"));
  EXPECT_TRUE(IsModelSpecPath("net.yml"));
  EXPECT_TRUE(IsModelSpecPath("examples/models/x"));
  EXPECT_TRUE(IsModelSpecPath("gs://bucket/net"));
  EXPECT_TRUE(IsModelSpecPath("net.onnx"));
  EXPECT_FALSE(IsModelSpecPath("mnist_cnn"));
  EXPECT_FALSE(IsModelSpecPath("cifar10_resnet"));
}

class ModelFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("model_source_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(ModelFileTest, ASpecFileIsReadOnceAndBecomesTheJobsSpec) {
  const std::string path = Write("net.yaml", R"(name: from_file
input: [4, 4, 1]
classes: 2
layers:
  - flatten
  - dense: {units: 2}
)");
  TrainingSpec t;
  ASSERT_TRUE(SetTrainingField(&t, "model", path).ok());
  ASSERT_TRUE(LoadModelSpecFile(Env::Default(), &t).ok());
  EXPECT_EQ(t.model, "from_file");
  EXPECT_TRUE(t.model_spec.has_value());
  // A second call leaves it as it is.
  const TrainingSpec before = t;
  ASSERT_TRUE(LoadModelSpecFile(Env::Default(), &t).ok());
  EXPECT_EQ(t, before);
}

TEST_F(ModelFileTest, AnUnnamedSpecFileIsNamedAfterTheFile) {
  TrainingSpec t;
  t.model = Write("small_net.v2.yaml",
                  "input: [4, 4, 1]\nclasses: 2\nlayers: [flatten, "
                  "{dense: {units: 2}}]\n");
  ASSERT_TRUE(LoadModelSpecFile(Env::Default(), &t).ok());
  EXPECT_EQ(t.model, "small_net");
  EXPECT_EQ(t.model_spec->source, (dir_ / "small_net.v2.yaml").string());
  t = TrainingSpec();
  t.model = Write("odd name!.yaml",
                  "input: [4, 4, 1]\nclasses: 2\nlayers: [flatten, "
                  "{dense: {units: 2}}]\n");
  ASSERT_TRUE(LoadModelSpecFile(Env::Default(), &t).ok());
  EXPECT_EQ(t.model, "model");
}

TEST_F(ModelFileTest, CloudMlEngineArgsNameASpecFile) {
  const std::string path = Write("args_net.yaml",
                                 "name: from_args\ninput: [4, 4, 1]\nclasses: 2\n"
                                 "layers: [flatten, {dense: {units: 2}}]\n");
  const std::string yaml = R"(trainingInput:
  scaleTier: BASIC
  jobDir: /tmp/job
  args: ["--train-steps=10", "--model", ")" +
                           path + R"("]
)";
  absl::StatusOr<JobConfig> job = ParseJobConfig(yaml, "mlengine.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->training.model, path);
  ASSERT_TRUE(LoadModelSpecFile(Env::Default(), &job->training).ok());
  EXPECT_EQ(job->training.model, "from_args");
  // The args' model and a model section are one model given twice.
  ExpectInvalid(ParseJobConfig(yaml + "model: mnist_cnn\n", "mlengine.yaml").status(),
                {"model is given twice"});
}

TEST_F(ModelFileTest, MissingAndBadSpecFilesAreNamed) {
  TrainingSpec t;
  t.model = (dir_ / "nope.yaml").string();
  absl::Status s = LoadModelSpecFile(Env::Default(), &t);
  ExpectInvalid(s, {"nope.yaml", "cannot be read", "mnist_cnn"});
  const std::string bad = Write("bad.yaml",
                                "name: b\ninput: [4, 4, 1]\nclasses: 2\nlayers:\n"
                                "  - flaten\n");
  t.model = bad;
  s = LoadModelSpecFile(Env::Default(), &t);
  ExpectInvalid(s, {"bad.yaml", "line 5", "flaten", "flatten"});
  const std::string syntax = Write("syntax.yaml", "name: b\ninput: [4, 4\n");
  t.model = syntax;
  ExpectInvalid(LoadModelSpecFile(Env::Default(), &t), {"syntax.yaml", "line"});
}

// The PyTorch CNN of tests/onnx/torch_cnn.py, exported by torch.onnx.export.
TEST_F(ModelFileTest, AnOnnxFileIsASpecThatStartsFromItsWeights) {
  absl::StatusOr<std::string> onnx =
      Env::Default()->ReadFile(std::string(PSTRAIN_SOURCE_DIR) + "/fuzz/seeds/onnx/torch_cnn.onnx");
  ASSERT_TRUE(onnx.ok()) << onnx.status();
  const std::string path = Write("torch_cnn.onnx", *onnx);
  TrainingSpec t;
  t.model = path;
  ASSERT_TRUE(LoadModelSpecFile(Env::Default(), &t).ok());
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(SpecText(t), "spec");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->weights, path);
  EXPECT_EQ(spec->input, (std::vector<int64_t>{28, 28, 1}));
  EXPECT_EQ(spec->classes, 10);
  // The binary file has no lines for its layers.
  for (const LayerSpec& l : t.model_spec->spec.layers) EXPECT_EQ(l.line, 0);
  // onnx_weights: ignore takes the graph alone.
  TrainingSpec fresh;
  fresh.model = path;
  fresh.onnx_weights = "ignore";
  ASSERT_TRUE(LoadModelSpecFile(Env::Default(), &fresh).ok());
  EXPECT_EQ(SpecText(fresh).find("weights:"), std::string::npos) << SpecText(fresh);
  EXPECT_EQ(fresh.model, t.model);
  // A file that is not ONNX is named.
  TrainingSpec bad;
  bad.model = Write("bad.onnx", "not a model");
  ExpectInvalid(LoadModelSpecFile(Env::Default(), &bad), {"bad.onnx"});
  // A relative path is made absolute: every role reads it from its own
  // directory.
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_);
  TrainingSpec relative;
  relative.model = "torch_cnn.onnx";
  const absl::Status loaded = LoadModelSpecFile(Env::Default(), &relative);
  std::filesystem::current_path(cwd);
  ASSERT_TRUE(loaded.ok()) << loaded;
  EXPECT_NE(SpecText(relative).find("weights: \"" + path + "\""), std::string::npos)
      << SpecText(relative);
  // And onnx_weights takes use or ignore.
  absl::StatusOr<JobConfig> job = ParseJobConfig(
      "cluster: {chief: [\"127.0.0.1:1\"], ps: [\"127.0.0.1:2\"]}\n"
      "training: {job_dir: /tmp/j, train_steps: 1, onnx_weights: keep}\n",
      "job.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  ExpectInvalid(ValidateJobConfig(*job), {"onnx_weights", "use", "ignore"});
}

TEST_F(ModelFileTest, ASpecsRelativeWeightsAreBesideIt) {
  std::filesystem::create_directories(dir_ / "nets");
  const std::string path = Write("nets/head.yaml",
                                 "input: [4, 4, 1]\nclasses: 2\nweights: base/net.onnx\n"
                                 "layers: [flatten, {dense: {units: 2}}]\n");
  TrainingSpec t;
  t.model = path;
  ASSERT_TRUE(LoadModelSpecFile(Env::Default(), &t).ok());
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(SpecText(t), "spec");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->weights, (dir_ / "nets/base/net.onnx").string());
  // gs:// and absolute ones stay as they are; ignore drops them.
  t = TrainingSpec();
  t.model = Write("nets/gs.yaml",
                  "input: [4, 4, 1]\nclasses: 2\nweights: gs://b/net.onnx\n"
                  "layers: [flatten, {dense: {units: 2}}]\n");
  ASSERT_TRUE(LoadModelSpecFile(Env::Default(), &t).ok());
  EXPECT_NE(SpecText(t).find("weights: \"gs://b/net.onnx\""), std::string::npos);
  t = TrainingSpec();
  t.model = path;
  t.onnx_weights = "ignore";
  ASSERT_TRUE(LoadModelSpecFile(Env::Default(), &t).ok());
  EXPECT_EQ(SpecText(t).find("weights"), std::string::npos);
}

TEST_F(ModelFileTest, BuiltInNamesAreLeftToTheRegistry) {
  TrainingSpec t;
  ASSERT_TRUE(LoadModelSpecFile(Env::Default(), &t).ok());
  EXPECT_EQ(t.model, "mnist_cnn");
  EXPECT_FALSE(t.model_spec.has_value());
}

}  // namespace
}  // namespace pstrain
