#include "common/xplane.h"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cluster_trace.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using Json = nlohmann::json;
using tensorflow::profiler::XEvent;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using tensorflow::profiler::XStat;

constexpr char kRun[] = "/j/plugins/profile/steps_0_0";

// The profile plugin's discovery rules, as read in its source:
//
// xprof (tensorboard-plugin-profile 2.19.1 and later), openxla/xprof at
// a27d00aa95eb5cc4f4e1a0fd56b4c89261685ec5, plugin/xprof/profile_io.py: a
// run directory's files are those matching the globs `*.xplane.pb` and
// `*.xplane.riegeli`; plugin/xprof/profile_plugin.py _parse_filename(): the
// host is group 1 of _FILENAME_RE.fullmatch(name), with
// _FILENAME_RE = (?:(.*)\.)?(xplane\.pb|hlo_proto\.pb|xplane\.riegeli);
// hosts selected together are joined with ',' (so a host has none); and
// xprof/convert/repository.cc SessionSnapshot::GetHostnameByPath() strips
// ".xplane.pb" from the base name, and Create() wants XSpace.hostnames(0)
// to be part of that name.
const std::regex kXprofFileName(R"((?:(.*)\.)?(xplane\.pb|hlo_proto\.pb|xplane\.riegeli))");
// Releases up to 2.19.0 (tensorflow/profiler, plugin/tensorboard_plugin_profile/
// profile_plugin.py): TOOLS maps 'trace_viewer#' to 'trace.json.gz' (served
// with Content-Encoding: gzip) and 'xplane' to 'xplane.pb'; hosts come from
// the files matching the glob '*.' + extension, host = group 1 of
// fullmatch((?:(.*)\.)?(trace|trace.json.gz|tracetable|...|xplane.pb)).
const std::regex kLegacyFileName(
    R"((?:(.*)\.)?(trace|trace\.json\.gz|tracetable|op_profile\.json|input_pipeline\.json|)"
    R"(input_pipeline\.pb|overview_page\.json|overview_page\.pb|memory_viewer\.json|)"
    R"(pod_viewer\.json|tensorflow_stats\.pb|kernel_stats\.pb|memory_profile\.json\.gz|)"
    R"(xplane\.pb))");

// The host the plugin reads from `file` by `rule`, or "" if the file is not its.
std::string HostOf(const std::regex& rule, const std::string& file, const std::string& suffix) {
  if (file.size() < suffix.size() ||
      file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return "";  // not matched by the glob "*" + suffix
  }
  std::smatch m;
  if (!std::regex_match(file, m, rule)) return "";
  return m[1].str();
}

std::string Gunzip(const std::string& gz) {
  z_stream zs{};
  EXPECT_EQ(inflateInit2(&zs, 16 + MAX_WBITS), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  zs.avail_in = static_cast<uInt>(gz.size());
  std::string out;
  char buffer[4096];
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buffer);
    zs.avail_out = sizeof(buffer);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - zs.avail_out);
  }
  EXPECT_EQ(rc, Z_STREAM_END) << "truncated or corrupt gzip";
  EXPECT_EQ(zs.avail_in, 0u) << "bytes after the gzip stream";
  inflateEnd(&zs);
  return out;
}

// A complete event as both files can say it: thread, name, start and
// duration in picoseconds, step.
// Starts are counted from kT0Us: picoseconds since the epoch are past int64.
using Span = std::tuple<int64_t, std::string, int64_t, int64_t, int64_t>;

constexpr int64_t kT0Us = 1'700'000'000'000'000;  // the test trace's start, us since the epoch

std::multiset<Span> JsonSpans(const Json& trace) {
  std::multiset<Span> spans;
  for (const Json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    spans.emplace(e["tid"].get<int64_t>(), e["name"].get<std::string>(),
                  (e["ts"].get<int64_t>() - kT0Us) * 1'000'000, e["dur"].get<int64_t>() * 1'000'000,
                  e["args"]["step"].get<int64_t>());
  }
  return spans;
}

