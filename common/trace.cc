#include "common/trace.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using Json = nlohmann::json;

int ThreadId() { return static_cast<int>(::gettid()); }

Json Metadata(const char* what, int pid, int tid, const std::string& name) {
  Json e = {{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}

}  // namespace

absl::StatusOr<TraceSteps> ParseTraceSteps(std::string_view text) {
  TraceSteps steps;
  if (text.empty()) return steps;
  // Debian's abseil has its own string_view type.
  const absl::string_view view(text.data(), text.size());
  const std::vector<absl::string_view> parts = absl::StrSplit(view, ':');
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &steps.first) ||
      !absl::SimpleAtoi(parts[1], &steps.last) || steps.first < 0 || steps.last < steps.first) {
    return absl::InvalidArgumentError(
        absl::StrCat("--trace_steps=", view,
                     ": expected FIRST:LAST, two steps with 0 <= FIRST <= LAST (e.g. 100:110)"));
  }
  return steps;
}

std::string ProfileRunDir(const std::string& job_dir, const std::string& run) {
  return absl::StrCat(job_dir, job_dir.empty() || job_dir.back() == '/' ? "" : "/",
                      "plugins/profile/", run);
}

TraceRecorder::TraceRecorder(std::string process_name, TraceSteps steps, size_t max_events)
    : process_name_(std::move(process_name)), steps_(steps), max_events_(max_events) {}

void TraceRecorder::SetStep(int64_t step) {
  step_.store(step, std::memory_order_relaxed);
  active_.store(Covers(step), std::memory_order_relaxed);
  if (steps_.enabled() && step > steps_.last) finished_.store(true, std::memory_order_relaxed);
}

void TraceRecorder::Complete(std::string_view category, std::string_view name, int64_t begin_us,
                             int64_t end_us, int64_t step) {
  // One read of the owner's step for both the test and the record: a
  // SetStep() between two reads recorded an event past the window.
  if (step < 0) step = this->step();
  if (!Covers(step)) return;
  const int tid = ThreadId();
  absl::MutexLock lock(&mu_);
  AddLocked(category, name, begin_us, end_us, step, tid);
}

void TraceRecorder::CompleteOnTrack(std::string_view track, std::string_view category,
                                    std::string_view name, int64_t begin_us, int64_t end_us,
                                    int64_t step) {
  if (step < 0) step = this->step();
  if (!Covers(step)) return;
  absl::MutexLock lock(&mu_);
  auto it = tracks_.find(track);
  if (it == tracks_.end()) {
    // Track ids stay clear of thread ids (at most 2^22 on Linux).
    const int tid = (1 << 24) + static_cast<int>(tracks_.size());
    it = tracks_.emplace(std::string(track), tid).first;
    thread_names_[tid] = std::string(track);
  }
  AddLocked(category, name, begin_us, end_us, step, it->second);
}

void TraceRecorder::AddLocked(std::string_view category, std::string_view name, int64_t begin_us,
                              int64_t end_us, int64_t step, int tid) {
  if (events_.size() >= max_events_) {
    ++dropped_;
    return;
  }
  events_.push_back(Event{std::string(category), std::string(name), begin_us,
                          std::max<int64_t>(0, end_us - begin_us), step, tid});
}

void TraceRecorder::SetOtherData(std::string_view key, std::vector<int64_t> values) {
  absl::MutexLock lock(&mu_);
  other_data_[std::string(key)] = std::move(values);
}

void TraceRecorder::NameThread(std::string_view name) {
  const int tid = ThreadId();
  absl::MutexLock lock(&mu_);
  thread_names_[tid] = std::string(name);
}

size_t TraceRecorder::size() const {
  absl::MutexLock lock(&mu_);
  return events_.size();
}

int64_t TraceRecorder::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

std::string TraceRecorder::ToJson() const {
  const int pid = static_cast<int>(::getpid());
  Json events = Json::array();
  absl::MutexLock lock(&mu_);
  events.push_back(Metadata("process_name", pid, -1, process_name_));
  for (const auto& [tid, name] : thread_names_) {
    events.push_back(Metadata("thread_name", pid, tid, name));
  }
  for (const Event& e : events_) {
    events.push_back({{"name", e.name},
                      {"cat", e.category},
                      {"ph", "X"},
                      {"ts", e.begin_us},
                      {"dur", e.duration_us},
                      {"pid", pid},
                      {"tid", e.tid},
                      {"args", {{"step", e.step}}}});
  }
  Json other = {{"process", process_name_}, {"dropped_events", dropped_}};
  for (const auto& [key, values] : other_data_) other[key] = values;
  Json trace = {{"displayTimeUnit", "ms"},
                {"traceEvents", std::move(events)},
                {"otherData", std::move(other)}};
  // Names are ours, but a bad byte must not cost the trace.
  return trace.dump(-1, ' ', false, Json::error_handler_t::replace);
}

absl::Status TraceRecorder::Write(Env* env, const std::string& path) const {
  return env->WriteFileAtomic(path, ToJson());
}

int64_t TraceRecorder::NowMicros() { return absl::GetCurrentTimeNanos() / 1000; }

ScopedTraceEvent::ScopedTraceEvent(TraceRecorder* recorder, std::string_view category,
                                   std::string_view name)
    : recorder_(recorder != nullptr && recorder->active() ? recorder : nullptr),
      category_(category),
      name_(name),
      begin_us_(recorder_ != nullptr ? TraceRecorder::NowMicros() : 0) {}

ScopedTraceEvent::~ScopedTraceEvent() {
  if (recorder_ != nullptr) {
    recorder_->Complete(category_, name_, begin_us_, TraceRecorder::NowMicros());
  }
}

absl::StatusOr<std::string> MergeTraces(const std::vector<TraceInput>& inputs) {
  Json merged = Json::array();
  for (size_t i = 0; i < inputs.size(); ++i) {
    Json trace = Json::parse(inputs[i].json, /*cb=*/nullptr, /*allow_exceptions=*/false);
    if (trace.is_discarded() || !trace.is_object() || !trace.contains("traceEvents") ||
        !trace["traceEvents"].is_array()) {
      return absl::DataLossError(
          absl::StrCat("trace ", i, " is not trace-event JSON (no traceEvents array)"));
    }
    const int pid = static_cast<int>(i) + 1;
    for (Json& e : trace["traceEvents"]) {
      if (!e.is_object()) {
        return absl::DataLossError(
            absl::StrCat("trace ", i, " has an event that is not an object"));
      }
      e["pid"] = pid;
      if (e.contains("ts")) {
        if (!e["ts"].is_number()) {
          return absl::DataLossError(
              absl::StrCat("trace ", i, " has an event whose ts is not a number"));
        }
        e["ts"] = e["ts"].get<int64_t>() - inputs[i].clock_offset_us;
      }
      merged.push_back(std::move(e));
    }
  }
  Json trace = {{"displayTimeUnit", "ms"}, {"traceEvents", std::move(merged)}};
  return trace.dump();
}

}  // namespace pstrain
