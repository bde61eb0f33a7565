#ifndef PSTRAIN_PS_PROTOCOL_PS_STATUS_H_
#define PSTRAIN_PS_PROTOCOL_PS_STATUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace pstrain {

// What one ps task reports about itself (its Status): plain values, the same
// whether the ps is reached over gRPC or in this process.
struct PsStatus {
  int ps_task = 0;  // the task's index in the cluster's ps job
  std::string model;
  bool initialized = false;     // every chunk of the task is
  int64_t global_step = 0;      // the lowest step among the task's chunks (sync: and rows)
  int64_t max_global_step = 0;  // the highest
  int64_t begin = 0;            // the task's range of the flat vector
  int64_t end = 0;
  int64_t applied_updates = 0;
  int64_t stale_pushes = 0;
  bool shutting_down = false;
  bool job_done = false;    // some chunk reached train_steps, or shutting down
  bool preempting = false;  // the task got SIGTERM: save now, then end the job
  int64_t departures = 0;   // replicas that said they are stopping (Leave), ever
  int inputs_ended = 0;     // replicas whose input ended and that have not pushed since
  // Totals of the progress the replicas reported with their pushes.
  double loss_sum = 0;
  int64_t loss_batches = 0;
  int64_t examples = 0;
  int64_t unix_micros = 0;  // the task's clock when it answered
  // A replicated ps (issue 55): the other tasks whose chunks and rows this
  // task serves after a failover, each with its epoch, so a client finds
  // where they went.
  std::vector<int> serves;
  std::vector<int64_t> serves_epochs;
  // The task that answered: ps_task itself, or (a status of ps_task's chunks
  // after a failover) the task that serves them now.
  int served_by = 0;
  // The epoch of ps_task's chunks where they are served (1 before any
  // failover; 0: not known).
  int64_t epoch = 0;
  // A replicated ps: backups its streams dropped, ever (their answers wait
  // until the chief confirms them), and the task of each drop (one entry
  // per drop, sorted: the chief tells which task a new drop named).
  int64_t backup_drops = 0;
  std::vector<int> dropped_backups;
};

// The lowest step among the tasks (each reports its lowest chunk step): where
// a replica that starts now reads its batches from.
inline int64_t LowestStep(const std::vector<PsStatus>& statuses) {
  int64_t lowest = statuses.empty() ? 0 : statuses[0].global_step;
  for (const PsStatus& s : statuses) lowest = lowest < s.global_step ? lowest : s.global_step;
  return lowest;
}

// Every one of `replicas` training replicas said its input ended (and none
// pushed since), on every task: a job with num_epochs is done.
inline bool AllInputsEnded(const std::vector<PsStatus>& statuses, int replicas) {
  for (const PsStatus& s : statuses) {
    if (s.inputs_ended < replicas) return false;
  }
  return !statuses.empty();
}

// A replica whose input ended sees it lost on some task (restarted or
// rolled back): a task counts no ended input, or fewer than another.
inline bool InputEndLost(const std::vector<PsStatus>& statuses) {
  int most = 0;
  for (const PsStatus& s : statuses) most = s.inputs_ended > most ? s.inputs_ended : most;
  for (const PsStatus& s : statuses) {
    if (s.inputs_ended == 0 || s.inputs_ended < most) return true;
  }
  return false;
}

// What one ps task's Save wrote: its checkpoint shard file, for the index.
struct ShardSaved {
  std::string file;   // the file's name, without directory
  int64_t begin = 0;  // the task's range
  int64_t end = 0;
  int64_t num_state = 0;
  uint64_t size_bytes = 0;
  uint32_t crc32c = 0;
  int64_t min_step = 0;  // lowest and highest step among the saved chunks
  int64_t max_step = 0;
  std::string optimizer;
  std::vector<std::string> slot_names;
  absl::Duration snapshot_time;  // copying under the chunks' locks, waits included
  absl::Duration write_time;     // writing the file
  absl::Duration longest_copy;   // the longest one chunk was locked for its copy
  // The rows of the embedding tables (empty file name for a model without).
  std::string rows_file;
  uint64_t rows_size_bytes = 0;
  uint32_t rows_crc32c = 0;
  std::vector<int64_t> table_rows;        // per table
  std::vector<double> table_sum_squares;  // per table
  int64_t rows_step = 0;                  // the step the rows were copied at
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_PROTOCOL_PS_STATUS_H_
