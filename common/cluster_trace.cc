#include "common/cluster_trace.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/xplane.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using Json = nlohmann::json;

// The offsets a client's trace recorded (ps i's clock minus the client's),
// or empty.
std::vector<int64_t> PsOffsets(const Json& trace) {
  const Json* other = trace.contains("otherData") ? &trace["otherData"] : nullptr;
  if (other == nullptr || !other->is_object() || !other->contains("ps_clock_offsets_us")) {
    return {};
  }
  const Json& values = (*other)["ps_clock_offsets_us"];
  std::vector<int64_t> offsets;
  if (!values.is_array()) return offsets;
  for (const Json& v : values) {
    if (!v.is_number_integer()) return {};
    offsets.push_back(v.get<int64_t>());
  }
  return offsets;
}

}  // namespace

std::string TraceRunName(const TraceSteps& steps) {
  return absl::StrCat("steps_", steps.first, "_", steps.last);
}

std::string TraceFileName(const TracedTask& task) {
  return absl::StrCat(task.job_name, "-", task.task_index, ".trace.json");
}

std::string ProfileHostName(const TracedTask& task) {
  std::string host = absl::StrCat(task.job_name, "-", task.task_index);
  for (char& c : host) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '_' || c == '-';
    if (!plain) c = '_';
  }
  return host;
}

ClockSample BestSample(const std::vector<ClockSample>& samples) {
  ClockSample best;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (i == 0 || samples[i].round_trip_us < best.round_trip_us) best = samples[i];
  }
  return best;
}

absl::StatusOr<std::string> MergeClusterTrace(Env* env, const std::string& run_dir,
                                              const std::vector<TracedTask>& tasks,
                                              absl::Duration wait,
                                              std::vector<std::string>* missing) {
  const absl::Time deadline = absl::Now() + wait;
  std::vector<std::string> paths;
  for (const TracedTask& task : tasks)
    paths.push_back(absl::StrCat(run_dir, "/", TraceFileName(task)));
  while (absl::Now() < deadline &&
         !std::all_of(paths.begin(), paths.end(),
                      [env](const std::string& p) { return env->FileExists(p); })) {
    absl::SleepFor(absl::Milliseconds(200));
  }
  // Parse what is there; the clients' offsets place every process.
  std::vector<std::pair<const TracedTask*, std::string>> found;
  std::vector<int64_t> chief_offsets;
  std::vector<std::vector<int64_t>> offsets(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    absl::StatusOr<std::string> text = env->ReadFile(paths[i]);
    if (!text.ok()) {
      if (missing != nullptr) missing->push_back(TraceFileName(tasks[i]));
      continue;
    }
    const Json trace = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (trace.is_discarded() || !trace.is_object()) {
      return absl::DataLossError(absl::StrCat(paths[i], " is not trace-event JSON"));
    }
    offsets[i] = PsOffsets(trace);
    if (tasks[i].job_name == "chief") chief_offsets = offsets[i];
    found.emplace_back(&tasks[i], *std::move(text));
  }
  std::vector<TraceInput> inputs;
  for (auto& [task, text] : found) {
    const size_t i = static_cast<size_t>(task - tasks.data());
    int64_t ahead = 0;  // of ps 0's clock
    if (task->job_name == "ps") {
      const size_t ps = static_cast<size_t>(task->task_index);
      if (ps < chief_offsets.size()) ahead = chief_offsets[ps] - chief_offsets[0];
    } else if (!offsets[i].empty()) {
      ahead = -offsets[i][0];
    }
    inputs.push_back({std::move(text), ahead});
  }
  absl::StatusOr<std::string> merged = MergeTraces(inputs);
  if (!merged.ok())
    return absl::DataLossError(absl::StrCat(run_dir, ": ", merged.status().message()));
  return merged;
}

absl::StatusOr<std::unique_ptr<TaskTrace>> TaskTrace::Create(Env* env, const std::string& job_dir,
                                                             const std::string& trace_steps,
                                                             TracedTask task) {
  absl::StatusOr<TraceSteps> steps = ParseTraceSteps(trace_steps);
  if (!steps.ok()) return steps.status();
  if (!steps->enabled()) return nullptr;
  return std::unique_ptr<TaskTrace>(
      new TaskTrace(env, ProfileRunDir(job_dir, TraceRunName(*steps)), std::move(task), *steps));
}

TaskTrace::TaskTrace(Env* env, std::string run_dir, TracedTask task, TraceSteps steps)
    : env_(env),
      run_dir_(std::move(run_dir)),
      task_(std::move(task)),
      recorder_(std::make_unique<TraceRecorder>(absl::StrCat(task_.job_name, ":", task_.task_index),
                                                steps)) {
  watcher_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(absl::Seconds(1))) {
      if (recorder_->finished()) {
        WriteIfNew();
        return;
      }
    }
  });
}

TaskTrace::~TaskTrace() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (watcher_.joinable()) watcher_.join();
  WriteIfNew();
}

void TaskTrace::WriteIfNew() {
  absl::MutexLock lock(&mu_);
  const size_t events = recorder_->size();
  if (written_ && events == written_events_) return;
  const std::string path = absl::StrCat(run_dir_, "/", TraceFileName(task_));
  const std::string json = recorder_->ToJson();
  absl::Status s = env_->CreateDirs(run_dir_);
  if (s.ok()) s = env_->WriteFileAtomic(path, json);
  if (!s.ok()) {
    // Not marked written: the end of the role tries again.
    LOG(WARNING) << "could not write the trace " << path << ": " << s;
    return;
  }
  // The same trace for TensorBoard's Profile tab.
  const std::string host = ProfileHostName(task_);
  s = WriteProfilePluginFiles(env_, run_dir_, host, json);
  if (!s.ok()) {
    LOG(WARNING) << "could not write " << XPlaneFileName(host) << " and "
                 << TraceJsonGzFileName(host) << " in " << run_dir_ << ": " << s;
    return;
  }
  written_ = true;
  written_events_ = events;
  LOG(INFO) << "trace (" << recorder_->size() << " events) written to " << path << " and, for "
            << "TensorBoard's Profile tab, " << XPlaneFileName(host) << " and "
            << TraceJsonGzFileName(host) << " beside it"
            << (recorder_->dropped() > 0
                    ? absl::StrCat(" (", recorder_->dropped(), " events over the cap dropped)")
                    : "");
}

void TaskTrace::Finish(const std::vector<TracedTask>& tasks, absl::Duration wait) {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (watcher_.joinable()) watcher_.join();
  WriteIfNew();
  if (task_.job_name != "chief") return;
  std::vector<std::string> missing;
  absl::StatusOr<std::string> merged = MergeClusterTrace(env_, run_dir_, tasks, wait, &missing);
  const std::string path = absl::StrCat(run_dir_, "/cluster.trace.json");
  absl::Status s = merged.ok() ? env_->WriteFileAtomic(path, *merged) : merged.status();
  if (!s.ok()) {
    LOG(WARNING) << "could not merge the cluster's traces: " << s;
    return;
  }
  LOG(INFO) << "cluster trace (every task on ps 0's clock) written to " << path
            << (missing.empty() ? ""
                                : absl::StrCat("; missing (tasks that wrote none): ",
                                               absl::StrJoin(missing, ", ")));
}

}  // namespace pstrain
