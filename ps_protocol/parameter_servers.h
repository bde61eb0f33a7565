#ifndef PSTRAIN_PS_PROTOCOL_PARAMETER_SERVERS_H_
#define PSTRAIN_PS_PROTOCOL_PARAMETER_SERVERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/termination.h"
#include "ps_protocol/parameter_client.h"
#include "ps_protocol/ps_status.h"

namespace pstrain {

// A new generation for an Initialize or Restore broadcast (every chunk gets
// the same): the time in microseconds, unique across the chief's restarts.
inline int64_t NewGeneration() { return absl::ToUnixMicros(absl::Now()); }

// How patient a handle on the parameter servers is: how long a ps that does
// not answer (UNAVAILABLE) is retried (unset: the job's ps_retry_secs), and
// each call's deadline (unset: one that fits the job's update mode).
struct CallPatience {
  std::optional<absl::Duration> retry_budget;
  std::optional<absl::Duration> deadline;
};

// Every ps task of a job, as the chief (and a worker, to wait and leave)
// addresses them all at once: the admin side of the protocol, next to
// ParameterClient's training data path. Answers are plain values (PsStatus,
// ShardSaved), so the logic that uses them knows nothing of gRPC. Two
// implementations: over gRPC (grpc_parameter_servers.h) and over PsTasks in
// this process (in_process_parameter_servers.h), which tests use to drive
// the chief's logic without a network.
//
// Every call is one broadcast: it succeeds only if every ps task answers;
// the error names the task that did not and why. Thread-compatible: one
// caller at a time (the chief gives each of its threads its own instance).
class ParameterServers {
 public:
  virtual ~ParameterServers() = default;

  // Number of ps tasks.
  virtual int size() const = 0;

  // Waits until every ps task answers (and, if `initialized`, has been
  // initialized), up to `timeout`, logging who is still missing now and
  // then. Cancelled if `stop` (may be null) is requested meanwhile.
  virtual absl::Status WaitReady(absl::Duration timeout, bool initialized,
                                 const TerminationNotice* stop) = 0;

  // Every ps task's status, in task order.
  virtual absl::StatusOr<std::vector<PsStatus>> Statuses() = 0;

  // Sends every chunk its part of `params` (the model's num_params) and chunk
  // 0 the `state`, at `global_step`.
  virtual absl::Status Initialize(const std::string& model, const float* params, const float* state,
                                  int64_t global_step) = 0;

  // Every ps task writes its range to model.ckpt-<step>.shard-<i>-of-<P> in
  // its job dir; the results in task order. A sync task waits up to `wait`
  // for its chunks to reach `step`; `global_step` is recorded in the files.
  virtual absl::StatusOr<std::vector<ShardSaved>> Save(int64_t step, int64_t global_step,
                                                       absl::Duration wait) = 0;

  // Every ps task loads its range from the checkpoint model.ckpt-<step> in
  // its job dir; returns the restored global step. DataLoss or NotFound for a
  // damaged or missing checkpoint.
  virtual absl::StatusOr<int64_t> Restore(const std::string& model, int64_t step) = 0;

  // Tells every ps task the job is over.
  virtual absl::Status Shutdown(const std::string& reason) = 0;

  // Tells every ps task that replica `replica` is leaving the job, stopping
  // or (`input_ended`) because its input has no more examples; a task that
  // does not answer is retried for at most `retry_budget`.
  virtual absl::Status Leave(int replica, const std::string& reason, bool input_ended,
                             absl::Duration retry_budget) = 0;

  // The current parameters and state of every chunk, read (not a training
  // pull): for evaluation and histograms. The view stays valid until the
  // next Read.
  virtual absl::StatusOr<ParameterView> Read() = 0;

  // A replicated job (issue 55). One Status call to every task at once,
  // each within `deadline` and not retried: each task's own status, or why
  // it did not answer. The chief's failover watch; `confirm_drops[i]` (if
  // given) confirms that many of task i's dropped backups
  // (PsTask::ConfirmDrops).
  virtual std::vector<absl::StatusOr<PsStatus>> Probe(
      absl::Duration deadline, const std::vector<int64_t>& confirm_drops = {}) = 0;
  // Task `task` serves task `owner`'s chunks and rows from `epoch` on
  // (PsTask::Promote), their updates going to `backups`; within `deadline`.
  virtual absl::Status Promote(int task, int owner, int64_t epoch, const std::vector<int>& backups,
                               absl::Duration deadline) = 0;
  // Task `task`, failed over at `epoch` while it did not answer, serves its
  // chunks and rows no more (PsTask::Fence); within `deadline`.
  virtual absl::Status Fence(int task, int64_t epoch, absl::Duration deadline) = 0;
  // A rejoin: task `server`, which serves task `owner`'s chunks and rows,
  // sends task `task` a fresh copy of them (PsTask::AddBackup); OK once
  // `task` holds them and has caught up, within `deadline`.
  virtual absl::Status AddBackup(int server, int owner, int task, absl::Duration deadline) = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_PROTOCOL_PARAMETER_SERVERS_H_
