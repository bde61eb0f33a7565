// The projector's files (issue 54): a checkpoint's most trained rows per
// table, where TensorBoard's projector plugin reads them, read back here
// through protobuf's text form of projector_config.proto.
#include "io/projector.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "io/checkpoint.h"
#include "io/row_checkpoint.h"
#include "proto/checkpoint.pb.h"
#include "proto/projector_config.pb.h"
#include "testing/temp_dir.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A checkpoint of `tables` whose rows are split over ps by id parity: row id
// of table t has weights {id + 0.5 t, ...}, pushes from `pushes`.
struct ProjectorRow {
  int table;
  int64_t id;
  int64_t pushes;
};

void WriteRowsCheckpoint(Env* env, const std::string& dir, int64_t step,
                         const std::vector<CheckpointTable>& tables,
                         const std::vector<ProjectorRow>& rows, int num_ps = 2) {
  CheckpointIndex index;
  index.set_global_step(step);
  index.set_model("test");
  index.set_num_params(num_ps);
  for (const CheckpointTable& t : tables) *index.add_tables() = t;
  const std::string prefix = CheckpointPrefix(step);
  for (int ps = 0; ps < num_ps; ++ps) {
    std::vector<RowTableHeader> headers;
    for (const CheckpointTable& t : tables) headers.push_back({t.name(), t.dim(), 1, "adagrad"});
    RowFileWriter writer(headers);
    for (const ProjectorRow& r : rows) {
      if (r.id % num_ps != ps) continue;
      std::vector<float> w(tables[r.table].dim());
      for (size_t d = 0; d < w.size(); ++d) w[d] = r.id + 0.5f * r.table + 0.25f * d;
      const float slot = 0.1f;
      writer.Add(r.table, r.id, w, {&slot, 1}, step, r.pushes);
    }
    const std::string name = RowsFileName(prefix, ps, num_ps);
    absl::StatusOr<RowFileSummary> written = writer.Write(env, JoinPath(dir, name), step);
    ASSERT_TRUE(written.ok()) << written.status();
    CheckpointShardFile* shard = index.add_shards();
    shard->set_file(ShardFileName(prefix, ps, num_ps));  // its dense part: one value each
    shard->set_begin(ps);
    shard->set_end(ps + 1);
    shard->set_rows_file(name);
    shard->set_rows_size_bytes(written->size_bytes);
    shard->set_rows_crc32c(written->crc32c);
  }
  ASSERT_TRUE(WriteCheckpointIndex(env, JoinPath(dir, IndexFileName(prefix)), index).ok());
}

CheckpointTable IndexTable(const std::string& name, int64_t dim, const std::string& feature) {
  CheckpointTable t;
  t.set_name(name);
  t.set_dim(dim);
  t.set_feature(feature);
  return t;
}

tensorboard::ProjectorConfig ReadConfig(Env* env, const std::string& run_dir) {
  tensorboard::ProjectorConfig config;
  absl::StatusOr<std::string> text = env->ReadFile(JoinPath(run_dir, kProjectorConfigFile));
  EXPECT_TRUE(text.ok()) << text.status();
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text.value_or(""), &config))
      << text.value_or("");
  return config;
}

std::vector<std::vector<std::string>> ReadTsv(Env* env, const std::string& path) {
  std::vector<std::vector<std::string>> lines;
  absl::StatusOr<std::string> text = env->ReadFile(path);
  EXPECT_TRUE(text.ok()) << path << ": " << text.status();
  if (!text.ok()) return lines;
  EXPECT_TRUE(text->empty() || text->back() == '\n') << path;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    lines.push_back(absl::StrSplit(line, '\t'));
  }
  return lines;
}

