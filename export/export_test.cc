#include "export/export.h"

#include <map>
#include <random>

#include "config/cluster_config.h"
#include "gtest/gtest.h"
#include "io/checkpoint.h"
#include "nlohmann/json.hpp"
#include "onnx/onnx.pb.h"
#include "proto/checkpoint.pb.h"
#include "testing/click_test_model.h"

namespace pstrain {
namespace {

constexpr char kBase[] = "/job/export";

// mnist_cnn with initialized values.
struct Trained {
  std::unique_ptr<Model> model;
  std::vector<float> params, state;
};
Trained MakeModel(uint64_t seed) {
  Trained t;
  t.model = *BuildModel("mnist_cnn", ModelOptions());
  t.params.resize(t.model->num_params());
  t.state.resize(t.model->num_state());
  t.model->InitializeVariables(seed, t.params.data(), t.state.data());
  return t;
}

TEST(ExportTest, RoundTripsEveryValueAndTheSpec) {
  MemEnv env;
  Trained t = MakeModel(7);
  ModelOptions options;
  options.dropout_rate = 0.25f;
  absl::StatusOr<std::string> dir =
      WriteExport(&env, kBase, *t.model, options, 1234, "model: mnist_cnn\n", t.params, t.state);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_TRUE(env.FileExists(*dir + "/model.json"));
  EXPECT_TRUE(env.FileExists(*dir + "/variables.bin"));
  // The model as ONNX beside it (onnx/onnx_export_test.cc checks the graph).
  absl::StatusOr<std::string> onnx_bytes = env.ReadFile(*dir + "/model.onnx");
  ASSERT_TRUE(onnx_bytes.ok()) << onnx_bytes.status();
  onnx::ModelProto onnx_model;
  ASSERT_TRUE(onnx_model.ParseFromString(*onnx_bytes));
  EXPECT_EQ(onnx_model.producer_name(), "pstrain");
  EXPECT_EQ(onnx_model.graph().name(), "mnist_cnn");
  EXPECT_EQ(onnx_model.graph().initializer_size(), static_cast<int>(t.model->variables().size()));
  absl::StatusOr<ExportedModel> e = ReadExport(&env, *dir);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->model, "mnist_cnn");
  EXPECT_EQ(e->global_step, 1234);
  EXPECT_FLOAT_EQ(e->options.dropout_rate, 0.25f);
  EXPECT_EQ(e->input_shape, (std::vector<int64_t>{28, 28, 1}));
  EXPECT_EQ(e->num_classes, 10);
  EXPECT_FALSE(e->per_image_standardization);
  EXPECT_EQ(e->hparams_yaml, "model: mnist_cnn\n");
  // The model's spec itself, so a loader needs no registry.
  EXPECT_FALSE(e->model_spec.empty());
  EXPECT_EQ(e->model_spec, t.model->spec_yaml());
  EXPECT_EQ(e->params, t.params);
  EXPECT_EQ(e->state, t.state);
  EXPECT_EQ(*dir, std::string(kBase) + "/" + std::to_string(e->version));
}

TEST(ExportTest, RefusesValuesOfAnotherSize) {
  MemEnv env;
  Trained t = MakeModel(1);
  t.params.pop_back();
  absl::StatusOr<std::string> dir =
      WriteExport(&env, kBase, *t.model, ModelOptions(), 1, "", t.params, t.state);
  EXPECT_TRUE(absl::IsInvalidArgument(dir.status())) << dir.status();
  EXPECT_TRUE(ListExportVersions(&env, kBase)->empty());
}

TEST(ExportTest, VersionsRiseArePrunedAndResolve) {
  MemEnv env;
  Trained t = MakeModel(1);
  std::vector<std::string> dirs;
  for (int i = 0; i < 3; ++i) {
    dirs.push_back(*WriteExport(&env, kBase, *t.model, ModelOptions(), i, "", t.params, t.state));
  }
  absl::StatusOr<std::vector<int64_t>> versions = ListExportVersions(&env, kBase);
  ASSERT_EQ(versions->size(), 3u);
  EXPECT_LT((*versions)[0], (*versions)[1]);
  EXPECT_LT((*versions)[1], (*versions)[2]);
  // A version dir, the export dir, and the job dir all name the newest.
  EXPECT_EQ(*ResolveExportDir(&env, dirs[1]), dirs[1]);
  EXPECT_EQ(*ResolveExportDir(&env, kBase), dirs[2]);
  EXPECT_EQ(*ResolveExportDir(&env, "/job"), dirs[2]);
  absl::StatusOr<std::string> none = ResolveExportDir(&env, "/elsewhere");
  EXPECT_TRUE(absl::IsNotFound(none.status()));
  EXPECT_NE(none.status().message().find("pstrain-export"), std::string::npos) << none.status();

  absl::StatusOr<std::vector<int64_t>> deleted = PruneExports(&env, kBase, 1);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(deleted->size(), 2u);
  EXPECT_EQ(*ListExportVersions(&env, kBase), std::vector<int64_t>{(*versions)[2]});
  EXPECT_FALSE(env.FileExists(dirs[0] + "/variables.bin"));
  EXPECT_FALSE(env.FileExists(dirs[0] + "/model.onnx"));
  EXPECT_TRUE(env.FileExists(dirs[2] + "/model.onnx"));
}

TEST(ExportTest, AModelWithoutASpecHasNoOnnxFile) {
  MemEnv env;
  Trained t = MakeModel(1);
  t.model->set_spec(std::nullopt);
  absl::StatusOr<std::string> dir =
      WriteExport(&env, kBase, *t.model, ModelOptions(), 1, "", t.params, t.state);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_FALSE(env.FileExists(*dir + "/model.onnx"));
  EXPECT_TRUE(ReadExport(&env, *dir).ok());
}

TEST(ExportTest, AVersionWithoutItsManifestIsNotOne) {
  MemEnv env;
  Trained t = MakeModel(1);
  const std::string dir =
      *WriteExport(&env, kBase, *t.model, ModelOptions(), 1, "", t.params, t.state);
  ASSERT_TRUE(env.DeleteFile(dir + "/model.json").ok());  // as if the export died before it
  EXPECT_TRUE(ListExportVersions(&env, kBase)->empty());
  EXPECT_TRUE(absl::IsNotFound(ResolveExportDir(&env, kBase).status()));
}

// Every damaged, truncated or mismatched file is DataLoss naming it.
TEST(ExportTest, CorruptOrTruncatedFilesAreRefused) {
  MemEnv env;
  Trained t = MakeModel(1);
  const std::string dir =
      *WriteExport(&env, kBase, *t.model, ModelOptions(), 1, "", t.params, t.state);
  const std::string variables = *env.ReadFile(dir + "/variables.bin");
  const std::string manifest = *env.ReadFile(dir + "/model.json");
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    std::string bad = variables;
    bad[rng() % bad.size()] ^= static_cast<char>(1 << (rng() % 8));
    ASSERT_TRUE(env.WriteFileAtomic(dir + "/variables.bin", bad).ok());
    absl::StatusOr<ExportedModel> e = ReadExport(&env, dir);
    EXPECT_TRUE(absl::IsDataLoss(e.status())) << e.status();
    EXPECT_NE(e.status().message().find("variables.bin: checksum mismatch"), std::string::npos);
  }
  for (size_t cut : {size_t{0}, size_t{1}, variables.size() / 2, variables.size() - 1}) {
    ASSERT_TRUE(env.WriteFileAtomic(dir + "/variables.bin", variables.substr(0, cut)).ok());
    absl::StatusOr<ExportedModel> e = ReadExport(&env, dir);
    EXPECT_TRUE(absl::IsDataLoss(e.status())) << e.status();
    EXPECT_NE(e.status().message().find("bytes; the manifest says"), std::string::npos);
  }
  ASSERT_TRUE(env.WriteFileAtomic(dir + "/variables.bin", variables).ok());
  for (size_t cut : {size_t{0}, size_t{1}, manifest.size() / 2, manifest.size() - 3}) {
    ASSERT_TRUE(env.WriteFileAtomic(dir + "/model.json", manifest.substr(0, cut)).ok());
    absl::StatusOr<ExportedModel> e = ReadExport(&env, dir);
    EXPECT_TRUE(absl::IsDataLoss(e.status())) << e.status();
    EXPECT_NE(e.status().message().find("model.json"), std::string::npos) << e.status();
  }
  std::string newer = manifest;
  newer.replace(newer.find("\"format_version\": 1"), 19, "\"format_version\": 9");
  ASSERT_TRUE(env.WriteFileAtomic(dir + "/model.json", newer).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ReadExport(&env, dir).status()));
  ASSERT_TRUE(env.WriteFileAtomic(dir + "/model.json", manifest).ok());
  EXPECT_TRUE(ReadExport(&env, dir).ok());
}

