#include "io/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/crc32c.h"
#include "common/env.h"
#include "common/record_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/checkpoint_inspect.h"
#include "testing/temp_dir.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

const std::vector<std::string> kSlotNames = {"m", "v"};

// The flat vectors a test checkpoint holds.
struct FlatValues {
  std::vector<float> params;
  std::vector<std::vector<float>> slots;  // one per kSlotNames
  std::vector<float> state;
};

// Values that differ at every index, so a misplaced copy shows.
FlatValues Generated(int64_t num_params, int64_t num_state) {
  FlatValues v;
  v.slots.resize(kSlotNames.size());
  for (int64_t i = 0; i < num_params; ++i) {
    v.params.push_back(0.25f * static_cast<float>(i) - 3.0f);
    v.slots[0].push_back(0.01f * static_cast<float>(i));
    v.slots[1].push_back(1.0f + 0.5f * static_cast<float>(i));
  }
  for (int64_t i = 0; i < num_state; ++i) v.state.push_back(100.0f + static_cast<float>(i));
  return v;
}

using OptimizerStepFn = std::function<int64_t(int64_t chunk_begin)>;
int64_t ConstantStep(int64_t) { return 42; }

// Ps `ps`'s shard of `values`, its chunks cut at `cuts` (front and back are the
// ps's range); ps 0's first chunk carries the state.
ShardValues MakeShard(const FlatValues& values, int ps, int num_ps,
                      const std::vector<int64_t>& cuts,
                      const OptimizerStepFn& optimizer_step = ConstantStep) {
  ShardValues s;
  s.model = "test_model";
  s.ps_index = ps;
  s.num_ps = num_ps;
  s.global_step = 500;
  s.begin = cuts.front();
  s.end = cuts.back();
  s.optimizer = "adam";
  s.slot_names = kSlotNames;
  for (size_t j = 0; j + 1 < cuts.size(); ++j) {
    ChunkValues c;
    c.begin = cuts[j];
    c.end = cuts[j + 1];
    c.step = 490 + static_cast<int64_t>(j);
    c.optimizer_step = optimizer_step(c.begin);
    c.params.assign(values.params.begin() + c.begin, values.params.begin() + c.end);
    for (const std::vector<float>& slot : values.slots) {
      c.slots.emplace_back(slot.begin() + c.begin, slot.begin() + c.end);
    }
    if (ps == 0 && j == 0) c.state = values.state;
    s.chunks.push_back(std::move(c));
  }
  return s;
}

// Writes checkpoint 500 of `values` to `dir`, one shard file per entry of
// `shard_cuts`, and its index; returns the index's path.
absl::StatusOr<std::string> WriteCheckpoint(Env* env, const std::string& dir,
                                            const FlatValues& values,
                                            const std::vector<std::vector<int64_t>>& shard_cuts,
                                            const OptimizerStepFn& optimizer_step = ConstantStep,
                                            const std::vector<CheckpointVariable>& variables = {}) {
  const std::string prefix = CheckpointPrefix(500);
  CheckpointIndex index;
  index.set_model("test_model");
  index.set_global_step(500);
  index.set_num_params(static_cast<int64_t>(values.params.size()));
  index.set_num_state(static_cast<int64_t>(values.state.size()));
  for (const CheckpointVariable& v : variables) *index.add_variables() = v;
  index.set_optimizer("adam");
  for (const std::string& name : kSlotNames) index.add_slot_names(name);
  index.set_unix_time(1700000000);
  const int num_ps = static_cast<int>(shard_cuts.size());
  for (int ps = 0; ps < num_ps; ++ps) {
    const std::string file = ShardFileName(prefix, ps, num_ps);
    absl::StatusOr<WrittenShard> written = WriteCheckpointShard(
        env, JoinPath(dir, file), MakeShard(values, ps, num_ps, shard_cuts[ps], optimizer_step));
    if (!written.ok()) return written.status();
    CheckpointShardFile* entry = index.add_shards();
    entry->set_file(file);
    entry->set_begin(shard_cuts[ps].front());
    entry->set_end(shard_cuts[ps].back());
    entry->set_num_state(ps == 0 ? index.num_state() : 0);
    entry->set_size_bytes(written->size_bytes);
    entry->set_crc32c(written->crc32c);
  }
  const std::string index_path = JoinPath(dir, IndexFileName(prefix));
  absl::Status s = WriteCheckpointIndex(env, index_path, index);
  if (!s.ok()) return s;
  return index_path;
}

std::string FlipBit(std::string s, size_t bit) {
  s[bit / 8] = static_cast<char>(s[bit / 8] ^ (1 << (bit % 8)));
  return s;
}

void ExpectShardsEqual(const ShardValues& a, const ShardValues& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.ps_index, b.ps_index);
  EXPECT_EQ(a.num_ps, b.num_ps);
  EXPECT_EQ(a.global_step, b.global_step);
  EXPECT_EQ(a.begin, b.begin);
  EXPECT_EQ(a.end, b.end);
  EXPECT_EQ(a.optimizer, b.optimizer);
  EXPECT_EQ(a.slot_names, b.slot_names);
  ASSERT_EQ(a.chunks.size(), b.chunks.size());
  for (size_t j = 0; j < a.chunks.size(); ++j) {
    SCOPED_TRACE(absl::StrCat("chunk ", j));
    EXPECT_EQ(a.chunks[j].begin, b.chunks[j].begin);
    EXPECT_EQ(a.chunks[j].end, b.chunks[j].end);
    EXPECT_EQ(a.chunks[j].step, b.chunks[j].step);
    EXPECT_EQ(a.chunks[j].optimizer_step, b.chunks[j].optimizer_step);
    EXPECT_EQ(a.chunks[j].params, b.chunks[j].params);
    EXPECT_EQ(a.chunks[j].slots, b.chunks[j].slots);
    EXPECT_EQ(a.chunks[j].state, b.chunks[j].state);
  }
}

