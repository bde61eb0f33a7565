#include "common/cluster_trace.h"

#include <map>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using Json = nlohmann::json;

// A one-event trace of `process` whose event starts at `ts` on its clock.
std::string OneEvent(const std::string& process, int64_t ts,
                     const std::vector<int64_t>& ps_offsets = {}) {
  TraceRecorder recorder(process, TraceSteps{0, 0});
  recorder.SetStep(0);
  recorder.Complete("test", process, ts, ts + 10);
  if (!ps_offsets.empty()) recorder.SetOtherData("ps_clock_offsets_us", ps_offsets);
  return recorder.ToJson();
}

// Event name -> its merged ts.
std::map<std::string, int64_t> Times(const std::string& merged) {
  std::map<std::string, int64_t> times;
  const Json trace = Json::parse(merged);
  for (const Json& e : trace["traceEvents"]) {
    if (e["ph"] == "X") times[e["name"].get<std::string>()] = e["ts"].get<int64_t>();
  }
  return times;
}

// A cluster of a chief, a worker and 2 ps.
std::vector<TracedTask> Cluster() { return {{"chief", 0}, {"worker", 0}, {"ps", 0}, {"ps", 1}}; }

TEST(ClusterTraceTest, NamesAndBestSample) {
  EXPECT_EQ(TraceRunName(TraceSteps{100, 110}), "steps_100_110");
  EXPECT_EQ(TraceFileName(TracedTask{"worker", 3}), "worker-3.trace.json");
  EXPECT_EQ(ProfileHostName(TracedTask{"worker", 3}), "worker-3");
  EXPECT_EQ(ProfileHostName(TracedTask{"ps", 0}), "ps-0");
  const ClockSample best = BestSample({{500, 900}, {120, 80}, {300, 400}});
  EXPECT_EQ(best.offset_us, 120);
  EXPECT_EQ(best.round_trip_us, 80);
}

TEST(ClusterTraceTest, EveryTaskIsShiftedOntoPsZerosClock) {
  MemEnv env;
  const std::string dir = "/j/plugins/profile/steps_0_0";
  // The same instant, 1,000,000 on ps 0's clock: the chief's clock is 1 ms
  // behind ps 0 and 3 ms behind ps 1; the worker's is 2 ms ahead of ps 0.
  ASSERT_TRUE(
      env.WriteFileAtomic(dir + "/chief-0.trace.json", OneEvent("chief", 999'000, {1'000, 3'000}))
          .ok());
  ASSERT_TRUE(
      env.WriteFileAtomic(dir + "/worker-0.trace.json", OneEvent("worker", 1'002'000, {-2'000}))
          .ok());
  ASSERT_TRUE(env.WriteFileAtomic(dir + "/ps-0.trace.json", OneEvent("ps0", 1'000'000)).ok());
  ASSERT_TRUE(env.WriteFileAtomic(dir + "/ps-1.trace.json", OneEvent("ps1", 1'002'000)).ok());
  std::vector<std::string> missing;
  auto merged = MergeClusterTrace(&env, dir, Cluster(), absl::ZeroDuration(), &missing);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_TRUE(missing.empty());
  const auto times = Times(*merged);
  for (const char* name : {"chief", "worker", "ps0", "ps1"}) {
    EXPECT_EQ(times.at(name), 1'000'000) << name;
  }
}

TEST(ClusterTraceTest, MissingTasksAreNamedAndDamagedFilesAreDataLoss) {
  MemEnv env;
  const std::string dir = "/j/plugins/profile/steps_0_0";
  ASSERT_TRUE(env.WriteFileAtomic(dir + "/chief-0.trace.json", OneEvent("chief", 5)).ok());
  std::vector<std::string> missing;
  auto merged = MergeClusterTrace(&env, dir, Cluster(), absl::Milliseconds(300), &missing);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(missing, (std::vector<std::string>{"worker-0.trace.json", "ps-0.trace.json",
                                               "ps-1.trace.json"}));
  const std::string good = OneEvent("ps0", 5);
  for (const std::string& bad :
       {good.substr(0, good.size() / 2), std::string("[]"), std::string("{\"traceEvents\": 1}")}) {
    ASSERT_TRUE(env.WriteFileAtomic(dir + "/ps-0.trace.json", bad).ok());
    auto r = MergeClusterTrace(&env, dir, Cluster(), absl::ZeroDuration(), nullptr);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
  }
}

TEST(TaskTraceTest, WritesOnceTheWindowHasPassedAndTheChiefMerges) {
  MemEnv env;
  auto off = TaskTrace::Create(&env, "/j", "", TracedTask{"worker", 0});
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(*off, nullptr);
  const std::vector<TracedTask> cluster = {{"chief", 0}, {"ps", 0}};
  auto ps = TaskTrace::Create(&env, "/j", "1:2", TracedTask{"ps", 0});
  ASSERT_TRUE(ps.ok()) << ps.status();
  TraceRecorder* recorder = (*ps)->recorder();
  for (int64_t step = 0; step < 4; ++step) {
    recorder->SetStep(step);
    ScopedTraceEvent e(recorder, "ps", "apply");
  }
  const std::string ps_file = "/j/plugins/profile/steps_1_2/ps-0.trace.json";
  const absl::Time start = absl::Now();
  while (!env.FileExists(ps_file) && absl::Now() - start < absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(env.FileExists(ps_file));  // written while the task goes on
  EXPECT_EQ(Json::parse(*env.ReadFile(ps_file))["traceEvents"].size(), 3u);  // name + 2 steps
  // And, just after it, the files for TensorBoard's Profile tab
  // (common/xplane_test.cc checks what they hold).
  const std::string gz_file = "/j/plugins/profile/steps_1_2/ps-0.trace.json.gz";
  while (!env.FileExists(gz_file) && absl::Now() - start < absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(env.FileExists(gz_file));
  EXPECT_TRUE(env.FileExists("/j/plugins/profile/steps_1_2/ps-0.xplane.pb"));
  auto chief = TaskTrace::Create(&env, "/j", "1:2", TracedTask{"chief", 0});
  ASSERT_TRUE(chief.ok());
  (*chief)->recorder()->SetStep(1);
  (*chief)->recorder()->Complete("checkpoint", "save", 1, 2);
  (*chief)->Finish(cluster, absl::Seconds(1));
  auto merged = env.ReadFile("/j/plugins/profile/steps_1_2/cluster.trace.json");
  ASSERT_TRUE(merged.ok()) << merged.status();
  const Json trace = Json::parse(*merged);
  int x_events = 0;
  for (const Json& e : trace["traceEvents"]) x_events += e["ph"] == "X";
  EXPECT_EQ(x_events, 3);
}

}  // namespace
}  // namespace pstrain