// A one-shard checkpoint of `t` at `step`, written as the chief and a ps do.
std::string WriteCheckpoint(Env* env, const Trained& t, int64_t step) {
  const int64_t n = t.model->num_params();
  ShardValues shard;
  shard.model = "mnist_cnn";
  shard.global_step = step;
  shard.end = n;
  shard.optimizer = "sgd";
  ChunkValues chunk;
  chunk.end = n;
  chunk.step = step;
  chunk.params = t.params;
  chunk.state = t.state;
  shard.chunks.push_back(chunk);
  const std::string prefix = "/job/" + CheckpointPrefix(step);
  absl::StatusOr<WrittenShard> written =
      WriteCheckpointShard(env, ShardFileName(prefix, 0, 1), shard);
  EXPECT_TRUE(written.ok()) << written.status();
  CheckpointIndex index;
  index.set_model("mnist_cnn");
  index.set_global_step(step);
  index.set_num_params(n);
  index.set_num_state(t.model->num_state());
  index.set_optimizer("sgd");
  CheckpointShardFile* file = index.add_shards();
  file->set_file(ShardFileName(CheckpointPrefix(step), 0, 1));
  file->set_end(n);
  file->set_num_state(t.model->num_state());
  file->set_size_bytes(written->size_bytes);
  file->set_crc32c(written->crc32c);
  JobConfig job;
  job.training.model = "mnist_cnn";
  job.training.batch_norm_epsilon = 1e-3;
  index.set_hparams_yaml(JobConfigToYaml(job));
  EXPECT_TRUE(WriteCheckpointIndex(env, IndexFileName(prefix), index).ok());
  return IndexFileName(prefix);
}

