#include "io/event_inspect.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/record_reader.h"
#include "common/status_macros.h"
#include "io/png.h"
#include "proto/event.pb.h"
#include "proto/graph.pb.h"

namespace pstrain {
namespace {

struct TagSummary {
  std::string kind;
  std::string detail;  // images: their size; hparams: the values
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

// What kind of value `v` is, for the listing; images must decode and hparams
// plugin data must parse (`path` and `offset` name the record otherwise).
absl::Status Describe(const tensorboard::Summary::Value& v, const std::string& path,
                      uint64_t offset, TagSummary* t) {
  auto damaged = [&](const std::string& what) {
    return absl::DataLossError(
        absl::StrCat(path, ": the record before offset ", offset, " (tag ", v.tag(), ") ", what));
  };
  if (v.has_histo()) {
    t->kind = "histogram";
    if (v.histo().bucket_size() != v.histo().bucket_limit_size()) {
      return damaged("is a histogram whose bucket and bucket_limit differ in length");
    }
  } else if (v.has_image()) {
    t->kind = "image";
    absl::StatusOr<PngImage> png = DecodePng(v.image().encoded_image_string());
    if (!png.ok()) return damaged(absl::StrCat("holds a bad image: ", png.status().message()));
    if (png->height != v.image().height() || png->width != v.image().width()) {
      return damaged("holds an image whose size differs from the summary's");
    }
    t->detail = absl::StrFormat("%dx%dx%d PNG", png->height, png->width, png->channels);
  } else if (v.metadata().plugin_data().plugin_name() == "pr_curves") {
    t->kind = "pr_curve";
    tensorboard::PrCurvePluginData data;
    if (!data.ParseFromString(v.metadata().plugin_data().content()) || data.version() != 0 ||
        data.num_thresholds() < 2) {
      return damaged("holds pr_curves plugin data that does not parse");
    }
    const tensorboard::TensorShapeProto& shape = v.tensor().tensor_shape();
    const int64_t n = data.num_thresholds();
    if (v.tensor().dtype() != 1 || shape.dim_size() != 2 || shape.dim(0).size() != 6 ||
        shape.dim(1).size() != n || v.tensor().float_val_size() != 6 * n) {
      return damaged(absl::StrCat("is not a float32 [6, ", n, "] PR curve tensor"));
    }
    t->detail = absl::StrCat(n, " thresholds");
  } else if (v.metadata().plugin_data().plugin_name() == "hparams") {
    t->kind = "hparams";
    tensorboard::HParamsPluginData data;
    if (!data.ParseFromString(v.metadata().plugin_data().content())) {
      return damaged("holds hparams plugin data that does not parse");
    }
    if (data.has_session_start_info()) {
      std::map<std::string, std::string> sorted;
      for (const auto& [name, value] : data.session_start_info().hparams()) {
        sorted[name] = value.has_string_value() ? value.string_value()
                       : value.has_bool_value() ? (value.bool_value() ? "true" : "false")
                                                : absl::StrFormat("%g", value.number_value());
      }
      t->detail.clear();
      for (const auto& [name, value] : sorted) {
        absl::StrAppend(&t->detail, t->detail.empty() ? "" : " ", name, "=", value);
      }
    } else if (data.has_session_end_info()) {
      t->detail = tensorboard::SessionStatus_Name(data.session_end_info().status());
    }
  } else {
    t->kind = "scalar";
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
    std::vector<std::string> notes;
    std::vector<std::string> graphs;  // the GraphDefs it holds, described
    for (const std::string& path : files) {
      PSTRAIN_ASSIGN_OR_RETURN(const std::string contents, env->ReadFile(path));
      RecordReader reader(contents, path);
      bool first = true;
      while (true) {
        absl::StatusOr<std::string_view> record = reader.ReadRecord();
        if (absl::IsOutOfRange(record.status())) break;
        if (!record.ok() && reader.cut_short()) {
          // A writer stopped mid-append: TensorBoard reads up to here (and
          // on, should the writer still be appending).
          notes.push_back(absl::StrCat("  note: ", record.status().message(),
                                       " (a writer stopped mid-record; everything before it "
                                       "is whole)\n"));
          break;
        }
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
        if (event.what_case() == tensorboard::Event::kGraphDef) {
          tensorboard::GraphDef graph;
          if (!graph.ParseFromString(event.graph_def())) {
            return absl::DataLossError(absl::StrCat(path, ": the record before offset ",
                                                    reader.offset(),
                                                    " holds a graph_def that does not parse"));
          }
          std::set<std::string> devices;
          for (const tensorboard::NodeDef& node : graph.node()) devices.insert(node.device());
          graphs.push_back(absl::StrFormat("  %-28s %-9s %5d nodes, %d devices, step %d\n",
                                           "(the model)", "graph", graph.node_size(),
                                           devices.size(), event.step()));
        }
        for (const tensorboard::Summary::Value& v : event.summary().value()) {
          TagSummary& t = tags[v.tag()];
          PSTRAIN_RETURN_IF_ERROR(Describe(v, path, reader.offset(), &t));
          if (t.points++ == 0) t.first_step = event.step();
          t.last_step = event.step();
          t.last_value = v.simple_value();
        }
      }
    }
    absl::StrAppend(&out, "run ", run, ": ", files.size(), " file(s), ", records,
                    " records, checksums OK\n");
    for (const std::string& note : notes) absl::StrAppend(&out, note);
    for (const std::string& graph : graphs) absl::StrAppend(&out, graph);
    for (const auto& [tag, t] : tags) {
      absl::StrAppend(&out, absl::StrFormat("  %-28s %-9s %5d points, steps %d..%d", tag, t.kind,
                                            t.points, t.first_step, t.last_step));
      if (t.kind == "scalar") absl::StrAppend(&out, absl::StrFormat(", last %.6g", t.last_value));
      if (!t.detail.empty()) absl::StrAppend(&out, ", ", t.detail);
      absl::StrAppend(&out, "\n");
    }
  }
  return out;
}

absl::StatusOr<std::map<std::string, std::vector<ScalarPoint>>> ReadEventScalars(
    Env* env, const std::string& dir) {
  std::map<std::string, std::vector<std::string>> runs;
  PSTRAIN_RETURN_IF_ERROR(FindEventFiles(env, dir, ".", &runs));
  if (runs.empty()) return absl::NotFoundError(absl::StrCat("no event files under ", dir));
  std::map<std::string, std::vector<ScalarPoint>> scalars;
  for (const auto& [run, files] : runs) {
    for (const std::string& path : files) {
      PSTRAIN_ASSIGN_OR_RETURN(const std::string contents, env->ReadFile(path));
      RecordReader reader(contents, path);
      while (true) {
        absl::StatusOr<std::string_view> record = reader.ReadRecord();
        if (absl::IsOutOfRange(record.status())) break;
        if (!record.ok() && reader.cut_short()) break;  // a writer stopped mid-record
        PSTRAIN_RETURN_IF_ERROR(record.status());
        tensorboard::Event event;
        if (!event.ParseFromArray(record->data(), static_cast<int>(record->size()))) {
          return absl::DataLossError(absl::StrCat(path, ": the record before offset ",
                                                  reader.offset(), " is not an Event"));
        }
        for (const tensorboard::Summary::Value& v : event.summary().value()) {
          TagSummary t;
          PSTRAIN_RETURN_IF_ERROR(Describe(v, path, reader.offset(), &t));
          if (t.kind != "scalar") continue;
          scalars[run == "." ? v.tag() : absl::StrCat(run, "/", v.tag())].push_back(
              ScalarPoint{event.step(), event.wall_time(), v.simple_value()});
        }
      }
    }
  }
  return scalars;
}

}  // namespace pstrain