// What a damaged copy of a file must give: DataLoss naming the file.
void ExpectDataLossNaming(const absl::Status& s, const std::string& path) {
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr(path));
}

// --- Shard files ---

constexpr char kShardPath[] = "/job/model.ckpt-500.shard-0-of-2";

CheckpointShardFile ExpectedEntry(const WrittenShard& written) {
  CheckpointShardFile e;
  e.set_file("model.ckpt-500.shard-0-of-2");
  e.set_size_bytes(written.size_bytes);
  e.set_crc32c(written.crc32c);
  return e;
}

TEST(CheckpointShardTest, RoundTrip) {
  MemEnv env;
  const FlatValues values = Generated(10, 4);
  const ShardValues in = MakeShard(values, 0, 2, {0, 3, 8, 10});
  absl::StatusOr<WrittenShard> written = WriteCheckpointShard(&env, kShardPath, in);
  ASSERT_TRUE(written.ok()) << written.status();
  absl::StatusOr<std::string> contents = env.ReadFile(kShardPath);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(written->path, kShardPath);
  EXPECT_EQ(written->size_bytes, contents->size());
  EXPECT_EQ(written->crc32c, crc32c::Value(contents->data(), contents->size()));
  EXPECT_THAT(*env.ListDir("/job"), ElementsAre("model.ckpt-500.shard-0-of-2"));  // no temp file

  const CheckpointShardFile expected = ExpectedEntry(*written);
  for (const CheckpointShardFile* e :
       {static_cast<const CheckpointShardFile*>(nullptr), &expected}) {
    absl::StatusOr<ShardValues> out = ReadCheckpointShard(&env, kShardPath, e);
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectShardsEqual(in, *out);
    EXPECT_EQ(out->chunks[0].state.size(), 4u);
    EXPECT_THAT(out->chunks[1].state, IsEmpty());
  }
}

TEST(CheckpointShardTest, WriteRejectsChunksThatDoNotTile) {
  MemEnv env;
  const FlatValues values = Generated(10, 0);
  std::vector<ShardValues> bad(5, MakeShard(values, 0, 1, {0, 3, 10}));
  bad[0].chunks[1].begin = 4;  // a gap
  bad[1].end = 11;             // chunks end short of the range
  bad[2].chunks[0].params.pop_back();
  bad[3].chunks[1].slots.pop_back();  // a slot missing
  bad[4].chunks[1].slots[1].push_back(0);
  for (size_t i = 0; i < bad.size(); ++i) {
    absl::StatusOr<WrittenShard> written = WriteCheckpointShard(&env, kShardPath, bad[i]);
    EXPECT_TRUE(absl::IsInvalidArgument(written.status())) << i << ": " << written.status();
  }
  EXPECT_FALSE(env.FileExists("/job"));  // neither the file nor a temp file
}

TEST(CheckpointShardTest, MissingFileIsNotFound) {
  MemEnv env;
  EXPECT_TRUE(absl::IsNotFound(ReadCheckpointShard(&env, kShardPath).status()));
}

TEST(CheckpointShardTest, WholeFileOtherThanTheIndexSaysIsDataLoss) {
  MemEnv env;
  absl::StatusOr<WrittenShard> written =
      WriteCheckpointShard(&env, kShardPath, MakeShard(Generated(6, 0), 0, 2, {0, 6}));
  ASSERT_TRUE(written.ok()) << written.status();
  CheckpointShardFile expected = ExpectedEntry(*written);
  ASSERT_TRUE(ReadCheckpointShard(&env, kShardPath, &expected).ok());
  expected.set_size_bytes(written->size_bytes + 1);
  ExpectDataLossNaming(ReadCheckpointShard(&env, kShardPath, &expected).status(), kShardPath);
  expected = ExpectedEntry(*written);
  expected.set_crc32c(written->crc32c ^ 1);
  ExpectDataLossNaming(ReadCheckpointShard(&env, kShardPath, &expected).status(), kShardPath);
}

// A small shard: two chunks, two slots, state; every kind of record.
std::string SmallShardFile(MemEnv* env, CheckpointShardFile* expected) {
  absl::StatusOr<WrittenShard> written =
      WriteCheckpointShard(env, kShardPath, MakeShard(Generated(3, 2), 0, 2, {0, 2, 3}));
  EXPECT_TRUE(written.ok()) << written.status();
  *expected = ExpectedEntry(*written);
  return *env->ReadFile(kShardPath);
}

TEST(CheckpointShardTest, EveryTruncationIsDataLoss) {
  MemEnv env;
  CheckpointShardFile expected;
  const std::string contents = SmallShardFile(&env, &expected);
  ASSERT_GT(contents.size(), 100u);
  for (size_t size = 0; size < contents.size(); ++size) {
    SCOPED_TRACE(absl::StrCat("cut to ", size, " bytes"));
    ASSERT_TRUE(env.WriteFileAtomic(kShardPath, contents.substr(0, size)).ok());
    ExpectDataLossNaming(ReadCheckpointShard(&env, kShardPath).status(), kShardPath);
    ExpectDataLossNaming(ReadCheckpointShard(&env, kShardPath, &expected).status(), kShardPath);
  }
}