TEST(ExportTest, ExportsACheckpointWithItsJobsModelOptions) {
  MemEnv env;
  Trained t = MakeModel(5);
  WriteCheckpoint(&env, t, 100);
  const std::string index = WriteCheckpoint(&env, t, 200);
  // A job dir names its newest checkpoint; a prefix names itself.
  EXPECT_EQ(*ResolveCheckpointIndex(&env, "/job"), index);
  EXPECT_EQ(*ResolveCheckpointIndex(&env, "/job/model.ckpt-100"), "/job/model.ckpt-100.index");
  EXPECT_TRUE(absl::IsNotFound(ResolveCheckpointIndex(&env, "/nothing").status()));

  absl::StatusOr<std::string> dir = ExportCheckpoint(&env, index, kBase);
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<ExportedModel> e = ReadExport(&env, *dir);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->global_step, 200);
  EXPECT_FLOAT_EQ(e->options.batch_norm_epsilon, 1e-3f);
  EXPECT_EQ(e->params, t.params);
  EXPECT_EQ(e->state, t.state);

  // pstrain-export --format=onnx: the version's model.onnx alone.
  ASSERT_TRUE(ExportCheckpointAsOnnx(&env, index, "/out/net.onnx").ok());
  EXPECT_EQ(*env.ReadFile("/out/net.onnx"), *env.ReadFile(*dir + "/model.onnx"));
  EXPECT_FALSE(ExportCheckpointAsOnnx(&env, "/nothing.index", "/out/x.onnx").ok());
  EXPECT_FALSE(env.FileExists("/out/x.onnx"));
}

