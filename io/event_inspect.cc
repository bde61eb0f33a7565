#include "io/event_inspect.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "io/record_reader.h"
#include "proto/event.pb.h"

namespace pstrain {
namespace {

struct TagSummary {
  std::string kind;
  int64_t points = 0;
  int64_t first_step = 0;
  int64_t last_step = 0;
  float last_value = 0;
};

// Event files under `dir` (recursively), by run (the directory relative to
// the root, "." for the root).
absl::Status FindEventFiles(Env* env, const std::string& root, const std::string& relative,
                            std::map<std::string, std::vector<std::string>>* runs) {
  const std::string dir = relative == "." ? root : JoinPath(root, relative);
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string path = JoinPath(dir, name);
    if (name.find("tfevents") != std::string::npos) {
      (*runs)[relative].push_back(path);
    } else if (env->ListDir(path).ok()) {
      PSTRAIN_RETURN_IF_ERROR(
          FindEventFiles(env, root, relative == "." ? name : JoinPath(relative, name), runs));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> InspectEventDir(Env* env, const std::string& dir) {
  std::map<std::string, std::vector<std::string>> runs;
  PSTRAIN_RETURN_IF_ERROR(FindEventFiles(env, dir, ".", &runs));
  if (runs.empty()) return absl::NotFoundError(absl::StrCat("no event files under ", dir));
  std::string out;
  for (const auto& [run, files] : runs) {
    std::map<std::string, TagSummary> tags;
    int64_t records = 0;
    for (const std::string& path : files) {
      PSTRAIN_ASSIGN_OR_RETURN(const std::string contents, env->ReadFile(path));
      RecordReader reader(contents, path);
      bool first = true;
      while (true) {
        absl::StatusOr<std::string_view> record = reader.ReadRecord();
        if (absl::IsOutOfRange(record.status())) break;
        PSTRAIN_RETURN_IF_ERROR(record.status());
        tensorboard::Event event;
        if (!event.ParseFromArray(record->data(), static_cast<int>(record->size()))) {
          return absl::DataLossError(absl::StrCat(path, ": the record before offset ",
                                                  reader.offset(), " is not an Event"));
        }
        if (first && event.file_version() != "brain.Event:2") {
          return absl::DataLossError(
              absl::StrCat(path, ": the first record has no file_version \"brain.Event:2\""));
        }
        first = false;
        ++records;
        for (const tensorboard::Summary::Value& v : event.summary().value()) {
          TagSummary& t = tags[v.tag()];
          t.kind = v.has_histo() ? "histogram" : v.has_image() ? "image" : "scalar";
          if (t.points++ == 0) t.first_step = event.step();
          t.last_step = event.step();
          t.last_value = v.simple_value();
        }
      }
    }
    absl::StrAppend(&out, "run ", run, ": ", files.size(), " file(s), ", records,
                    " records, checksums OK\n");
    for (const auto& [tag, t] : tags) {
      absl::StrAppend(&out, absl::StrFormat("  %-28s %-9s %5d points, steps %d..%d", tag, t.kind,
                                            t.points, t.first_step, t.last_step));
      if (t.kind == "scalar") absl::StrAppend(&out, absl::StrFormat(", last %.6g", t.last_value));
      absl::StrAppend(&out, "\n");
    }
  }
  return out;
}

}  // namespace pstrain