TEST(ProjectorTest, WritesTheMostTrainedRowsOfEachTableWithTheirNames) {
  MemEnv env;
  const std::vector<CheckpointTable> tables = {IndexTable("emb_C1/embeddings", 3, "C1"),
                                               IndexTable("wide/C1_X_C2", 1, ""),
                                               IndexTable("emb_C9/embeddings", 2, "C9")};
  // Table 0: 10 rows, pushes 0..9 except id 4 and id 6 tie at 50; table 1
  // (a cross): 2 rows; table 2: none.
  std::vector<ProjectorRow> rows;
  for (int64_t id = 0; id < 10; ++id) rows.push_back({0, id, id == 4 || id == 6 ? 50 : id});
  rows.push_back({1, 123, 7});
  rows.push_back({1, 5, 9});
  WriteRowsCheckpoint(&env, "/job", 300, tables, rows);

  ProjectorOptions options;
  options.rows = 4;
  std::vector<std::string> asked;
  options.name_rows = [&](std::vector<RowsToName>* named) {
    for (RowsToName& r : *named) {
      asked.push_back(absl::StrCat(r.table, ":", r.feature, ":", r.ids.size()));
      if (r.feature != "C1") continue;
      for (int64_t id : r.ids) r.texts.push_back(id == 9 ? "" : absl::StrCat("tok\t", id));
    }
  };
  absl::StatusOr<ProjectorSummary> summary =
      WriteProjector(&env, "/job/model.ckpt-300.index", "/job", options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_THAT(asked,
              ElementsAre("emb_C1/embeddings:C1:4", "wide/C1_X_C2::2", "emb_C9/embeddings:C9:0"));
  EXPECT_EQ(summary->global_step, 300);
  ASSERT_EQ(summary->tables.size(), 2u);  // the empty table has no entry
  EXPECT_EQ(summary->tables[0].rows_in_checkpoint, 10);
  EXPECT_EQ(summary->tables[0].rows, 4);
  EXPECT_EQ(summary->tables[0].named, 3);
  EXPECT_EQ(summary->tables[0].max_pushes, 50);
  EXPECT_EQ(summary->tables[0].min_pushes, 8);

  const tensorboard::ProjectorConfig config = ReadConfig(&env, "/job");
  ASSERT_EQ(config.embeddings_size(), 2);
  const tensorboard::EmbeddingInfo& e = config.embeddings(0);
  EXPECT_EQ(e.tensor_name(), "emb_C1/embeddings");
  EXPECT_THAT(e.tensor_shape(), ElementsAre(4, 3));
  EXPECT_EQ(e.tensor_path(), "projector/300/emb_C1_embeddings.tsv");
  EXPECT_EQ(e.metadata_path(), "projector/300/emb_C1_embeddings.metadata.tsv");
  EXPECT_TRUE(config.model_checkpoint_path().empty());

  // Most pushes first, ties by id: 4 and 6 (50), 9, 8.
  const auto tensor = ReadTsv(&env, JoinPath("/job", e.tensor_path()));
  ASSERT_EQ(tensor.size(), 4u);
  const std::vector<int64_t> order = {4, 6, 9, 8};
  for (size_t r = 0; r < order.size(); ++r) {
    ASSERT_EQ(tensor[r].size(), 3u);
    for (int d = 0; d < 3; ++d) {
      float v = 0;
      ASSERT_TRUE(absl::SimpleAtof(tensor[r][d], &v)) << tensor[r][d];
      EXPECT_FLOAT_EQ(v, order[r] + 0.25f * d);
    }
  }
  const auto metadata = ReadTsv(&env, JoinPath("/job", e.metadata_path()));
  ASSERT_EQ(metadata.size(), 5u);  // the header and a line per row
  EXPECT_THAT(metadata[0], ElementsAre("id", "value", "pushes"));
  EXPECT_THAT(metadata[1], ElementsAre("4", "tok 4", "50"));  // the tab made a space
  EXPECT_THAT(metadata[3], ElementsAre("9", "", "9"));
  EXPECT_THAT(metadata[4], ElementsAre("8", "tok 8", "8"));
  const auto cross = ReadTsv(&env, JoinPath("/job", config.embeddings(1).metadata_path()));
  ASSERT_EQ(cross.size(), 3u);
  EXPECT_THAT(cross[1], ElementsAre("5", "", "9"));
  EXPECT_THAT(cross[2], ElementsAre("123", "", "7"));

  // A later checkpoint replaces the set: the config names the new files, and
  // the old ones are gone.
  rows[0].pushes = 1000;  // id 0 is now the most trained
  WriteRowsCheckpoint(&env, "/job", 400, tables, rows);
  options.name_rows = nullptr;
  ASSERT_TRUE(WriteProjector(&env, "/job/model.ckpt-400.index", "/job", options).ok());
  const tensorboard::ProjectorConfig later = ReadConfig(&env, "/job");
  ASSERT_EQ(later.embeddings_size(), 2);
  EXPECT_EQ(later.embeddings(0).tensor_path(), "projector/400/emb_C1_embeddings.tsv");
  EXPECT_EQ(ReadTsv(&env, "/job/projector/400/emb_C1_embeddings.metadata.tsv")[1][0], "0");
  EXPECT_FALSE(env.FileExists("/job/projector/300/emb_C1_embeddings.tsv"));
  EXPECT_THAT(*env.ListDir("/job/projector"), ElementsAre("400"));
}

TEST(ProjectorTest, RefusesBadRowsAndDamagedCheckpointsAndLeavesTheLastSet) {
  MemEnv env;
  const std::vector<CheckpointTable> tables = {IndexTable("emb", 2, "C1")};
  WriteRowsCheckpoint(&env, "/job", 10, tables, {{0, 1, 3}, {0, 2, 4}});
  for (int64_t bad : {int64_t{-1}, kMaxProjectorRows + 1}) {
    absl::StatusOr<ProjectorSummary> s =
        WriteProjector(&env, "/job/model.ckpt-10.index", "/job", {.rows = bad});
    EXPECT_TRUE(absl::IsInvalidArgument(s.status())) << s.status();
  }
  absl::StatusOr<ProjectorSummary> none =
      WriteProjector(&env, "/job/model.ckpt-10.index", "/job", {.rows = 0});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(env.FileExists("/job/projector_config.pbtxt"));
  ASSERT_TRUE(WriteProjector(&env, "/job/model.ckpt-10.index", "/job", {}).ok());
  const std::string config = *env.ReadFile("/job/projector_config.pbtxt");

  // A damaged rows file of the next checkpoint: DataLoss, the set of step 10 stays.
  WriteRowsCheckpoint(&env, "/job", 20, tables, {{0, 1, 5}});
  const std::string rows = "/job/model.ckpt-20.rows-1-of-2";
  std::string bytes = *env.ReadFile(rows);
  bytes[bytes.size() / 2] ^= 1;
  ASSERT_TRUE(env.WriteFileAtomic(rows, bytes).ok());
  absl::StatusOr<ProjectorSummary> damaged =
      WriteProjector(&env, "/job/model.ckpt-20.index", "/job", {});
  EXPECT_TRUE(absl::IsDataLoss(damaged.status())) << damaged.status();
  EXPECT_THAT(damaged.status().message(), HasSubstr(rows));
  EXPECT_EQ(*env.ReadFile("/job/projector_config.pbtxt"), config);
  EXPECT_TRUE(env.FileExists("/job/projector/10/emb.tsv"));
  EXPECT_TRUE(
      absl::IsNotFound(WriteProjector(&env, "/job/model.ckpt-30.index", "/job", {}).status()));
}

// A checkpoint written before rows were counted (row file version 2) has
// every row's pushes 0: the rows with the smallest ids are written.
TEST(ProjectorTest, RowsWithoutPushesAreTakenBySmallestId) {
  MemEnv env;
  WriteRowsCheckpoint(&env, "/job", 5, {IndexTable("emb", 1, "")},
                      {{0, 9, 0}, {0, 3, 0}, {0, 7, 0}});
  ASSERT_TRUE(WriteProjector(&env, "/job/model.ckpt-5.index", "/job", {.rows = 2}).ok());
  const auto metadata = ReadTsv(&env, "/job/projector/5/emb.metadata.tsv");
  ASSERT_EQ(metadata.size(), 3u);
  EXPECT_EQ(metadata[1][0], "3");
  EXPECT_EQ(metadata[2][0], "7");
}

// The bound: a 1M-row table on 2 ps gives 10000 rows' files, whatever the
// table's size; the time is printed (this machine is shared: no assertion).
TEST(ProjectorTest, AMillionRowTableWritesBoundedFiles) {
  const std::string dir = testing_util::TempDirRemovedAtExit("projector");
  Env* env = Env::Default();
  constexpr int64_t kRows = 1000000, kDim = 16;
  std::vector<ProjectorRow> rows;
  rows.reserve(kRows);
  for (int64_t id = 0; id < kRows; ++id) rows.push_back({0, id * 7919 % 1000003, id % 977});
  WriteRowsCheckpoint(env, dir, 1000, {IndexTable("big/embeddings", kDim, "")}, rows);
  uint64_t checkpoint_bytes = 0;
  for (int ps = 0; ps < 2; ++ps) {
    checkpoint_bytes +=
        env->FileSize(JoinPath(dir, RowsFileName(CheckpointPrefix(1000), ps, 2))).value();
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<ProjectorSummary> summary =
      WriteProjector(env, JoinPath(dir, "model.ckpt-1000.index"), dir, {.rows = 10000});
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(summary->tables.size(), 1u);
  EXPECT_EQ(summary->tables[0].rows, 10000);
  EXPECT_EQ(summary->tables[0].rows_in_checkpoint, kRows);
  EXPECT_EQ(summary->tables[0].max_pushes, 976);
  // Up to 13 bytes a float and its tab, a metadata line of ~14: ~2.2 MB.
  EXPECT_LT(summary->bytes, uint64_t{10000} * (kDim * 13 + 32));
  std::printf(
      "projector: a %lld-row table of dim %lld (%.1f MB of rows files on 2 ps) -> %lld "
      "rows, %.2f MB of files, in %.2f s\n",
      static_cast<long long>(kRows), static_cast<long long>(kDim), checkpoint_bytes / 1e6,
      static_cast<long long>(summary->tables[0].rows), summary->bytes / 1e6, secs);
}

}  // namespace
}  // namespace pstrain