// A click model: its tables' rows go to embeddings.rows and come back as
// they were; tables that do not fit the model are refused before anything is
// written, and a damaged or truncated rows file is DataLoss naming it.
TEST(ExportTest, AClickModelsRowsRoundTrip) {
  MemEnv env;
  std::unique_ptr<Model> model = *BuildModelFromSpecText(R"(name: click
input: [2]
head: binary
layers:
  - embedding: {feature: f, dim: 3, buckets: 10, name: emb}
  - concat: {input: input, inputs: [emb]}
  - dense: {units: 1, name: deep}
  - linear: {features: [f, g], dynamic: true, name: wide}
  - add: {input: deep, inputs: [wide]}
)",
                                                         "the test's spec");
  ASSERT_EQ(model->sparse_tables().size(), 3u);
  std::vector<float> params(model->num_params()), state(model->num_state());
  model->InitializeVariables(2, params.data(), state.data());
  std::vector<TrainedTableRows> tables(3);
  tables[0] = {{4, 9, 0}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
  tables[1] = {{123456789012345}, {-0.5f}};
  tables[2] = {};  // no row trained

  std::vector<TrainedTableRows> short_rows = tables;
  short_rows[0].weights.pop_back();
  for (const auto& bad : {std::vector<TrainedTableRows>(tables.begin(), tables.begin() + 2),
                          std::vector<TrainedTableRows>(), short_rows}) {
    absl::StatusOr<std::string> refused =
        WriteExport(&env, kBase, *model, ModelOptions(), 7, "", params, state, bad);
    EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  }
  EXPECT_TRUE(ListExportVersions(&env, kBase)->empty());

  absl::StatusOr<std::string> dir =
      WriteExport(&env, kBase, *model, ModelOptions(), 7, "", params, state, tables);
  ASSERT_TRUE(dir.ok()) << dir.status();
  // A dynamic table has no ONNX form: the version has no model.onnx.
  EXPECT_FALSE(env.FileExists(*dir + "/model.onnx"));
  const nlohmann::json manifest = nlohmann::json::parse(*env.ReadFile(*dir + "/model.json"));
  EXPECT_EQ(manifest["format_version"], 4);
  EXPECT_EQ(manifest["tables"][0]["name"], "emb/embeddings");
  EXPECT_EQ(manifest["tables"][0]["rows"], 3);
  EXPECT_EQ(manifest["input"]["sparse_features"], nlohmann::json({"f", "g"}));
  absl::StatusOr<ExportedModel> e = ReadExport(&env, *dir);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->tables.size(), 3u);
  for (int t = 0; t < 3; ++t) {
    EXPECT_EQ(e->tables[t].ids, tables[t].ids) << t;
    EXPECT_EQ(e->tables[t].weights, tables[t].weights) << t;
  }

  const std::string rows = *env.ReadFile(*dir + "/embeddings.rows");
  for (size_t cut : {size_t{0}, rows.size() / 2, rows.size() - 1}) {
    ASSERT_TRUE(env.WriteFileAtomic(*dir + "/embeddings.rows", rows.substr(0, cut)).ok());
    absl::StatusOr<ExportedModel> damaged = ReadExport(&env, *dir);
    EXPECT_TRUE(absl::IsDataLoss(damaged.status())) << damaged.status();
    EXPECT_NE(damaged.status().message().find("embeddings.rows"), std::string::npos);
  }
  std::string flipped = rows;
  flipped[rows.size() / 2] ^= 1;
  ASSERT_TRUE(env.WriteFileAtomic(*dir + "/embeddings.rows", flipped).ok());
  EXPECT_TRUE(absl::IsDataLoss(ReadExport(&env, *dir).status()));
  ASSERT_TRUE(env.WriteFileAtomic(*dir + "/embeddings.rows", rows).ok());
  EXPECT_TRUE(ReadExport(&env, *dir).ok());
  // Pruning takes the rows file with its version.
  ASSERT_TRUE(WriteExport(&env, kBase, *model, ModelOptions(), 8, "", params, state, tables).ok());
  ASSERT_EQ(PruneExports(&env, kBase, 1)->size(), 1u);
  EXPECT_FALSE(env.FileExists(*dir + "/embeddings.rows"));
}

