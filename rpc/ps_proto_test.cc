#include "rpc/ps_proto.h"

#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

// Every field of `m` holds a value other than its default: a conversion that
// forgot one leaves it unset.
void ExpectEveryFieldSet(const google::protobuf::Message& m) {
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  const google::protobuf::Reflection* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    const bool set = f->is_repeated() ? r->FieldSize(m, f) > 0 : r->HasField(m, f);
    EXPECT_TRUE(set) << d->name() << "." << f->name() << " is not carried";
  }
}

TEST(PsProtoTest, StatusRoundTripsEveryField) {
  PsStatus s;
  s.ps_task = 3;
  s.model = "mnist_cnn";
  s.initialized = true;
  s.global_step = 10;
  s.max_global_step = 12;
  s.begin = 100;
  s.end = 200;
  s.applied_updates = 7;
  s.stale_pushes = 2;
  s.shutting_down = true;
  s.job_done = true;
  s.preempting = true;
  s.departures = 1;
  s.inputs_ended = 2;
  s.loss_sum = 1.5;
  s.loss_batches = 4;
  s.examples = 400;
  s.unix_micros = 123456789;
  s.serves = {0, 2};
  s.serves_epochs = {3, 2};
  s.served_by = 1;
  s.epoch = 4;
  s.backup_drops = 2;
  s.dropped_backups = {0, 2};
  StatusResponse r;
  ToProto(s, &r);
  ExpectEveryFieldSet(r);
  const PsStatus back = FromProto(r);
  EXPECT_EQ(back.ps_task, s.ps_task);
  EXPECT_EQ(back.model, s.model);
  EXPECT_EQ(back.initialized, s.initialized);
  EXPECT_EQ(back.global_step, s.global_step);
  EXPECT_EQ(back.max_global_step, s.max_global_step);
  EXPECT_EQ(back.begin, s.begin);
  EXPECT_EQ(back.end, s.end);
  EXPECT_EQ(back.applied_updates, s.applied_updates);
  EXPECT_EQ(back.stale_pushes, s.stale_pushes);
  EXPECT_EQ(back.shutting_down, s.shutting_down);
  EXPECT_EQ(back.job_done, s.job_done);
  EXPECT_EQ(back.preempting, s.preempting);
  EXPECT_EQ(back.departures, s.departures);
  EXPECT_EQ(back.served_by, s.served_by);
  EXPECT_EQ(back.epoch, s.epoch);
  EXPECT_EQ(back.backup_drops, s.backup_drops);
  EXPECT_EQ(back.dropped_backups, s.dropped_backups);
  EXPECT_EQ(back.inputs_ended, s.inputs_ended);
  EXPECT_EQ(back.loss_sum, s.loss_sum);
  EXPECT_EQ(back.loss_batches, s.loss_batches);
  EXPECT_EQ(back.examples, s.examples);
  EXPECT_EQ(back.unix_micros, s.unix_micros);
  EXPECT_EQ(back.serves, s.serves);
  EXPECT_EQ(back.serves_epochs, s.serves_epochs);
}

TEST(PsProtoTest, SavedShardRoundTripsEveryField) {
  ShardSaved s;
  s.file = "model.ckpt-5.shard-0-of-2";
  s.begin = 10;
  s.end = 50;
  s.num_state = 2;
  s.size_bytes = 4096;
  s.crc32c = 0xdeadbeef;
  s.min_step = 4;
  s.max_step = 5;
  s.optimizer = "adam";
  s.slot_names = {"m", "v"};
  s.snapshot_time = absl::Microseconds(30);
  s.write_time = absl::Microseconds(40);
  s.longest_copy = absl::Microseconds(10);
  s.rows_file = "model.ckpt-5.rows-0-of-2";
  s.rows_size_bytes = 300;
  s.rows_crc32c = 77;
  s.table_rows = {4, 5};
  s.table_sum_squares = {1.5, 2.5};
  s.rows_step = 5;
  SaveResponse r;
  ToProto(s, &r);
  ExpectEveryFieldSet(r);
  const ShardSaved back = FromProto(r);
  EXPECT_EQ(back.file, s.file);
  EXPECT_EQ(back.begin, s.begin);
  EXPECT_EQ(back.end, s.end);
  EXPECT_EQ(back.num_state, s.num_state);
  EXPECT_EQ(back.size_bytes, s.size_bytes);
  EXPECT_EQ(back.crc32c, s.crc32c);
  EXPECT_EQ(back.min_step, s.min_step);
  EXPECT_EQ(back.max_step, s.max_step);
  EXPECT_EQ(back.optimizer, s.optimizer);
  EXPECT_EQ(back.slot_names, s.slot_names);
  EXPECT_EQ(back.snapshot_time, s.snapshot_time);
  EXPECT_EQ(back.write_time, s.write_time);
  EXPECT_EQ(back.longest_copy, s.longest_copy);
  EXPECT_EQ(back.rows_file, s.rows_file);
  EXPECT_EQ(back.rows_size_bytes, s.rows_size_bytes);
  EXPECT_EQ(back.rows_crc32c, s.rows_crc32c);
  EXPECT_EQ(back.table_rows, s.table_rows);
  EXPECT_EQ(back.table_sum_squares, s.table_sum_squares);
  EXPECT_EQ(back.rows_step, s.rows_step);
}

}  // namespace
}  // namespace pstrain
