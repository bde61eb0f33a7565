// A task's trace in the forms TensorBoard's Profile tab opens, written beside
// the Chrome trace (common/trace.h) in the run's directory:
//   <host>.xplane.pb      an XSpace (proto/xplane.proto), what xprof /
//                         tensorboard-plugin-profile 2.19.1 and later list;
//   <host>.trace.json.gz  the Chrome trace, gzipped, what releases up to
//                         2.19.0 also open.
//
// Format note (the mapping, following xprof's xplane_to_trace_container.cc):
// one XPlane, id 0, named "/host:CPU" (the plane xprof's trace viewer reads
// as a host's threads); XSpace.hostnames = {host}. One XLine per thread (the
// trace's tid), ordered by tid: id = tid, name and display_name = the
// thread's name ("thread_name" metadata) or "thread <tid>"; timestamp_ns =
// the line's earliest event start; duration_ps = its latest end minus that.
// Each complete event ("ph": "X") is one XEvent: offset_ps from the line's
// timestamp_ns, duration_ps, metadata_id naming an XEventMetadata (one per
// distinct name, ids from 1). Events in a line are sorted by start, longer
// first at equal starts, so an enclosing event precedes those it contains
// (nesting is by time, as in the Chrome trace). Stats: "category" (the
// event's "cat", as a ref_value: a string kept as an XStatMetadata's name),
// "step_num" (args.step, xprof's name for a step number) and any other
// integer or string arg under its own name. Counter ("C"), instant ("i")
// and other phases are left out (TraceRecorder writes none), counted in
// XSpace.warnings if any come; so is a recorder's dropped_events count.
#ifndef PSTRAIN_COMMON_XPLANE_H_
#define PSTRAIN_COMMON_XPLANE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "proto/xplane.pb.h"

namespace pstrain {

// File name suffixes the profile plugin discovers (see xplane_test.cc).
inline constexpr char kXPlaneSuffix[] = ".xplane.pb";
inline constexpr char kTraceJsonGzSuffix[] = ".trace.json.gz";
// The plane of a host's threads, as xprof names it (kHostThreadsPlaneName).
inline constexpr char kHostThreadsPlaneName[] = "/host:CPU";
// Stat names.
inline constexpr char kCategoryStat[] = "category";
inline constexpr char kStepNumStat[] = "step_num";

// "<host>.xplane.pb" and "<host>.trace.json.gz".
std::string XPlaneFileName(const std::string& host);
std::string TraceJsonGzFileName(const std::string& host);

// The XSpace of one process's Chrome trace (TraceRecorder::ToJson()), as the
// format note above maps it. DataLoss if `json` is not trace-event JSON or an
// event is malformed (no name, tid, ts or dur of the right type, dur < 0);
// OutOfRange if its times do not fit in picoseconds (a window over ~100 days).
absl::StatusOr<tensorflow::profiler::XSpace> ChromeTraceToXSpace(std::string_view json,
                                                                 const std::string& host);

// Parses bytes of a `<host>.xplane.pb` and checks what every reader relies
// on: each event's metadata_id and each stat's metadata_id (and ref_value)
// name metadata of its plane, and offsets and durations are >= 0. DataLoss
// otherwise (damaged or truncated file).
absl::StatusOr<tensorflow::profiler::XSpace> ParseXSpace(std::string_view bytes);

// `data` as a gzip file (header, deflate stream, CRC-32 and size trailer).
absl::StatusOr<std::string> GzipCompress(std::string_view data);

// Writes `<dir>/<host>.xplane.pb` and `<dir>/<host>.trace.json.gz` for the
// Chrome trace `json`, each atomically (temp file + rename). `dir` must exist
// where `env` needs directories.
absl::Status WriteProfilePluginFiles(Env* env, const std::string& dir, const std::string& host,
                                     std::string_view json);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_XPLANE_H_