// Deltas: a version of only the rows that changed, read back whole through
// its chain to the full version; pruning keeps the versions a kept delta is
// read from; a delta whose base is gone, or that is not of the newest
// version, is refused.
TEST(ExportTest, DeltasReadBackWholeAndKeepTheirBases) {
  MemEnv env;
  ClickModel c = MakeClickModel();
  const auto whole_rows = [](const std::vector<TrainedTableRows>& tables, size_t t) {
    std::map<int64_t, std::vector<float>> rows;
    const size_t dim = tables[t].ids.empty() ? 0 : tables[t].weights.size() / tables[t].ids.size();
    for (size_t r = 0; r < tables[t].ids.size(); ++r) {
      rows[tables[t].ids[r]].assign(tables[t].weights.begin() + r * dim,
                                    tables[t].weights.begin() + (r + 1) * dim);
    }
    return rows;
  };
  const std::string full =
      *WriteExport(&env, kBase, *c.model, ModelOptions(), 1, "", c.params, c.state, c.tables);
  ExportOnnxFile no_onnx;
  no_onnx.missing_reason = "a delta";
  std::vector<std::string> dirs = {full};
  for (int round = 1; round <= 2; ++round) {
    const std::vector<TrainedTableRows> delta = MoveOn(&c, round);
    const int64_t newest = ListExportVersions(&env, kBase)->back();
    // Not of the newest version: refused.
    EXPECT_TRUE(absl::IsFailedPrecondition(WriteExportVersion(&env, kBase, *c.model, ModelOptions(),
                                                              1 + round, "", c.params, c.state,
                                                              delta, no_onnx, newest - 1)
                                               .status()));
    absl::StatusOr<std::string> dir =
        WriteExportVersion(&env, kBase, *c.model, ModelOptions(), 1 + round, "", c.params, c.state,
                           delta, no_onnx, newest);
    ASSERT_TRUE(dir.ok()) << dir.status();
    dirs.push_back(*dir);
    const nlohmann::json manifest = nlohmann::json::parse(*env.ReadFile(*dir + "/model.json"));
    EXPECT_EQ(manifest["format_version"], 4);
    EXPECT_EQ(manifest["delta_of"], newest);
    EXPECT_EQ(*ExportDeltaOf(&env, *dir), newest);
    // Its own files hold the changed rows only; read whole, every row.
    absl::StatusOr<ExportedModel> files = ReadExportFiles(&env, *dir);
    ASSERT_TRUE(files.ok()) << files.status();
    EXPECT_EQ(files->tables[0].ids, delta[0].ids);
    absl::StatusOr<ExportedModel> e = ReadExport(&env, *dir);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->delta_of, newest);
    EXPECT_EQ(e->global_step, 1 + round);
    EXPECT_EQ(e->params, c.params);
    for (size_t t = 0; t < c.tables.size(); ++t) {
      EXPECT_EQ(whole_rows(e->tables, t), whole_rows(c.tables, t)) << round << " " << t;
    }
  }
  EXPECT_EQ(*ExportDeltaOf(&env, full), 0);
  // Keeping the newest 1 keeps the chain it is read from.
  EXPECT_TRUE(PruneExports(&env, kBase, 1)->empty());
  EXPECT_TRUE(ReadExport(&env, dirs.back()).ok());
  // A full version after them: the chain before it goes.
  const std::string full2 =
      *WriteExport(&env, kBase, *c.model, ModelOptions(), 4, "", c.params, c.state, c.tables);
  const std::vector<TrainedTableRows> delta = MoveOn(&c, 3);
  const std::string last = *WriteExportVersion(
      &env, kBase, *c.model, ModelOptions(), 5, "", c.params, c.state, delta, no_onnx,
      *ExportDeltaOf(&env, full2) == 0 ? ListExportVersions(&env, kBase)->back() : 0);
  EXPECT_EQ(PruneExports(&env, kBase, 2)->size(), 3u);
  EXPECT_FALSE(env.FileExists(full + "/model.json"));
  ASSERT_TRUE(ReadExport(&env, last).ok());
  // Its base gone: DataLoss naming what it was read from.
  ASSERT_TRUE(env.DeleteFile(full2 + "/model.json").ok());
  absl::StatusOr<ExportedModel> orphan = ReadExport(&env, last);
  EXPECT_TRUE(absl::IsDataLoss(orphan.status())) << orphan.status();
  EXPECT_NE(orphan.status().message().find("a delta of version"), std::string::npos)
      << orphan.status();
  // A manifest whose delta_of is not before its version.
  nlohmann::json m = nlohmann::json::parse(*env.ReadFile(last + "/model.json"));
  m["delta_of"] = m["version"];
  ASSERT_TRUE(env.WriteFileAtomic(last + "/model.json", m.dump()).ok());
  EXPECT_TRUE(absl::IsDataLoss(ReadExportFiles(&env, last).status()));
}

}  // namespace
}  // namespace pstrain