TEST(CheckpointShardTest, EveryBitFlipIsDataLoss) {
  MemEnv env;
  CheckpointShardFile expected;
  const std::string contents = SmallShardFile(&env, &expected);
  std::vector<size_t> undetected, undetected_with_index, unnamed;
  for (size_t bit = 0; bit < contents.size() * 8; ++bit) {
    ASSERT_TRUE(env.WriteFileAtomic(kShardPath, FlipBit(contents, bit)).ok());
    // Without the index's size and CRC, the record CRCs find it.
    absl::Status s = ReadCheckpointShard(&env, kShardPath).status();
    if (!absl::IsDataLoss(s)) undetected.push_back(bit);
    if (s.message().find(kShardPath) == absl::string_view::npos) unnamed.push_back(bit);
    s = ReadCheckpointShard(&env, kShardPath, &expected).status();
    if (!absl::IsDataLoss(s)) undetected_with_index.push_back(bit);
    if (s.message().find(kShardPath) == absl::string_view::npos) unnamed.push_back(bit);
  }
  EXPECT_THAT(undetected, IsEmpty());
  EXPECT_THAT(undetected_with_index, IsEmpty());
  EXPECT_THAT(unnamed, IsEmpty());
}

// Files whose records are whole but do not make a shard (a writer's bug, or
// a file of another format).
TEST(CheckpointShardTest, WellFramedButInconsistentIsDataLoss) {
  CheckpointShardHeader header;
  header.set_model("test_model");
  header.set_end(10);
  CheckpointChunk* chunk = header.add_chunks();
  chunk->set_end(5);
  const std::string floats5 = RecordWriter::Frame(std::string(5 * sizeof(float), '\0'));
  const std::string floats4 = RecordWriter::Frame(std::string(4 * sizeof(float), '\0'));
  CheckpointShardHeader gap = header;
  gap.mutable_chunks(0)->set_begin(1);
  CheckpointShardHeader past_end = header;
  past_end.mutable_chunks(0)->set_end(11);
  CheckpointShardHeader whole = header;
  whole.mutable_chunks(0)->set_end(10);
  const std::string floats10 = RecordWriter::Frame(std::string(10 * sizeof(float), '\0'));
  const std::vector<std::string> files = {
      RecordWriter::Frame(header.SerializeAsString()) + floats5,  // chunks end at 5, not 10
      RecordWriter::Frame(gap.SerializeAsString()) + floats4,
      RecordWriter::Frame(past_end.SerializeAsString()),
      RecordWriter::Frame(whole.SerializeAsString()) + floats5,             // too few values
      RecordWriter::Frame(whole.SerializeAsString()) + floats10 + floats5,  // a record too many
      RecordWriter::Frame("\xff\xff\xff") + floats10,                       // not a header
  };
  MemEnv env;
  ASSERT_TRUE(
      env.WriteFileAtomic(kShardPath, RecordWriter::Frame(whole.SerializeAsString()) + floats10)
          .ok());
  ASSERT_TRUE(ReadCheckpointShard(&env, kShardPath).ok());
  for (size_t i = 0; i < files.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("file ", i));
    ASSERT_TRUE(env.WriteFileAtomic(kShardPath, files[i]).ok());
    ExpectDataLossNaming(ReadCheckpointShard(&env, kShardPath).status(), kShardPath);
  }
}

// --- Index files ---

constexpr char kIndexPath[] = "/job/model.ckpt-500.index";

CheckpointIndex MakeIndex() {
  CheckpointIndex index;
  index.set_model("test_model");
  index.set_global_step(500);
  index.set_num_params(10);
  index.set_num_state(4);
  CheckpointVariable* v = index.add_variables();
  v->set_name("dense/kernel");
  v->add_shape(2);
  v->add_shape(5);
  v->set_trainable(true);
  v->set_size(10);
  v = index.add_variables();
  v->set_name("bn/moving_mean");
  v->add_shape(4);
  v->set_size(4);
  index.set_optimizer("adam");
  index.add_slot_names("m");
  index.add_slot_names("v");
  for (int ps = 0; ps < 2; ++ps) {
    CheckpointShardFile* shard = index.add_shards();
    shard->set_file(ShardFileName(CheckpointPrefix(500), ps, 2));
    shard->set_begin(ps * 6);
    shard->set_end(ps == 0 ? 6 : 10);
    shard->set_num_state(ps == 0 ? 4 : 0);
    shard->set_size_bytes(1000 + ps);
    shard->set_crc32c(0xdeadbeef + ps);
  }
  index.set_hparams_yaml("learning_rate: 0.001\n");
  index.set_unix_time(1700000000);
  return index;
}

TEST(CheckpointIndexTest, RoundTrip) {
  MemEnv env;
  const CheckpointIndex index = MakeIndex();
  ASSERT_TRUE(WriteCheckpointIndex(&env, kIndexPath, index).ok());
  absl::StatusOr<CheckpointIndex> read = ReadCheckpointIndex(&env, kIndexPath);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->SerializeAsString(), index.SerializeAsString());
  EXPECT_EQ(read->shards(1).crc32c(), 0xdeadbeef + 1);
  EXPECT_TRUE(absl::IsNotFound(ReadCheckpointIndex(&env, "/job/none.index").status()));
}

