// Chrome trace events (the JSON that Perfetto and chrome://tracing open):
// what a process did, when, on which thread, for a window of training steps
// (--trace_steps=A:B).
//
// Format note: {"displayTimeUnit": "ms", "traceEvents": [...]} where each
// event is a complete event {"ph": "X", "name", "cat", "ts", "dur", "pid",
// "tid", "args"} with times in microseconds, or a metadata event ("ph": "M",
// process_name / thread_name). `ts` is microseconds since the Unix epoch on
// this process's clock; MergeTraces() shifts each process by its measured
// offset so that a cluster's traces line up.
#ifndef PSTRAIN_COMMON_TRACE_H_
#define PSTRAIN_COMMON_TRACE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"

namespace pstrain {

// The steps a trace covers, both ends included.
struct TraceSteps {
  int64_t first = 0;
  int64_t last = -1;  // last < first: no tracing
  bool enabled() const { return last >= first; }
};

// Parses --trace_steps: "A:B" with 0 <= A <= B, or "" (off).
absl::StatusOr<TraceSteps> ParseTraceSteps(std::string_view text);

// `<job_dir>/plugins/profile/<run>`, where TensorBoard's profile plugin
// looks for a run's traces.
std::string ProfileRunDir(const std::string& job_dir, const std::string& run);

// Records complete events while the owner's step is inside `steps`.
// Thread-safe: any thread may record; SetStep() may come from any thread.
// Holds at most `max_events` events; later ones are counted as dropped.
class TraceRecorder {
 public:
  TraceRecorder(std::string process_name, TraceSteps steps, size_t max_events = 1 << 20);

  // The owner's current step: recording is on while it is inside the window.
  void SetStep(int64_t step);
  bool active() const { return active_.load(std::memory_order_relaxed); }
  // The owner's current step (-1 before the first SetStep()).
  int64_t step() const { return step_.load(std::memory_order_relaxed); }
  // The window has passed: the trace is complete.
  bool finished() const { return finished_.load(std::memory_order_relaxed); }
  // Whether `step` is inside the window.
  bool Covers(int64_t step) const {
    return steps_.enabled() && step >= steps_.first && step <= steps_.last;
  }

  // Records [begin_us, end_us) on the calling thread: with `step` >= 0 if
  // that step is inside the window (work for a step that ends after the
  // owner moved on, such as a checkpoint); with `step` < 0 as of the
  // owner's current step, if that is inside the window.
  void Complete(std::string_view category, std::string_view name, int64_t begin_us, int64_t end_us,
                int64_t step = -1);
  // The same on a named track instead of the calling thread: for work that
  // is no thread's, such as an RPC in flight ("chunk 3 rpc"). Tracks are
  // created on first use and shown as threads.
  void CompleteOnTrack(std::string_view track, std::string_view category, std::string_view name,
                       int64_t begin_us, int64_t end_us, int64_t step = -1);
  // Names the calling thread in the trace ("compute", "sender", ...).
  void NameThread(std::string_view name);
  // A number kept in the trace's "otherData" (e.g. measured clock offsets),
  // written even when no event was recorded.
  void SetOtherData(std::string_view key, std::vector<int64_t> values);

  size_t size() const;
  int64_t dropped() const;
  std::string ToJson() const;
  // Writes ToJson() to `path` (temp file + rename).
  absl::Status Write(Env* env, const std::string& path) const;

  // Microseconds since the Unix epoch.
  static int64_t NowMicros();

 private:
  struct Event {
    std::string category;
    std::string name;
    int64_t begin_us;
    int64_t duration_us;
    int64_t step;
    int tid;
  };
  void AddLocked(std::string_view category, std::string_view name, int64_t begin_us, int64_t end_us,
                 int64_t step, int tid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string process_name_;
  const TraceSteps steps_;
  const size_t max_events_;
  std::atomic<bool> active_{false};
  std::atomic<bool> finished_{false};
  std::atomic<int64_t> step_{-1};
  mutable absl::Mutex mu_;
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::string> thread_names_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int, std::less<>> tracks_ ABSL_GUARDED_BY(mu_);  // name -> tid
  std::map<std::string, std::vector<int64_t>> other_data_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// Records one event from its construction to its destruction. `recorder`
// may be null (tracing off); costs one relaxed load when inactive.
// `category` and `name` must outlive it (string literals do).
class ScopedTraceEvent {
 public:
  ScopedTraceEvent(TraceRecorder* recorder, std::string_view category, std::string_view name);
  ~ScopedTraceEvent();
  ScopedTraceEvent(const ScopedTraceEvent&) = delete;
  ScopedTraceEvent& operator=(const ScopedTraceEvent&) = delete;

 private:
  TraceRecorder* const recorder_;
  const std::string_view category_;
  const std::string_view name_;
  const int64_t begin_us_;
};

// One process's trace and how far its clock is ahead of the reference
// clock (microseconds; subtracted from its times).
struct TraceInput {
  std::string json;
  int64_t clock_offset_us = 0;
};

// One trace of a whole cluster: each input's events shifted onto the
// reference clock, each process on its own pid (its order in `inputs`).
absl::StatusOr<std::string> MergeTraces(const std::vector<TraceInput>& inputs);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TRACE_H_
