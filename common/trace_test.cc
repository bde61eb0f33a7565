#include "common/trace.h"

#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using Json = nlohmann::json;

TEST(TraceStepsTest, ParsesAWindowAndRefusesNonsense) {
  auto off = ParseTraceSteps("");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->enabled());
  auto window = ParseTraceSteps("100:110");
  ASSERT_TRUE(window.ok()) << window.status();
  EXPECT_EQ(window->first, 100);
  EXPECT_EQ(window->last, 110);
  EXPECT_TRUE(ParseTraceSteps("5:5").ok());
  for (const char* bad : {"5", "5:", ":5", "a:b", "10:5", "-1:5", "1:2:3", "1;2"}) {
    auto r = ParseTraceSteps(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
    EXPECT_NE(r.status().message().find("FIRST:LAST"), std::string::npos) << r.status();
  }
}

TEST(TraceStepsTest, ProfileRunDirIsWhereTensorBoardLooks) {
  EXPECT_EQ(ProfileRunDir("/j", "run1"), "/j/plugins/profile/run1");
  EXPECT_EQ(ProfileRunDir("gs://b/j/", "r"), "gs://b/j/plugins/profile/r");
}

TEST(TraceRecorderTest, RecordsOnlyInsideTheWindow) {
  TraceRecorder recorder("worker:0", TraceSteps{2, 3});
  for (int64_t step = 0; step < 6; ++step) {
    recorder.SetStep(step);
    ScopedTraceEvent event(&recorder, "compute", "forward");
    EXPECT_EQ(recorder.finished(), step > 3);
  }
  EXPECT_EQ(recorder.size(), 2u);
  ScopedTraceEvent ignored(nullptr, "compute", "tracing off");  // no recorder: nothing

  const Json trace = Json::parse(recorder.ToJson());
  ASSERT_TRUE(trace["traceEvents"].is_array());
  std::vector<int64_t> steps;
  for (const Json& e : trace["traceEvents"]) {
    if (e["ph"] == "M") {
      EXPECT_EQ(e["name"], "process_name");
      EXPECT_EQ(e["args"]["name"], "worker:0");
      continue;
    }
    EXPECT_EQ(e["ph"], "X");
    EXPECT_EQ(e["name"], "forward");
    EXPECT_EQ(e["cat"], "compute");
    EXPECT_GE(e["dur"].get<int64_t>(), 0);
    EXPECT_GT(e["ts"].get<int64_t>(), 1'600'000'000'000'000);  // microseconds since 1970
    steps.push_back(e["args"]["step"].get<int64_t>());
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{2, 3}));
}

TEST(TraceRecorderTest, ThreadsAreNamedAndTheCapCountsWhatItDrops) {
  TraceRecorder recorder("ps:1", TraceSteps{0, 10}, /*max_events=*/3);
  recorder.SetStep(0);
  recorder.NameThread("main");
  std::thread other([&] {
    recorder.NameThread("sender");
    for (int i = 0; i < 4; ++i) recorder.Complete("rpc", "push chunk 0", 10 * i, 10 * i + 5);
  });
  other.join();
  recorder.Complete("apply", "apply", 100, 90);  // an end before its begin: duration 0
  EXPECT_EQ(recorder.size(), 3u);
  EXPECT_EQ(recorder.dropped(), 2);
  const Json trace = Json::parse(recorder.ToJson());
  std::set<std::string> threads;
  std::set<int> tids;
  for (const Json& e : trace["traceEvents"]) {
    if (e["name"] == "thread_name") threads.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "X") tids.insert(e["tid"].get<int>());
  }
  EXPECT_EQ(threads, (std::set<std::string>{"main", "sender"}));
  EXPECT_EQ(tids.size(), 1u);  // the sender's three; the main thread's was dropped
  EXPECT_EQ(trace["otherData"]["dropped_events"], 2);
}

TEST(TraceRecorderTest, WritesThroughTheEnv) {
  MemEnv env;
  TraceRecorder recorder("chief:0", TraceSteps{0, 0});
  recorder.SetStep(0);
  recorder.Complete("checkpoint", "save", 1, 2);
  ASSERT_TRUE(recorder.Write(&env, "/j/plugins/profile/r/chief-0.trace.json").ok());
  auto text = env.ReadFile("/j/plugins/profile/r/chief-0.trace.json");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, recorder.ToJson());
}

TEST(MergeTracesTest, ShiftsEachProcessOntoTheReferenceClock) {
  TraceRecorder a("ps:0", TraceSteps{0, 0}), b("worker:0", TraceSteps{0, 0});
  a.SetStep(0);
  b.SetStep(0);
  a.Complete("apply", "apply", 1'000, 1'100);
  b.Complete("rpc", "push", 5'000, 5'050);  // b's clock is 4 ms ahead
  auto merged = MergeTraces({{a.ToJson(), 0}, {b.ToJson(), 4'000}});
  ASSERT_TRUE(merged.ok()) << merged.status();
  const Json trace = Json::parse(*merged);
  std::map<std::string, std::pair<int, int64_t>> seen;  // name -> pid, ts
  for (const Json& e : trace["traceEvents"]) {
    if (e["ph"] == "X") seen[e["name"]] = {e["pid"].get<int>(), e["ts"].get<int64_t>()};
  }
  EXPECT_EQ(seen["apply"], std::make_pair(1, int64_t{1'000}));
  EXPECT_EQ(seen["push"], std::make_pair(2, int64_t{1'000}));
}

TEST(MergeTracesTest, CorruptAndTruncatedTracesAreDataLoss) {
  TraceRecorder a("ps:0", TraceSteps{0, 0});
  a.SetStep(0);
  a.Complete("apply", "apply", 1, 2);
  const std::string good = a.ToJson();
  std::vector<std::string> bad = {"",
                                  "{",
                                  "[]",
                                  "{\"traceEvents\": 3}",
                                  "{\"traceEvents\": [1]}",
                                  "{\"traceEvents\": [{\"ts\": \"soon\"}]}"};
  for (size_t n = 1; n < good.size(); n += 7) bad.push_back(good.substr(0, n));
  std::string flipped = good;
  flipped[flipped.find(':')] = ';';
  bad.push_back(flipped);
  for (const std::string& text : bad) {
    auto merged = MergeTraces({{good, 0}, {text, 0}});
    ASSERT_FALSE(merged.ok()) << text;
    EXPECT_TRUE(absl::IsDataLoss(merged.status())) << merged.status();
    EXPECT_NE(merged.status().message().find("trace 1"), std::string::npos) << merged.status();
  }
}

}  // namespace
}  // namespace pstrain
