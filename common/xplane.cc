#include "common/xplane.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using Json = nlohmann::json;
using tensorflow::profiler::XEvent;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using tensorflow::profiler::XStat;

// Times are kept in nanoseconds within +-2^62 (the year 2116), so that a
// difference of two, or a start plus a duration, cannot overflow.
constexpr int64_t kMaxNanos = int64_t{1} << 62;

// A time in the JSON (microseconds, integer or not) in nanoseconds.
bool MicrosToNanos(const Json& v, int64_t* ns) {
  if (v.is_number_integer()) {
    const int64_t us = v.get<int64_t>();
    if (us > kMaxNanos / 1000 || us < -kMaxNanos / 1000) return false;
    *ns = us * 1000;
    return true;
  }
  if (v.is_number_float()) {
    const double x = v.get<double>() * 1000.0;
    if (!std::isfinite(x) || std::fabs(x) > static_cast<double>(kMaxNanos / 2)) return false;
    *ns = std::llround(x);
    return true;
  }
  return false;
}

struct Event {
  std::string name;
  std::string category;
  int64_t begin_ns;
  int64_t duration_ns;
  const Json* args;  // object or null
};

// Ids for names, from 1, one per distinct name (XPlaneBuilder's habit).
class Names {
 public:
  int64_t Id(const std::string& name) {
    auto [it, added] = ids_.emplace(name, static_cast<int64_t>(ids_.size()) + 1);
    return it->second;
  }
  const std::map<std::string, int64_t>& ids() const { return ids_; }

 private:
  std::map<std::string, int64_t> ids_;
};

void AddStats(const Event& e, Names* stat_names, XEvent* out) {
  if (!e.category.empty()) {
    XStat* s = out->add_stats();
    s->set_metadata_id(stat_names->Id(kCategoryStat));
    s->set_ref_value(static_cast<uint64_t>(stat_names->Id(e.category)));
  }
  if (e.args == nullptr) return;
  for (const auto& [key, value] : e.args->items()) {
    const std::string name = key == "step" ? kStepNumStat : key;
    if (value.is_number_integer()) {
      XStat* s = out->add_stats();
      s->set_metadata_id(stat_names->Id(name));
      s->set_int64_value(value.get<int64_t>());
    } else if (value.is_string()) {
      XStat* s = out->add_stats();
      s->set_metadata_id(stat_names->Id(name));
      s->set_str_value(value.get<std::string>());
    }
  }
}

