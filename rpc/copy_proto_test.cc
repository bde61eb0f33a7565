// A rejoin's copies on the wire (issue 55): every field of a chunk's copy
// and of a rows piece comes back as it went; bytes that do not fit are
// refused, naming what.
#include "rpc/copy_proto.h"

#include "gtest/gtest.h"
#include "ps/ps_task.h"

namespace pstrain {
namespace {

BarrierProgress SomeProgress() {
  BarrierProgress p;
  p.step = 17;
  p.generation = 99;
  p.sequence = 41;
  p.applied = 40;
  p.last_async_step = {3, -1, 16};
  p.last_sync_step = {16, 16, 15};
  return p;
}

void ExpectSameProgress(const BarrierProgress& a, const BarrierProgress& b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.generation, b.generation);
  EXPECT_EQ(a.sequence, b.sequence);
  EXPECT_EQ(a.applied, b.applied);
  EXPECT_EQ(a.last_async_step, b.last_async_step);
  EXPECT_EQ(a.last_sync_step, b.last_sync_step);
}

TEST(CopyProtoTest, AChunkCopyGoesAndComesBack) {
  ParameterShard::BackupCopy copy;
  copy.values.step = 17;
  copy.values.optimizer_step = 12;
  copy.values.params = {1.5f, -2.0f, 3.25f};
  copy.values.state = {0.5f};
  copy.values.slots = {{0.1f, 0.2f, 0.3f}, {1.0f, 2.0f, 4.0f}};
  copy.progress = SomeProgress();
  copy.prev_params = {1.0f, -1.0f, 3.0f};
  copy.prev_state = {0.25f};
  copy.prev_step = 16;
  InstallCopyRequest r;
  ToProto(copy, &r);
  ParameterShard::BackupCopy back;
  ASSERT_TRUE(FromProto(r, &back).ok());
  EXPECT_EQ(back.values.step, 17);
  EXPECT_EQ(back.values.optimizer_step, 12);
  EXPECT_EQ(back.values.params, copy.values.params);
  EXPECT_EQ(back.values.state, copy.values.state);
  EXPECT_EQ(back.values.slots, copy.values.slots);
  ExpectSameProgress(back.progress, copy.progress);
  EXPECT_EQ(back.prev_params, copy.prev_params);
  EXPECT_EQ(back.prev_state, copy.prev_state);
  EXPECT_EQ(back.prev_step, 16);

  InstallCopyRequest cut = r;
  cut.mutable_params()->pop_back();
  EXPECT_TRUE(absl::IsInvalidArgument(FromProto(cut, &back)));
  InstallCopyRequest short_slot = r;
  short_slot.mutable_slots(1)->resize(8);
  absl::Status s = FromProto(short_slot, &back);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
}

SparseShard::BackupCopy SomeRows() {
  SparseShard::BackupCopy copy;
  for (int64_t id = 0; id < 20; ++id) {
    const int table = id % 3 == 0 ? 1 : 0;
    const int dim = table == 0 ? 2 : 4;
    std::vector<float> w(dim), slots(dim);
    for (int d = 0; d < dim; ++d) {
      w[d] = 0.5f * id + d;
      slots[d] = 0.01f * id - d;
    }
    copy.rows.push_back({table, id * 1000 + 7, w, slots, id + 1, 2 * id + 1});
  }
  copy.pending = {{0, 5, 2, 9}, {1, 123456789012, 1, 3}};
  copy.progress = SomeProgress();
  copy.last_evict = 11;
  copy.undo_step = 16;
  copy.undo_ids = {{7, 1007}, {3007}};
  copy.undo_weights = {{1, 2, 3, 4}, {5, 6, 7, 8}};
  return copy;
}

TEST(CopyProtoTest, RowsGoInPiecesAndComeBackWhole) {
  const SparseShard::BackupCopy copy = SomeRows();
  const std::vector<SparseShard::BackupCopy> pieces = RowsCopyPieces(copy, 6);
  ASSERT_EQ(pieces.size(), 4u);  // 6, 6, 6 and 2 rows
  EXPECT_EQ(pieces[0].rows.size(), 6u);
  EXPECT_EQ(pieces[3].rows.size(), 2u);
  EXPECT_TRUE(pieces[3].pending.empty());
  SparseShard::BackupCopy whole;
  for (size_t k = 0; k < pieces.size(); ++k) {
    InstallCopyRequest r;
    ToProto(pieces[k], &r);
    SparseShard::BackupCopy back;
    ASSERT_TRUE(FromProto(r, &back).ok()) << k;
    if (k == 0) {
      whole = back;
    } else {
      EXPECT_TRUE(back.pending.empty());
      whole.rows.insert(whole.rows.end(), back.rows.begin(), back.rows.end());
    }
  }
  // Grouped by table on the wire: compare as sets.
  auto key = [](const SparseShard::BackupCopy::Row& r) {
    return std::make_tuple(r.table, r.id, r.weights, r.slots, r.last_step, r.count);
  };
  std::vector<decltype(key(copy.rows[0]))> want, got;
  for (const auto& r : copy.rows) want.push_back(key(r));
  for (const auto& r : whole.rows) got.push_back(key(r));
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
  ASSERT_EQ(whole.pending.size(), 2u);
  EXPECT_EQ(whole.pending[1].id, 123456789012);
  EXPECT_EQ(whole.pending[1].count, 1);
  EXPECT_EQ(whole.pending[1].last_step, 3);
  ExpectSameProgress(whole.progress, copy.progress);
  EXPECT_EQ(whole.last_evict, 11);
  EXPECT_EQ(whole.undo_step, 16);
  EXPECT_EQ(whole.undo_ids, copy.undo_ids);
  EXPECT_EQ(whole.undo_weights, copy.undo_weights);
}

TEST(CopyProtoTest, RowsThatDoNotFitTheirIdsAreRefused) {
  InstallCopyRequest r;
  ToProto(SomeRows(), &r);
  SparseShard::BackupCopy back;
  InstallCopyRequest weights = r;
  weights.mutable_rows(0)->mutable_weights()->resize(12);  // 3 floats for 7 rows
  EXPECT_TRUE(absl::IsInvalidArgument(FromProto(weights, &back)));
  InstallCopyRequest counts = r;
  counts.mutable_rows(1)->mutable_counts()->RemoveLast();
  EXPECT_TRUE(absl::IsInvalidArgument(FromProto(counts, &back)));
  InstallCopyRequest ids = r;
  ids.mutable_pending(0)->mutable_ids()->append("abc");
  EXPECT_TRUE(absl::IsInvalidArgument(FromProto(ids, &back)));
  InstallCopyRequest undo = r;
  undo.mutable_undo()->SwapElements(0, 1);
  EXPECT_TRUE(absl::IsInvalidArgument(FromProto(undo, &back)));
}

}  // namespace
}  // namespace pstrain