std::string StatName(const XPlane& plane, const XStat& stat) {
  return plane.stat_metadata().at(stat.metadata_id()).name();
}

std::multiset<Span> XSpaceSpans(const XPlane& plane) {
  std::multiset<Span> spans;
  for (const XLine& line : plane.lines()) {
    for (const XEvent& e : line.events()) {
      int64_t step = -1;
      for (const XStat& s : e.stats()) {
        if (StatName(plane, s) == kStepNumStat) step = s.int64_value();
      }
      spans.emplace(line.id(), plane.event_metadata().at(e.metadata_id()).name(),
                    (line.timestamp_ns() - kT0Us * 1000) * 1000 + e.offset_ps(), e.duration_ps(),
                    step);
    }
  }
  return spans;
}

// Writes, through the tasks' code path (TaskTrace on a MemEnv), the trace of
// `task` with nested events on two threads and on one named track.
void WriteTaskTrace(MemEnv* env, const TracedTask& task) {
  auto trace = TaskTrace::Create(env, "/j", "0:0", task);
  ASSERT_TRUE(trace.ok()) << trace.status();
  TraceRecorder* recorder = (*trace)->recorder();
  recorder->SetStep(0);
  constexpr int64_t t0 = kT0Us;
  recorder->NameThread("compute");
  recorder->Complete("worker", "train step", t0 + 100, t0 + 900);
  recorder->Complete("model", "forward", t0 + 110, t0 + 400);
  recorder->Complete("model", "forward conv2d", t0 + 120, t0 + 300);
  recorder->Complete("model", "backward", t0 + 400, t0 + 880);
  recorder->Complete("model", "forward conv2d", t0 + 410, t0 + 420);  // same name again
  std::thread sender([recorder] {
    recorder->NameThread("sender");
    recorder->Complete("client", "push", t0 + 50, t0 + 800);
    recorder->Complete("client", "encode chunk 0", t0 + 50, t0 + 60);
    recorder->Complete("client", "encode chunk 1", t0 + 60, t0 + 75);
  });
  sender.join();
  recorder->CompleteOnTrack("chunk 0 rpc", "rpc", "PushPull", t0 + 60, t0 + 700);
  (*trace)->Finish({task}, absl::ZeroDuration());
}