absl::Status CheckEvent(const XPlane& plane, const XEvent& event, size_t line) {
  if (!plane.event_metadata().contains(event.metadata_id())) {
    return absl::DataLossError(absl::StrCat("line ", line, ": event metadata id ",
                                            event.metadata_id(), " is not in its plane"));
  }
  if (event.offset_ps() < 0 || event.duration_ps() < 0) {
    return absl::DataLossError(absl::StrCat("line ", line, ": an event has a negative time"));
  }
  for (const XStat& stat : event.stats()) {
    if (!plane.stat_metadata().contains(stat.metadata_id()) ||
        (stat.value_case() == XStat::kRefValue &&
         !plane.stat_metadata().contains(static_cast<int64_t>(stat.ref_value())))) {
      return absl::DataLossError(
          absl::StrCat("line ", line, ": a stat names metadata that is not in its plane"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string XPlaneFileName(const std::string& host) { return host + kXPlaneSuffix; }

std::string TraceJsonGzFileName(const std::string& host) { return host + kTraceJsonGzSuffix; }

absl::StatusOr<XSpace> ChromeTraceToXSpace(std::string_view json, const std::string& host) {
  const Json trace = Json::parse(json.begin(), json.end(), /*cb=*/nullptr,
                                 /*allow_exceptions=*/false);
  if (trace.is_discarded() || !trace.is_object() || !trace.contains("traceEvents") ||
      !trace["traceEvents"].is_array()) {
    return absl::DataLossError("not trace-event JSON (no traceEvents array)");
  }
  std::map<int64_t, std::string> thread_names;
  std::map<int64_t, std::vector<Event>> threads;
  int64_t left_out = 0;
  const Json& events = trace["traceEvents"];
  for (size_t i = 0; i < events.size(); ++i) {
    const Json& e = events[i];
    auto bad = [i](const char* what) {
      return absl::DataLossError(absl::StrCat("trace event ", i, ": ", what));
    };
    if (!e.is_object()) return bad("not an object");
    const auto ph = e.find("ph");
    if (ph == e.end() || !ph->is_string()) return bad("no ph");
    const auto tid = e.find("tid");
    const bool has_tid = tid != e.end() && tid->is_number_integer();
    if (*ph == "M") {
      const auto name = e.find("name");
      if (has_tid && name != e.end() && *name == "thread_name" && e.contains("args") &&
          e["args"].is_object() && e["args"].contains("name") && e["args"]["name"].is_string()) {
        thread_names[tid->get<int64_t>()] = e["args"]["name"].get<std::string>();
      }
      continue;
    }
    if (*ph != "X") {
      ++left_out;
      continue;
    }
    const auto name = e.find("name");
    if (name == e.end() || !name->is_string()) return bad("no name");
    if (!has_tid) return bad("no integer tid");
    Event out{name->get<std::string>(), "", 0, 0, nullptr};
    const auto cat = e.find("cat");
    if (cat != e.end() && cat->is_string()) out.category = cat->get<std::string>();
    const auto ts = e.find("ts");
    const auto dur = e.find("dur");
    if (ts == e.end() || !ts->is_number()) return bad("no ts");
    if (dur == e.end() || !dur->is_number()) return bad("no dur");
    if (!MicrosToNanos(*ts, &out.begin_ns) || !MicrosToNanos(*dur, &out.duration_ns)) {
      return absl::OutOfRangeError(absl::StrCat("trace event ", i, ": time out of range"));
    }
    if (out.duration_ns < 0) return bad("negative dur");
    const auto args = e.find("args");
    if (args != e.end() && args->is_object()) out.args = &*args;
    threads[tid->get<int64_t>()].push_back(std::move(out));
  }

  XSpace space;
  space.add_hostnames(host);
  XPlane* plane = space.add_planes();
  plane->set_id(0);
  plane->set_name(kHostThreadsPlaneName);
  Names event_names;
  Names stat_names;
  for (auto& [tid, list] : threads) {
    std::sort(list.begin(), list.end(), [](const Event& a, const Event& b) {
      return a.begin_ns != b.begin_ns ? a.begin_ns < b.begin_ns : a.duration_ns > b.duration_ns;
    });
    XLine* line = plane->add_lines();
    line->set_id(tid);
    auto named = thread_names.find(tid);
    const std::string name =
        named != thread_names.end() ? named->second : absl::StrCat("thread ", tid);
    line->set_name(name);
    line->set_display_name(name);
    const int64_t start_ns = list.front().begin_ns;
    int64_t end_ns = start_ns;
    // Picoseconds of int64 cover ~106 days.
    constexpr int64_t kMaxSpanNs = std::numeric_limits<int64_t>::max() / 1000;
    for (const Event& e : list) {
      const int64_t offset_ns = e.begin_ns - start_ns;  // no overflow: see kMaxNanos
      if (offset_ns + e.duration_ns > kMaxSpanNs) {
        return absl::OutOfRangeError(
            absl::StrCat("thread ", tid, ": the trace spans too long for picoseconds"));
      }
      end_ns = std::max(end_ns, e.begin_ns + e.duration_ns);
      XEvent* event = line->add_events();
      event->set_metadata_id(event_names.Id(e.name));
      event->set_offset_ps(offset_ns * 1000);
      event->set_duration_ps(e.duration_ns * 1000);
      AddStats(e, &stat_names, event);
    }
    line->set_timestamp_ns(start_ns);
    line->set_duration_ps((end_ns - start_ns) * 1000);
  }
  for (const auto& [name, id] : event_names.ids()) {
    auto& m = (*plane->mutable_event_metadata())[id];
    m.set_id(id);
    m.set_name(name);
  }
  for (const auto& [name, id] : stat_names.ids()) {
    auto& m = (*plane->mutable_stat_metadata())[id];
    m.set_id(id);
    m.set_name(name);
  }
  if (left_out > 0) {
    space.add_warnings(absl::StrCat(left_out,
                                    " trace events other than complete (\"X\") and metadata "
                                    "(\"M\") events were left out"));
  }
  if (trace.contains("otherData") && trace["otherData"].is_object()) {
    const Json& other = trace["otherData"];
    if (other.contains("dropped_events") && other["dropped_events"].is_number_integer() &&
        other["dropped_events"].get<int64_t>() > 0) {
      space.add_warnings(absl::StrCat(other["dropped_events"].get<int64_t>(),
                                      " events over the recorder's cap were dropped"));
    }
  }
  return space;
}

absl::StatusOr<XSpace> ParseXSpace(std::string_view bytes) {
  XSpace space;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !space.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError("not an XSpace (damaged or truncated)");
  }
  for (const XPlane& plane : space.planes()) {
    for (const auto& [id, m] : plane.event_metadata()) {
      if (m.id() != id) return absl::DataLossError("event metadata keyed by another id");
    }
    for (const auto& [id, m] : plane.stat_metadata()) {
      if (m.id() != id) return absl::DataLossError("stat metadata keyed by another id");
    }
    for (int l = 0; l < plane.lines_size(); ++l) {
      const XLine& line = plane.lines(l);
      if (line.duration_ps() < 0) return absl::DataLossError("a line has a negative duration");
      for (const XEvent& event : line.events()) {
        absl::Status s = CheckEvent(plane, event, static_cast<size_t>(l));
        if (!s.ok()) return absl::DataLossError(absl::StrCat(plane.name(), " ", s.message()));
      }
    }
  }
  return space;
}

absl::StatusOr<std::string> GzipCompress(std::string_view data) {
  z_stream zs{};
  // 16 + MAX_WBITS: the gzip wrapper (header and CRC-32 trailer) instead of zlib's.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    return absl::InternalError("cannot initialize zlib's deflate");
  }
  std::string out;
  char buffer[1 << 16];
  size_t fed = 0;
  int rc = Z_OK;
  // zlib counts in uInt (32 bits): feed the input in pieces.
  while (rc != Z_STREAM_END) {
    if (zs.avail_in == 0 && fed < data.size()) {
      const size_t n = std::min<size_t>(data.size() - fed, 1u << 30);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + fed));
      zs.avail_in = static_cast<uInt>(n);
      fed += n;
    }
    zs.next_out = reinterpret_cast<Bytef*>(buffer);
    zs.avail_out = sizeof(buffer);
    rc = deflate(&zs, fed == data.size() ? Z_FINISH : Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      deflateEnd(&zs);
      return absl::InternalError(absl::StrCat("zlib's deflate failed (", rc, ")"));
    }
    out.append(buffer, sizeof(buffer) - zs.avail_out);
  }
  deflateEnd(&zs);
  return out;
}

absl::Status WriteProfilePluginFiles(Env* env, const std::string& dir, const std::string& host,
                                     std::string_view json) {
  absl::StatusOr<XSpace> space = ChromeTraceToXSpace(json, host);
  if (!space.ok()) return space.status();
  std::string bytes;
  if (!space->SerializeToString(&bytes)) {
    return absl::InternalError(absl::StrCat(host, ": cannot serialize the XSpace"));
  }
  absl::Status s = env->WriteFileAtomic(JoinPath(dir, XPlaneFileName(host)), bytes);
  if (!s.ok()) return s;
  absl::StatusOr<std::string> gz = GzipCompress(json);
  if (!gz.ok()) return gz.status();
  return env->WriteFileAtomic(JoinPath(dir, TraceJsonGzFileName(host)), *gz);
}

}  // namespace pstrain