TEST(CheckpointIndexTest, EveryTruncationAndBitFlipIsDataLoss) {
  MemEnv env;
  ASSERT_TRUE(WriteCheckpointIndex(&env, kIndexPath, MakeIndex()).ok());
  const std::string contents = *env.ReadFile(kIndexPath);
  for (size_t size = 0; size < contents.size(); ++size) {
    SCOPED_TRACE(absl::StrCat("cut to ", size, " bytes"));
    ASSERT_TRUE(env.WriteFileAtomic(kIndexPath, contents.substr(0, size)).ok());
    ExpectDataLossNaming(ReadCheckpointIndex(&env, kIndexPath).status(), kIndexPath);
  }
  std::vector<size_t> undetected;
  for (size_t bit = 0; bit < contents.size() * 8; ++bit) {
    ASSERT_TRUE(env.WriteFileAtomic(kIndexPath, FlipBit(contents, bit)).ok());
    absl::Status s = ReadCheckpointIndex(&env, kIndexPath).status();
    if (!absl::IsDataLoss(s) || s.message().find(kIndexPath) == absl::string_view::npos) {
      undetected.push_back(bit);
    }
  }
  EXPECT_THAT(undetected, IsEmpty());
  // A second record, and a record that is not an index.
  ASSERT_TRUE(env.WriteFileAtomic(kIndexPath, contents + RecordWriter::Frame("x")).ok());
  ExpectDataLossNaming(ReadCheckpointIndex(&env, kIndexPath).status(), kIndexPath);
  ASSERT_TRUE(env.WriteFileAtomic(kIndexPath, RecordWriter::Frame("\xff\xff\xff")).ok());
  ExpectDataLossNaming(ReadCheckpointIndex(&env, kIndexPath).status(), kIndexPath);
}

TEST(CheckpointIndexTest, ShardsThatDoNotTileAreDataLoss) {
  std::vector<std::function<void(CheckpointIndex*)>> damages = {
      [](CheckpointIndex* i) { i->mutable_shards(1)->set_begin(7); },  // a gap
      [](CheckpointIndex* i) { i->mutable_shards(1)->set_begin(5); },  // an overlap
      [](CheckpointIndex* i) { i->set_num_params(11); },               // short of the end
      [](CheckpointIndex* i) { i->set_num_params(9); },                // past the end
      [](CheckpointIndex* i) { i->mutable_shards(0)->set_end(-1); },
      [](CheckpointIndex* i) { i->clear_shards(); },
      [](CheckpointIndex* i) { i->mutable_shards(0)->set_file(""); },
      [](CheckpointIndex* i) { i->mutable_shards(0)->set_file("../x.shard-0-of-2"); },
      [](CheckpointIndex* i) { i->set_num_state(-1); },
  };
  MemEnv env;
  ASSERT_TRUE(WriteCheckpointIndex(&env, kIndexPath, MakeIndex()).ok());
  ASSERT_TRUE(ReadCheckpointIndex(&env, kIndexPath).ok());
  for (size_t d = 0; d < damages.size(); ++d) {
    SCOPED_TRACE(absl::StrCat("damage ", d));
    CheckpointIndex index = MakeIndex();
    damages[d](&index);
    ASSERT_TRUE(WriteCheckpointIndex(&env, kIndexPath, index).ok());
    ExpectDataLossNaming(ReadCheckpointIndex(&env, kIndexPath).status(), kIndexPath);
  }
}

// --- The `checkpoint` state file ---

TEST(CheckpointStateTest, RoundTrip) {
  CheckpointState state;
  state.model_checkpoint_path = "model.ckpt-2000";
  state.all_model_checkpoint_paths = {"model.ckpt-1000", "model.ckpt-2000"};
  const std::string text = FormatCheckpointState(state);
  EXPECT_EQ(text,
            "model_checkpoint_path: \"model.ckpt-2000\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-1000\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-2000\"\n");
  absl::StatusOr<CheckpointState> parsed = ParseCheckpointState(text, "/job/checkpoint");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->model_checkpoint_path, "model.ckpt-2000");
  EXPECT_THAT(parsed->all_model_checkpoint_paths,
              ElementsAre("model.ckpt-1000", "model.ckpt-2000"));

  // Blank lines, spaces and CRLF line ends, as an editor may leave them.
  parsed = ParseCheckpointState(
      "\n  model_checkpoint_path:\"model.ckpt-5\"  \r\n\nall_model_checkpoint_paths: "
      "\"model.ckpt-5\"\r\n",
      "/job/checkpoint");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->model_checkpoint_path, "model.ckpt-5");
  EXPECT_THAT(parsed->all_model_checkpoint_paths, ElementsAre("model.ckpt-5"));
}

TEST(CheckpointStateTest, BadLineNamesFileAndLine) {
  absl::StatusOr<CheckpointState> parsed = ParseCheckpointState(
      "model_checkpoint_path: \"model.ckpt-5\"\n\nmodel_path: \"x\"\n", "/job/checkpoint");
  EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << parsed.status();
  EXPECT_THAT(parsed.status().message(), HasSubstr("/job/checkpoint:3:"));
  // TensorFlow 2.x's extra lines are read past.
  parsed = ParseCheckpointState(
      "model_checkpoint_path: \"model.ckpt-5\"\nall_model_checkpoint_timestamps: 1.5\n"
      "last_preserved_timestamp: 1.2\n",
      "/job/checkpoint");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->model_checkpoint_path, "model.ckpt-5");
  parsed = ParseCheckpointState("model_checkpoint_path: model.ckpt-5\n", "/job/checkpoint");
  EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << parsed.status();
  EXPECT_THAT(parsed.status().message(), HasSubstr("/job/checkpoint:1:"));
  parsed = ParseCheckpointState("all_model_checkpoint_paths: \"\n", "/job/checkpoint");
  EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << parsed.status();
}

// --- Names and listing ---