TEST(XPlaneTest, TheXSpaceHoldsExactlyTheTracesCompleteEvents) {
  MemEnv env;
  const TracedTask task{"worker", 1};
  WriteTaskTrace(&env, task);
  const std::string host = ProfileHostName(task);
  EXPECT_EQ(host, "worker-1");
  auto json_text = env.ReadFile(absl::StrCat(kRun, "/worker-1.trace.json"));
  ASSERT_TRUE(json_text.ok()) << json_text.status();
  const Json trace = Json::parse(*json_text);
  auto bytes = env.ReadFile(absl::StrCat(kRun, "/worker-1.xplane.pb"));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto space = ParseXSpace(*bytes);
  ASSERT_TRUE(space.ok()) << space.status();

  EXPECT_EQ(std::vector<std::string>(space->hostnames().begin(), space->hostnames().end()),
            std::vector<std::string>{"worker-1"});
  ASSERT_EQ(space->planes_size(), 1);
  const XPlane& plane = space->planes(0);
  EXPECT_EQ(plane.name(), "/host:CPU");
  EXPECT_EQ(plane.id(), 0);

  // The same events: thread, name, start and duration in ps, step.
  const std::multiset<Span> expected = JsonSpans(trace);
  EXPECT_EQ(expected.size(), 9u);
  EXPECT_EQ(XSpaceSpans(plane), expected);

  // One line per thread of the trace, named as the trace names it.
  std::map<int64_t, std::string> thread_names;
  for (const Json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      thread_names[e["tid"].get<int64_t>()] = e["args"]["name"].get<std::string>();
    }
  }
  ASSERT_EQ(plane.lines_size(), 3);
  std::set<std::string> line_names;
  for (const XLine& line : plane.lines()) {
    EXPECT_EQ(line.name(), thread_names.at(line.id()));
    EXPECT_EQ(line.display_name(), line.name());
    line_names.insert(line.name());
    // Offsets count from the line's start, its first event; the line spans
    // to its last end; events come in order of start, enclosing ones first.
    ASSERT_GT(line.events_size(), 0);
    EXPECT_EQ(line.events(0).offset_ps(), 0);
    int64_t end = 0;
    for (int i = 0; i < line.events_size(); ++i) {
      const XEvent& e = line.events(i);
      end = std::max(end, e.offset_ps() + e.duration_ps());
      if (i > 0) {
        const XEvent& before = line.events(i - 1);
        EXPECT_TRUE(
            before.offset_ps() < e.offset_ps() ||
            (before.offset_ps() == e.offset_ps() && before.duration_ps() >= e.duration_ps()));
      }
    }
    EXPECT_EQ(line.duration_ps(), end);
  }
  EXPECT_EQ(line_names, (std::set<std::string>{"compute", "sender", "chunk 0 rpc"}));

  // Nesting by time: on "compute", train step > forward > forward conv2d
  // and train step > backward > the second forward conv2d; on "sender",
  // push > encode chunk 0 and 1.
  auto find_line = [&plane](const std::string& name) -> const XLine& {
    for (const XLine& line : plane.lines()) {
      if (line.name() == name) return line;
    }
    return plane.lines(0);
  };
  auto spans_of = [&plane](const XLine& line) {
    std::vector<std::tuple<std::string, int64_t, int64_t>> out;  // name, begin, end
    for (const XEvent& e : line.events()) {
      out.emplace_back(plane.event_metadata().at(e.metadata_id()).name(), e.offset_ps(),
                       e.offset_ps() + e.duration_ps());
    }
    return out;
  };
  auto contains = [](const auto& outer, const auto& inner) {
    return std::get<1>(outer) <= std::get<1>(inner) && std::get<2>(inner) <= std::get<2>(outer);
  };
  const auto compute = spans_of(find_line("compute"));
  ASSERT_EQ(compute.size(), 5u);
  EXPECT_EQ(std::get<0>(compute[0]), "train step");
  EXPECT_EQ(std::get<0>(compute[1]), "forward");
  EXPECT_EQ(std::get<0>(compute[2]), "forward conv2d");
  EXPECT_EQ(std::get<0>(compute[3]), "backward");
  EXPECT_EQ(std::get<0>(compute[4]), "forward conv2d");
  EXPECT_TRUE(contains(compute[0], compute[1]));
  EXPECT_TRUE(contains(compute[1], compute[2]));
  EXPECT_TRUE(contains(compute[0], compute[3]));
  EXPECT_TRUE(contains(compute[3], compute[4]));
  EXPECT_FALSE(contains(compute[1], compute[4]));
  EXPECT_EQ(std::get<1>(compute[2]), 20'000'000);  // 20 us after the line's start
  EXPECT_EQ(std::get<2>(compute[2]) - std::get<1>(compute[2]), 180'000'000);
  const auto sender = spans_of(find_line("sender"));
  ASSERT_EQ(sender.size(), 3u);
  EXPECT_EQ(std::get<0>(sender[0]), "push");
  EXPECT_TRUE(contains(sender[0], sender[1]));
  EXPECT_TRUE(contains(sender[0], sender[2]));
  EXPECT_EQ(find_line("sender").timestamp_ns(), (1'700'000'000'000'000 + 50) * 1000);

  // Event metadata: one per distinct name, keyed by its id; the category is
  // a stat whose value names stat metadata.
  std::set<std::string> names;
  for (const auto& [id, m] : plane.event_metadata()) {
    EXPECT_EQ(m.id(), id);
    EXPECT_TRUE(names.insert(m.name()).second) << m.name() << " twice";
  }
  EXPECT_EQ(names.size(), 8u);
  std::set<std::string> stat_names;
  for (const auto& [id, m] : plane.stat_metadata()) {
    EXPECT_TRUE(stat_names.insert(m.name()).second) << m.name() << " twice";
  }
  const XEvent& first = find_line("compute").events(0);
  std::set<std::string> stats_of_first;
  for (const XStat& s : first.stats()) {
    stats_of_first.insert(StatName(plane, s));
    if (StatName(plane, s) == kCategoryStat) {
      EXPECT_EQ(plane.stat_metadata().at(static_cast<int64_t>(s.ref_value())).name(), "worker");
    }
  }
  EXPECT_EQ(stats_of_first, (std::set<std::string>{"category", "step_num"}));
  EXPECT_TRUE(space->warnings().empty());
}

TEST(XPlaneTest, TheGzippedTraceIsTheJsonTrace) {
  MemEnv env;
  WriteTaskTrace(&env, TracedTask{"ps", 0});
  auto json_text = env.ReadFile(absl::StrCat(kRun, "/ps-0.trace.json"));
  auto gz = env.ReadFile(absl::StrCat(kRun, "/ps-0.trace.json.gz"));
  ASSERT_TRUE(json_text.ok() && gz.ok());
  ASSERT_GE(gz->size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>((*gz)[0]), 0x1f);  // gzip magic
  EXPECT_EQ(static_cast<unsigned char>((*gz)[1]), 0x8b);
  EXPECT_EQ(Gunzip(*gz), *json_text);
  // Large inputs go through in pieces.
  const std::string big(3 << 20, 'x');
  auto big_gz = GzipCompress(big);
  ASSERT_TRUE(big_gz.ok());
  EXPECT_EQ(Gunzip(*big_gz), big);
  auto empty_gz = GzipCompress("");
  ASSERT_TRUE(empty_gz.ok());
  EXPECT_EQ(Gunzip(*empty_gz), "");
}

TEST(XPlaneTest, FileNamesMatchThePluginsDiscoveryWithADistinctHostPerTask) {
  MemEnv env;
  const std::vector<TracedTask> tasks = {{"chief", 0}, {"worker", 0}, {"worker", 1}, {"ps", 0}};
  for (const TracedTask& task : tasks) WriteTaskTrace(&env, task);
  auto files = env.ListDir(kRun);
  ASSERT_TRUE(files.ok()) << files.status();
  std::set<std::string> xprof_hosts;
  std::set<std::string> legacy_hosts;
  for (const std::string& file : *files) {
    const std::string xprof = HostOf(kXprofFileName, file, ".xplane.pb");
    if (!xprof.empty()) {
      xprof_hosts.insert(xprof);
      EXPECT_EQ(xprof.find(','), std::string::npos);
      auto space = ParseXSpace(*env.ReadFile(absl::StrCat(kRun, "/", file)));
      ASSERT_TRUE(space.ok()) << file << ": " << space.status();
      ASSERT_GT(space->hostnames_size(), 0);
      EXPECT_NE(xprof.find(space->hostnames(0)), std::string::npos);  // repository.cc's check
    }
    const std::string legacy = HostOf(kLegacyFileName, file, ".trace.json.gz");
    if (!legacy.empty()) legacy_hosts.insert(legacy);
  }
  const std::set<std::string> expected = {"chief-0", "worker-0", "worker-1", "ps-0"};
  EXPECT_EQ(xprof_hosts, expected);
  EXPECT_EQ(legacy_hosts, expected);
  for (const TracedTask& task : tasks) {
    EXPECT_TRUE(expected.count(ProfileHostName(task)));
    EXPECT_TRUE(env.FileExists(absl::StrCat(kRun, "/", TraceFileName(task))));  // still there
  }
  EXPECT_TRUE(env.FileExists(absl::StrCat(kRun, "/cluster.trace.json")));
  EXPECT_EQ(XPlaneFileName("ps-0"), "ps-0.xplane.pb");
  EXPECT_EQ(TraceJsonGzFileName("ps-0"), "ps-0.trace.json.gz");
  EXPECT_EQ(ProfileHostName(TracedTask{"odd job/x.y", 2}), "odd_job_x_y-2");
}

TEST(XPlaneTest, DamagedOrTruncatedFilesDoNotParseAsTheOriginal) {
  MemEnv env;
  WriteTaskTrace(&env, TracedTask{"worker", 0});
  auto bytes = env.ReadFile(absl::StrCat(kRun, "/worker-0.xplane.pb"));
  ASSERT_TRUE(bytes.ok());
  auto original = ParseXSpace(*bytes);
  ASSERT_TRUE(original.ok());
  auto same = [&original](const XSpace& s) {
    return google::protobuf::util::MessageDifferencer::Equals(s, *original);
  };
  int refused = 0;
  for (size_t n = 0; n < bytes->size(); ++n) {
    auto r = ParseXSpace(std::string_view(*bytes).substr(0, n));
    if (!r.ok()) {
      EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
      ++refused;
    } else {
      EXPECT_FALSE(same(*r)) << "truncated to " << n << " bytes of " << bytes->size();
    }
  }
  EXPECT_GT(refused, 0);
  for (size_t i = 0; i < bytes->size(); ++i) {
    for (unsigned char flip : {0x01, 0x80, 0xff}) {
      std::string damaged = *bytes;
      damaged[i] = static_cast<char>(damaged[i] ^ flip);
      auto r = ParseXSpace(damaged);
      if (r.ok()) {
        EXPECT_FALSE(same(*r)) << "byte " << i << " ^ " << int{flip};
      } else {
        EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
      }
    }
  }
  // Well-formed protobuf that breaks the XSpace's references.
  XSpace dangling = *original;
  dangling.mutable_planes(0)->mutable_lines(0)->mutable_events(0)->set_metadata_id(999);
  auto r = ParseXSpace(dangling.SerializeAsString());
  EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
}

TEST(XPlaneTest, ConversionRefusesWhatIsNotATraceAndLeavesOutOtherPhases) {
  for (const char* bad : {"", "[]", "{\"traceEvents\": 1}", "{\"traceEvents\": [1]}",
                          R"({"traceEvents": [{"ph": "X", "name": "a", "tid": 1, "ts": 5}]})",
                          R"({"traceEvents": [{"ph": "X", "name": "a", "tid": 1, "ts": 5,
                                               "dur": -1}]})",
                          R"({"traceEvents": [{"ph": "X", "tid": 1, "ts": 5, "dur": 1}]})"}) {
    auto r = ChromeTraceToXSpace(bad, "h");
    EXPECT_TRUE(absl::IsDataLoss(r.status())) << bad << ": " << r.status();
  }
  auto far = ChromeTraceToXSpace(
      R"({"traceEvents": [{"ph": "X", "name": "a", "tid": 1, "ts": 0, "dur": 1},
                          {"ph": "X", "name": "b", "tid": 1, "ts": 9000000000000000, "dur": 1}]})",
      "h");
  EXPECT_TRUE(absl::IsOutOfRange(far.status())) << far.status();
  auto r = ChromeTraceToXSpace(
      R"({"traceEvents": [{"ph": "X", "name": "a", "cat": "c", "tid": 7, "ts": 10, "dur": 2.5},
                          {"ph": "i", "name": "mark", "tid": 7, "ts": 11},
                          {"ph": "C", "name": "queue", "tid": 7, "ts": 11, "args": {"n": 3}}],
          "otherData": {"dropped_events": 4}})",
      "h");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->planes(0).lines_size(), 1);
  const XLine& line = r->planes(0).lines(0);
  EXPECT_EQ(line.name(), "thread 7");
  ASSERT_EQ(line.events_size(), 1);
  EXPECT_EQ(line.events(0).duration_ps(), 2'500'000);
  EXPECT_EQ(line.timestamp_ns(), 10'000);
  ASSERT_EQ(r->warnings_size(), 2);
  EXPECT_NE(r->warnings(0).find("2 trace events other than complete"), std::string::npos);
  EXPECT_NE(r->warnings(1).find("4 events over the recorder's cap"), std::string::npos);
}

}  // namespace
}  // namespace pstrain
