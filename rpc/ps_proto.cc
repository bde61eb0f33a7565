#include "rpc/ps_proto.h"

#include <string>

namespace pstrain {

void ToProto(const PsStatus& s, StatusResponse* r) {
  r->set_ps_task(s.ps_task);
  r->set_model(s.model);
  r->set_initialized(s.initialized);
  r->set_global_step(s.global_step);
  r->set_max_global_step(s.max_global_step);
  r->set_begin(s.begin);
  r->set_end(s.end);
  r->set_applied_updates(s.applied_updates);
  r->set_stale_pushes(s.stale_pushes);
  r->set_shutting_down(s.shutting_down);
  r->set_job_done(s.job_done);
  r->set_preempting(s.preempting);
  r->set_departures(s.departures);
  r->set_inputs_ended(s.inputs_ended);
  r->set_loss_sum(s.loss_sum);
  r->set_loss_batches(s.loss_batches);
  r->set_examples(s.examples);
  r->set_unix_micros(s.unix_micros);
  for (int owner : s.serves) r->add_serves(owner);
  for (int64_t epoch : s.serves_epochs) r->add_serves_epochs(epoch);
  r->set_served_by(s.served_by);
  r->set_epoch(s.epoch);
  r->set_backup_drops(s.backup_drops);
  for (int task : s.dropped_backups) r->add_dropped_backups(task);
}

PsStatus FromProto(const StatusResponse& r) {
  PsStatus s;
  s.ps_task = r.ps_task();
  s.model = r.model();
  s.initialized = r.initialized();
  s.global_step = r.global_step();
  s.max_global_step = r.max_global_step();
  s.begin = r.begin();
  s.end = r.end();
  s.applied_updates = r.applied_updates();
  s.stale_pushes = r.stale_pushes();
  s.shutting_down = r.shutting_down();
  s.job_done = r.job_done();
  s.preempting = r.preempting();
  s.departures = r.departures();
  s.inputs_ended = r.inputs_ended();
  s.loss_sum = r.loss_sum();
  s.loss_batches = r.loss_batches();
  s.examples = r.examples();
  s.unix_micros = r.unix_micros();
  s.serves.assign(r.serves().begin(), r.serves().end());
  s.serves_epochs.assign(r.serves_epochs().begin(), r.serves_epochs().end());
  s.served_by = r.served_by();
  s.epoch = r.epoch();
  s.backup_drops = r.backup_drops();
  s.dropped_backups.assign(r.dropped_backups().begin(), r.dropped_backups().end());
  return s;
}

void ToProto(const ShardSaved& s, SaveResponse* r) {
  r->set_file(s.file);
  r->set_begin(s.begin);
  r->set_end(s.end);
  r->set_num_state(s.num_state);
  r->set_size_bytes(s.size_bytes);
  r->set_crc32c(s.crc32c);
  r->set_min_step(s.min_step);
  r->set_max_step(s.max_step);
  for (const std::string& name : s.slot_names) r->add_slot_names(name);
  r->set_optimizer(s.optimizer);
  r->set_snapshot_micros(absl::ToInt64Microseconds(s.snapshot_time));
  r->set_write_micros(absl::ToInt64Microseconds(s.write_time));
  r->set_longest_copy_micros(absl::ToInt64Microseconds(s.longest_copy));
  r->set_rows_file(s.rows_file);
  r->set_rows_size_bytes(s.rows_size_bytes);
  r->set_rows_crc32c(s.rows_crc32c);
  for (int64_t n : s.table_rows) r->add_table_rows(n);
  for (double v : s.table_sum_squares) r->add_table_sum_squares(v);
  r->set_rows_step(s.rows_step);
}

ShardSaved FromProto(const SaveResponse& r) {
  ShardSaved s;
  s.file = r.file();
  s.begin = r.begin();
  s.end = r.end();
  s.num_state = r.num_state();
  s.size_bytes = r.size_bytes();
  s.crc32c = r.crc32c();
  s.min_step = r.min_step();
  s.max_step = r.max_step();
  s.optimizer = r.optimizer();
  s.slot_names.assign(r.slot_names().begin(), r.slot_names().end());
  s.snapshot_time = absl::Microseconds(r.snapshot_micros());
  s.write_time = absl::Microseconds(r.write_micros());
  s.longest_copy = absl::Microseconds(r.longest_copy_micros());
  s.rows_file = r.rows_file();
  s.rows_size_bytes = r.rows_size_bytes();
  s.rows_crc32c = r.rows_crc32c();
  s.table_rows.assign(r.table_rows().begin(), r.table_rows().end());
  s.table_sum_squares.assign(r.table_sum_squares().begin(), r.table_sum_squares().end());
  s.rows_step = r.rows_step();
  return s;
}

}  // namespace pstrain