TEST(CheckpointNamesTest, StepOfName) {
  EXPECT_EQ(CheckpointPrefix(12), "model.ckpt-12");
  EXPECT_EQ(ShardFileName("model.ckpt-12", 0, 2), "model.ckpt-12.shard-0-of-2");
  EXPECT_EQ(IndexFileName("model.ckpt-12"), "model.ckpt-12.index");
  EXPECT_EQ(CheckpointStepOfName("model.ckpt-12"), 12);
  EXPECT_EQ(CheckpointStepOfName("model.ckpt-12.index"), 12);
  EXPECT_EQ(CheckpointStepOfName("model.ckpt-12.shard-0-of-2"), 12);
  EXPECT_EQ(CheckpointStepOfName("model.ckpt-0.index"), 0);
  EXPECT_EQ(CheckpointStepOfName("model.ckpt-x"), std::nullopt);
  EXPECT_EQ(CheckpointStepOfName("model.ckpt-007"), std::nullopt);
  EXPECT_EQ(CheckpointStepOfName("model.ckpt-+7"), std::nullopt);
  EXPECT_EQ(CheckpointStepOfName("model.ckpt--7"), std::nullopt);
  EXPECT_EQ(CheckpointStepOfName("model.ckpt-"), std::nullopt);
  EXPECT_EQ(CheckpointStepOfName("model.ckpt-.index"), std::nullopt);
  EXPECT_EQ(CheckpointStepOfName("other"), std::nullopt);
  EXPECT_EQ(CheckpointStepOfName("checkpoint"), std::nullopt);
}

TEST(CheckpointListTest, StepsNewestFirstIgnoringOtherFiles) {
  MemEnv env;
  for (const char* name :
       {"model.ckpt-100.index", "model.ckpt-20.index", "model.ckpt-5.index",
        "model.ckpt-5.shard-0-of-1", "model.ckpt-300.shard-0-of-1", "model.ckpt-400.index.tmp.12",
        "model.ckpt-007.index", "checkpoint", "events.out.tfevents.1.host"}) {
    ASSERT_TRUE(env.WriteFileAtomic(JoinPath("/job", name), "x").ok());
  }
  absl::StatusOr<std::vector<int64_t>> steps = ListCheckpointSteps(&env, "/job");
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_THAT(*steps, ElementsAre(100, 20, 5));
  steps = ListCheckpointSteps(&env, "/missing");
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_THAT(*steps, IsEmpty());
}

// Records the order files are deleted in; lists a directory backwards (so
// shard files come before the index).
class DeleteRecordingEnv : public MemEnv {
 public:
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override {
    absl::StatusOr<std::vector<std::string>> names = MemEnv::ListDir(path);
    if (names.ok()) std::reverse(names->begin(), names->end());
    return names;
  }
  absl::Status DeleteFile(const std::string& path) override {
    deleted.push_back(path);
    return MemEnv::DeleteFile(path);
  }
  std::vector<std::string> deleted;
};

// Temp files as AtomicWritableFile names them (common/env.h AtomicTempPath),
// left by a crash: those of checkpoints at or before the newest go.
TEST(CheckpointListTest, DeleteCheckpointsBeforeRemovesHiddenTempFiles) {
  DeleteRecordingEnv env;
  for (const char* name :
       {"model.ckpt-20.index", "model.ckpt-20.shard-0-of-1", ".model.ckpt-20.index.tmp.3.0",
        ".model.ckpt-30.shard-0-of-1.tmp.77.4", ".checkpoint.tmp.77.5", ".events.tmp.1.1"}) {
    ASSERT_TRUE(env.WriteFileAtomic(JoinPath("/job", name), "x").ok());
  }
  absl::StatusOr<std::vector<int64_t>> deleted = DeleteCheckpointsBefore(&env, "/job", 20, 20);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_THAT(*deleted, IsEmpty());
  EXPECT_THAT(*env.ListDir("/job"),
              UnorderedElementsAre(".events.tmp.1.1", ".model.ckpt-30.shard-0-of-1.tmp.77.4",
                                   "model.ckpt-20.index", "model.ckpt-20.shard-0-of-1"));
}

TEST(CheckpointListTest, DeleteCheckpointsBefore) {
  DeleteRecordingEnv env;
  std::vector<std::string> names = {"checkpoint",
                                    "events.out.tfevents.1.host",
                                    "model.ckpt-20.index.tmp.3",
                                    "model.ckpt-30.shard-1-of-2.tmp.77",
                                    "model.ckpt-40.index.tmp.5",
                                    "model.ckpt-40.shard-0-of-2.tmp.5"};
  for (int step : {10, 20, 30}) {
    const std::string prefix = CheckpointPrefix(step);
    for (int ps = 0; ps < 2; ++ps) names.push_back(ShardFileName(prefix, ps, 2));
    names.push_back(IndexFileName(prefix));
  }
  for (const std::string& name : names) {
    ASSERT_TRUE(env.WriteFileAtomic(JoinPath("/job", name), "x").ok());
  }
  absl::StatusOr<std::vector<int64_t>> deleted = DeleteCheckpointsBefore(&env, "/job", 20, 30);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_THAT(*deleted, ElementsAre(10));
  EXPECT_THAT(*env.ListDir("/job"),
              UnorderedElementsAre(
                  "checkpoint", "events.out.tfevents.1.host", "model.ckpt-20.index",
                  "model.ckpt-20.shard-0-of-2", "model.ckpt-20.shard-1-of-2", "model.ckpt-30.index",
                  "model.ckpt-30.shard-0-of-2", "model.ckpt-30.shard-1-of-2",
                  "model.ckpt-40.index.tmp.5", "model.ckpt-40.shard-0-of-2.tmp.5"));
  // The index goes first, so a half-deleted checkpoint is not taken for one.
  ASSERT_FALSE(env.deleted.empty());
  EXPECT_EQ(env.deleted.front(), "/job/model.ckpt-10.index");
  EXPECT_THAT(env.deleted, UnorderedElementsAre(
                               "/job/model.ckpt-10.index", "/job/model.ckpt-10.shard-0-of-2",
                               "/job/model.ckpt-10.shard-1-of-2", "/job/model.ckpt-20.index.tmp.3",
                               "/job/model.ckpt-30.shard-1-of-2.tmp.77"));

  env.deleted.clear();
  deleted = DeleteCheckpointsBefore(&env, "/job", 20, 30);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_THAT(*deleted, IsEmpty());
  EXPECT_THAT(env.deleted, IsEmpty());
}

