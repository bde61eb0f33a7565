// A training job's traces (--trace_steps): where each task writes its
// Chrome trace, and the chief's merge of them into one view of the cluster
// on one clock.
//
// Every task writes <job_dir>/plugins/profile/steps_<A>_<B>/<job>-<index>.trace.json
// (Perfetto, chrome://tracing) and, for TensorBoard's Profile tab,
// <host>.xplane.pb and <host>.trace.json.gz beside it (common/xplane.h; host
// = ProfileHostName()); the chief, at the end of the job, writes
// cluster.trace.json beside them.
// Clocks: every client of the parameter servers (chief, workers) records in
// its trace's otherData "ps_clock_offsets_us", ps task i's clock minus its
// own (measured from Status round trips), so every process can be shifted
// onto ps 0's clock: a client by -offsets[0], ps i by the chief's
// offsets[i] - offsets[0].
#ifndef PSTRAIN_COMMON_CLUSTER_TRACE_H_
#define PSTRAIN_COMMON_CLUSTER_TRACE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/trace.h"

namespace pstrain {

// A task of the job as its trace file names it (the job config's TaskSpec,
// without the config: this file sits below it).
struct TracedTask {
  std::string job_name;  // "chief", "worker" or "ps"
  int task_index = 0;
};

// "steps_<A>_<B>": the run a trace window is filed under.
std::string TraceRunName(const TraceSteps& steps);
// "<job>-<index>.trace.json".
std::string TraceFileName(const TracedTask& task);
// The host name of a task's profile plugin files: "<job>-<index>" ("chief-0",
// "worker-1", "ps-0"), every character but [A-Za-z0-9_-] replaced by '_'.
// Distinct for the tasks of a job (job names are distinct and have no '-').
std::string ProfileHostName(const TracedTask& task);

// One sample of another clock: `offset_us` = its time minus ours at the
// middle of a round trip of `round_trip_us` (the error is at most half).
struct ClockSample {
  int64_t offset_us = 0;
  int64_t round_trip_us = 0;
};
// Of several samples of one clock, the one with the shortest round trip.
ClockSample BestSample(const std::vector<ClockSample>& samples);

// The merged trace of `tasks` (every task of the cluster) whose files are in `run_dir`,
// shifted onto ps 0's clock. Waits up to `wait` for missing files (tasks
// still writing theirs); merges what there is then. `missing` gets the files
// that never came. DataLoss for a damaged trace file.
absl::StatusOr<std::string> MergeClusterTrace(Env* env, const std::string& run_dir,
                                              const std::vector<TracedTask>& tasks,
                                              absl::Duration wait,
                                              std::vector<std::string>* missing);

// A task's trace for the life of its role: created when `trace_steps` (the
// training field) is set, written once its window has passed (checked every
// second) or at the end, whichever comes first.
class TaskTrace {
 public:
  // Null if tracing is off; InvalidArgument for a bad trace_steps.
  // Its file goes to ProfileRunDir(job_dir, ...).
  static absl::StatusOr<std::unique_ptr<TaskTrace>> Create(Env* env, const std::string& job_dir,
                                                           const std::string& trace_steps,
                                                           TracedTask task);
  ~TaskTrace();  // Finish() if not done

  TraceRecorder* recorder() { return recorder_.get(); }
  // Writes the trace if it has not been, or again if events came since
  // (work for a step of the window that ended later); the chief then merges the
  // traces of the cluster's `tasks` (waiting up to `wait` for the other tasks'
  // files). Logs where the files are.
  void Finish(const std::vector<TracedTask>& tasks, absl::Duration wait);

 private:
  TaskTrace(Env* env, std::string run_dir, TracedTask task, TraceSteps steps);
  // Writes the trace unless this very trace (no new event since) is on disk.
  void WriteIfNew();

  Env* const env_;
  const std::string run_dir_;
  const TracedTask task_;
  std::unique_ptr<TraceRecorder> recorder_;
  absl::Mutex mu_;
  bool written_ ABSL_GUARDED_BY(mu_) = false;
  size_t written_events_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Notification stop_;
  std::thread watcher_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CLUSTER_TRACE_H_