// --- CheckpointReader ---

constexpr int64_t kNumParams = 23;
constexpr int64_t kNumState = 3;
// The same values as one shard file, and as two cut differently.
const std::vector<std::vector<int64_t>> kOneShard = {{0, 7, 16, 23}};
const std::vector<std::vector<int64_t>> kTwoShards = {{0, 4, 11}, {11, 12, 20, 23}};
int64_t StepOfChunk(int64_t chunk_begin) { return 1000 + chunk_begin; }
// Begin of the kTwoShards chunk holding i.
int64_t TwoShardsChunkBegin(int64_t i) {
  int64_t begin = 0;
  for (int64_t cut : {0, 4, 11, 12, 20}) {
    if (cut <= i) begin = cut;
  }
  return begin;
}

class CheckpointReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> one = WriteCheckpoint(&env_, "/one", values_, kOneShard);
    ASSERT_TRUE(one.ok()) << one.status();
    absl::StatusOr<std::string> two =
        WriteCheckpoint(&env_, "/two", values_, kTwoShards, StepOfChunk);
    ASSERT_TRUE(two.ok()) << two.status();
    two_index_ = *two;
    absl::StatusOr<std::unique_ptr<CheckpointReader>> reader = CheckpointReader::Open(&env_, *one);
    ASSERT_TRUE(reader.ok()) << reader.status();
    one_ = std::move(*reader);
    reader = CheckpointReader::Open(&env_, *two);
    ASSERT_TRUE(reader.ok()) << reader.status();
    two_ = std::move(*reader);
  }

  MemEnv env_;
  const FlatValues values_ = Generated(kNumParams, kNumState);
  std::string two_index_;
  std::unique_ptr<CheckpointReader> one_, two_;
};

TEST_F(CheckpointReaderTest, AnyRangeReadsTheSameFromAnyShardLayout) {
  EXPECT_EQ(one_->index().shards_size(), 1);
  EXPECT_EQ(two_->index().shards_size(), 2);
  constexpr float kUnset = -999.0f;
  for (int64_t begin = 0; begin <= kNumParams; ++begin) {
    for (int64_t end = begin; end <= kNumParams; ++end) {
      SCOPED_TRACE(absl::StrCat("[", begin, ", ", end, ")"));
      const size_t n = static_cast<size_t>(end - begin);
      std::vector<float> want(values_.params.begin() + begin, values_.params.begin() + end);
      std::vector<float> want_m(values_.slots[0].begin() + begin, values_.slots[0].begin() + end);
      std::vector<float> want_v(values_.slots[1].begin() + begin, values_.slots[1].begin() + end);
      for (CheckpointReader* reader : {one_.get(), two_.get()}) {
        std::vector<float> params(n, kUnset), m(n, kUnset), v(n, kUnset);
        absl::StatusOr<int64_t> step =
            reader->ReadRange(begin, end, params.data(), {m.data(), v.data()});
        ASSERT_TRUE(step.ok()) << step.status();
        EXPECT_EQ(params, want);
        EXPECT_EQ(m, want_m);
        EXPECT_EQ(v, want_v);
        if (begin < end) {
          EXPECT_EQ(*step, reader == one_.get() ? 42 : StepOfChunk(TwoShardsChunkBegin(begin)));
        }
      }
    }
  }
}

TEST_F(CheckpointReaderTest, FewerSlotsAndBadRanges) {
  std::vector<float> params(14), m(14), v(14, -1.0f);
  ASSERT_TRUE(two_->ReadRange(3, 17, params.data(), {m.data()}).ok());
  EXPECT_EQ(params, std::vector<float>(values_.params.begin() + 3, values_.params.begin() + 17));
  EXPECT_EQ(m, std::vector<float>(values_.slots[0].begin() + 3, values_.slots[0].begin() + 17));
  EXPECT_EQ(v, std::vector<float>(14, -1.0f));
  ASSERT_TRUE(two_->ReadRange(3, 17, params.data(), {}).ok());

  std::vector<float> big(kNumParams + 2);
  for (auto [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{-1, 3}, {5, 4}, {0, 24}}) {
    EXPECT_TRUE(absl::IsInvalidArgument(two_->ReadRange(begin, end, big.data(), {}).status()))
        << begin << ", " << end;
  }
  EXPECT_TRUE(absl::IsInvalidArgument(
      two_->ReadRange(0, 1, big.data(), {big.data(), big.data(), big.data()}).status()));
}

TEST_F(CheckpointReaderTest, ReadState) {
  for (CheckpointReader* reader : {one_.get(), two_.get()}) {
    std::vector<float> state(kNumState, -1.0f);
    ASSERT_TRUE(reader->ReadState(state.data()).ok());
    EXPECT_EQ(state, values_.state);
  }
}

TEST_F(CheckpointReaderTest, DamagedShardIsDataLossWhenARangeTouchesIt) {
  const std::string shard1 = "/two/model.ckpt-500.shard-1-of-2";
  std::string contents = *env_.ReadFile(shard1);
  ASSERT_TRUE(env_.WriteFileAtomic(shard1, FlipBit(contents, contents.size() * 4)).ok());
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader =
      CheckpointReader::Open(&env_, two_index_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<float> params(kNumParams);
  // Shard files are read when a range first touches them.
  EXPECT_TRUE((*reader)->ReadRange(0, 11, params.data(), {}).ok());
  std::vector<float> state(kNumState);
  EXPECT_TRUE((*reader)->ReadState(state.data()).ok());
  ExpectDataLossNaming((*reader)->ReadRange(5, 15, params.data(), {}).status(), shard1);
  ExpectDataLossNaming((*reader)->ReadRange(20, 21, params.data(), {}).status(), shard1);

  // A whole file, but not the one the index names.
  ShardValues other = MakeShard(values_, 1, 2, {11, 23});
  other.model = "other_model";
  absl::StatusOr<WrittenShard> written = WriteCheckpointShard(&env_, shard1, other);
  ASSERT_TRUE(written.ok()) << written.status();
  CheckpointIndex index = (*reader)->index();
  index.mutable_shards(1)->set_size_bytes(written->size_bytes);
  index.mutable_shards(1)->set_crc32c(written->crc32c);
  ASSERT_TRUE(WriteCheckpointIndex(&env_, two_index_, index).ok());
  reader = CheckpointReader::Open(&env_, two_index_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ExpectDataLossNaming((*reader)->ReadRange(12, 13, params.data(), {}).status(), shard1);

  ASSERT_TRUE(env_.DeleteFile(shard1).ok());
  reader = CheckpointReader::Open(&env_, two_index_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE(absl::IsNotFound((*reader)->ReadRange(12, 13, params.data(), {}).status()));
}

TEST(CheckpointReaderOpenTest, FindsShardsBesideTheIndexInAnyDirectory) {
  const FlatValues values = Generated(kNumParams, kNumState);
  for (const char* dir : {"/", "/a/b"}) {
    SCOPED_TRACE(dir);
    MemEnv env;
    absl::StatusOr<std::string> index_path = WriteCheckpoint(&env, dir, values, kTwoShards);
    ASSERT_TRUE(index_path.ok()) << index_path.status();
    absl::StatusOr<std::unique_ptr<CheckpointReader>> reader =
        CheckpointReader::Open(&env, *index_path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    std::vector<float> params(kNumParams);
    absl::Status s = (*reader)->ReadRange(0, kNumParams, params.data(), {}).status();
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(params, values.params);
  }
}

TEST(CheckpointFilesystemTest, RoundTripOnDisk) {
  Env* env = Env::Default();
  const std::string dir = testing_util::TempDirRemovedAtExit("checkpoint_test");
  struct RemoveAll {
    ~RemoveAll() { std::filesystem::remove_all(dir); }
    std::string dir;
  } cleanup{dir};  // also when an assertion fails
  ASSERT_TRUE(env->CreateDirs(dir).ok());
  const FlatValues values = Generated(kNumParams, kNumState);
  absl::StatusOr<std::string> index_path = WriteCheckpoint(env, dir, values, kTwoShards);
  ASSERT_TRUE(index_path.ok()) << index_path.status();
  EXPECT_THAT(*env->ListDir(dir),
              UnorderedElementsAre("model.ckpt-500.index", "model.ckpt-500.shard-0-of-2",
                                   "model.ckpt-500.shard-1-of-2"));
  EXPECT_THAT(*ListCheckpointSteps(env, dir), ElementsAre(500));
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader =
      CheckpointReader::Open(env, *index_path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<float> params(kNumParams), m(kNumParams), v(kNumParams), state(kNumState);
  ASSERT_TRUE((*reader)->ReadRange(0, kNumParams, params.data(), {m.data(), v.data()}).ok());
  ASSERT_TRUE((*reader)->ReadState(state.data()).ok());
  EXPECT_EQ(params, values.params);
  EXPECT_EQ(m, values.slots[0]);
  EXPECT_EQ(v, values.slots[1]);
  EXPECT_EQ(state, values.state);
  absl::StatusOr<std::string> report = InspectCheckpoint(env, *index_path);
  EXPECT_TRUE(report.ok()) << report.status();
}

// --- Inspection (pstrain-ckpt) ---

CheckpointVariable Variable(const std::string& name, std::vector<int64_t> shape, bool trainable,
                            int64_t offset) {
  CheckpointVariable v;
  v.set_name(name);
  int64_t size = 1;
  for (int64_t d : shape) {
    v.add_shape(d);
    size *= d;
  }
  v.set_trainable(trainable);
  v.set_offset(offset);
  v.set_size(size);
  return v;
}

// The report's line for variable `name`.
std::string LineOf(const std::string& report, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(report, '\n')) {
    if (absl::StartsWith(line, absl::StrCat("  ", name, " "))) return std::string(line);
  }
  return "";
}

class InspectCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // kernel [2, 3] at 0 (norm 5), bias [2] at 6 (norm 1); [8, 10) lies in no
    // variable, and the last shard holds nothing.
    values_.params = {3, 0, 0, 0, 0, -4, 0.6f, -0.8f, 7, 7};
    values_.slots.resize(2);
    for (float p : values_.params) {
      values_.slots[0].push_back(0.5f * p);
      values_.slots[1].push_back(0.01f * std::abs(p));
    }
    values_.state = {6, 8};
    absl::StatusOr<std::string> index = WriteCheckpoint(
        &env_, "/job", values_, {{0, 2, 5}, {5, 8}, {8, 10}, {10}}, ConstantStep,
        {Variable("dense/kernel", {2, 3}, true, 0), Variable("dense/bias", {2}, true, 6),
         Variable("bn/moving_mean", {2}, false, 0)});
    ASSERT_TRUE(index.ok()) << index.status();
    ASSERT_EQ(*index, kIndexPath);
  }

  MemEnv env_;
  FlatValues values_;
};

TEST_F(InspectCheckpointTest, ReportsNormsAndChecksums) {
  absl::StatusOr<std::string> report = InspectCheckpoint(&env_, kIndexPath);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(*report, HasSubstr("checkpoint: /job/model.ckpt-500\n"));
  EXPECT_THAT(*report, HasSubstr("global step: 500\n"));
  EXPECT_THAT(*report, HasSubstr("model: test_model\n"));
  EXPECT_THAT(*report, HasSubstr("optimizer: adam (slots: m, v)\n"));
  EXPECT_THAT(*report, HasSubstr("shards: 4 (written by 4 ps)\n"));
  EXPECT_THAT(*report, HasSubstr("written: 2023-11-14 22:13:20 UTC\n"));
  const std::string kernel = LineOf(*report, "dense/kernel");
  EXPECT_THAT(kernel, HasSubstr("[2, 3]"));
  EXPECT_THAT(kernel, HasSubstr("norm 5  min -4  max 3  m 2.5 v 0.05"));
  const std::string bias = LineOf(*report, "dense/bias");
  EXPECT_THAT(bias, HasSubstr("[2]"));
  EXPECT_THAT(bias, HasSubstr("norm 1  min -0.8  max 0.6  m 0.5 v 0.01"));
  const std::string state = LineOf(*report, "bn/moving_mean");
  EXPECT_THAT(state, HasSubstr("(state)  norm 10  min 6  max 8"));
  EXPECT_THAT(*report, HasSubstr("checksums: 4 shard files OK ("));
}

TEST_F(InspectCheckpointTest, DamagedShardIsDataLossNamingIt) {
  // Every shard file is checked, including [8, 10) that no variable reads and
  // the last, which holds no values at all.
  for (int ps = 0; ps < 4; ++ps) {
    const std::string path = JoinPath("/job", ShardFileName(CheckpointPrefix(500), ps, 4));
    SCOPED_TRACE(path);
    const std::string contents = *env_.ReadFile(path);
    ASSERT_TRUE(env_.WriteFileAtomic(path, FlipBit(contents, contents.size() * 8 - 3)).ok());
    ExpectDataLossNaming(InspectCheckpoint(&env_, kIndexPath).status(), path);
    ASSERT_TRUE(env_.WriteFileAtomic(path, contents).ok());
    ASSERT_TRUE(InspectCheckpoint(&env_, kIndexPath).ok());
  }
  const std::string last = JoinPath("/job", ShardFileName(CheckpointPrefix(500), 3, 4));
  ASSERT_TRUE(env_.DeleteFile(last).ok());
  absl::Status s = InspectCheckpoint(&env_, kIndexPath).status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr(last));
}

TEST_F(InspectCheckpointTest, VariableOutsideTheValuesIsDataLoss) {
  absl::StatusOr<CheckpointIndex> index = ReadCheckpointIndex(&env_, kIndexPath);
  ASSERT_TRUE(index.ok()) << index.status();
  index->mutable_variables(1)->set_offset(9);  // [9, 11) of 10
  ASSERT_TRUE(WriteCheckpointIndex(&env_, kIndexPath, *index).ok());
  ExpectDataLossNaming(InspectCheckpoint(&env_, kIndexPath).status(), kIndexPath);
  index->mutable_variables(1)->set_offset(6);
  index->mutable_variables(1)->add_shape(2);  // [2, 2] but size 2
  ASSERT_TRUE(WriteCheckpointIndex(&env_, kIndexPath, *index).ok());
  ExpectDataLossNaming(InspectCheckpoint(&env_, kIndexPath).status(), kIndexPath);
}

TEST(CheckpointIndexPathsTest, JobDirOrPrefix) {
  MemEnv env;
  for (const char* name : {"model.ckpt-100.index", "model.ckpt-200.index", "checkpoint"}) {
    ASSERT_TRUE(env.WriteFileAtomic(JoinPath("/job", name), "x").ok());
  }
  ASSERT_TRUE(env.WriteFileAtomic("/empty/checkpoint", "x").ok());
  using Paths = std::vector<std::string>;
  auto paths = [&env](const std::string& arg, bool all) {
    absl::StatusOr<Paths> p = CheckpointIndexPaths(&env, arg, all);
    return p.ok() ? *p : Paths{p.status().ToString()};
  };
  EXPECT_EQ(paths("/job", false), Paths{"/job/model.ckpt-200.index"});
  EXPECT_EQ(paths("/job/", false), Paths{"/job/model.ckpt-200.index"});
  EXPECT_EQ(paths("/job", true), (Paths{"/job/model.ckpt-200.index", "/job/model.ckpt-100.index"}));
  EXPECT_EQ(paths("/job/model.ckpt-100", true), Paths{"/job/model.ckpt-100.index"});
  EXPECT_EQ(paths("/job/model.ckpt-100.index", false), Paths{"/job/model.ckpt-100.index"});
  EXPECT_TRUE(absl::IsNotFound(CheckpointIndexPaths(&env, "/job/model.ckpt-300", false).status()));
  EXPECT_TRUE(absl::IsNotFound(CheckpointIndexPaths(&env, "/nowhere", false).status()));
  absl::Status s = CheckpointIndexPaths(&env, "/empty", false).status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("/empty"));
}

}  // namespace
}  // namespace pstrain
