#include "io/event_writer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "io/png.h"

namespace pstrain {
namespace {

double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

}  // namespace

std::string EventFileName(absl::Time now, const std::string& host, int pid, int n) {
  return absl::StrFormat("events.out.tfevents.%010d.%s.%d.%d", absl::ToUnixSeconds(now), host, pid,
                         n);
}

tensorboard::HistogramProto MakeHistogram(absl::Span<const float> values, int buckets) {
  tensorboard::HistogramProto h;
  if (values.empty()) return h;
  double lo = values[0], hi = values[0], sum = 0, squares = 0;
  for (float v : values) {
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
    sum += v;
    squares += static_cast<double>(v) * v;
  }
  h.set_min(lo);
  h.set_max(hi);
  h.set_num(static_cast<double>(values.size()));
  h.set_sum(sum);
  h.set_sum_squares(squares);
  const int n = hi > lo ? std::max(buckets, 1) : 1;
  std::vector<double> counts(n, 0.0);
  const double width = (hi - lo) / n;
  for (float v : values) {
    int b = width > 0 ? static_cast<int>((v - lo) / width) : 0;
    counts[std::clamp(b, 0, n - 1)] += 1;
  }
  for (int b = 0; b < n; ++b) {
    h.add_bucket_limit(b == n - 1 ? hi : lo + width * (b + 1));
    h.add_bucket(counts[b]);
  }
  return h;
}

absl::StatusOr<std::unique_ptr<EventWriter>> EventWriter::Create(Env* env, const std::string& dir,
                                                                 absl::Duration flush_interval) {
  static std::atomic<int> counter{0};  // Writers of this process, for unique names.
  PSTRAIN_RETURN_IF_ERROR(env->CreateDirs(dir));
  char host[256] = "localhost";
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  const std::string path =
      JoinPath(dir, EventFileName(absl::Now(), host, static_cast<int>(getpid()), counter++));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewWritableFile(path));
  std::unique_ptr<EventWriter> writer(new EventWriter(path, std::move(file), flush_interval));
  tensorboard::Event first;
  first.set_file_version("brain.Event:2");
  PSTRAIN_RETURN_IF_ERROR(writer->WriteEvent(first));
  PSTRAIN_RETURN_IF_ERROR(writer->Flush());
  return writer;
}

EventWriter::EventWriter(std::string path, std::unique_ptr<WritableFile> file,
                         absl::Duration flush_interval)
    : path_(std::move(path)),
      file_(std::move(file)),
      records_(file_.get()),
      flush_interval_(flush_interval),
      last_flush_(absl::Now()) {}

EventWriter::~EventWriter() {
  Flush().IgnoreError();
  file_->Close().IgnoreError();
}

absl::Status EventWriter::WriteEvent(tensorboard::Event event) {
  if (event.wall_time() == 0) event.set_wall_time(UnixSeconds(absl::Now()));
  PSTRAIN_RETURN_IF_ERROR(records_.WriteRecord(event.SerializeAsString()));
  if (absl::Now() - last_flush_ >= flush_interval_) return Flush();
  return absl::OkStatus();
}

absl::Status EventWriter::WriteScalar(const std::string& tag, int64_t step, float value) {
  tensorboard::Event event;
  event.set_step(step);
  tensorboard::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(value);
  return WriteEvent(std::move(event));
}

absl::Status EventWriter::WriteHistogram(const std::string& tag, int64_t step,
                                         absl::Span<const float> values) {
  tensorboard::Event event;
  event.set_step(step);
  tensorboard::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  *v->mutable_histo() = MakeHistogram(values);
  return WriteEvent(std::move(event));
}

absl::Status EventWriter::WriteGraph(const tensorboard::GraphDef& graph) {
  tensorboard::Event event;
  event.set_step(0);
  event.set_graph_def(graph.SerializeAsString());
  return WriteEvent(std::move(event));
}

absl::Status EventWriter::WritePrCurve(const std::string& tag, int64_t step,
                                       absl::Span<const float> curve, int num_thresholds) {
  if (num_thresholds < 2 || curve.size() != 6 * static_cast<size_t>(num_thresholds)) {
    return absl::InvalidArgumentError(absl::StrCat("a PR curve of ", curve.size(), " values for ",
                                                   num_thresholds,
                                                   " thresholds; it has 6 rows of them"));
  }
  tensorboard::Event event;
  event.set_step(step);
  tensorboard::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  tensorboard::PrCurvePluginData data;
  data.set_version(0);
  data.set_num_thresholds(static_cast<uint32_t>(num_thresholds));
  tensorboard::SummaryMetadata::PluginData* plugin = v->mutable_metadata()->mutable_plugin_data();
  plugin->set_plugin_name("pr_curves");
  plugin->set_content(data.SerializeAsString());
  tensorboard::TensorProto* tensor = v->mutable_tensor();
  tensor->set_dtype(1);  // DT_FLOAT
  tensor->mutable_tensor_shape()->add_dim()->set_size(6);
  tensor->mutable_tensor_shape()->add_dim()->set_size(num_thresholds);
  tensor->mutable_float_val()->Add(curve.begin(), curve.end());
  return WriteEvent(std::move(event));
}

absl::Status EventWriter::WriteImage(const std::string& tag, int64_t step, int height, int width,
                                     int channels, absl::Span<const uint8_t> pixels) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string png, EncodePng(height, width, channels, pixels));
  tensorboard::Event event;
  event.set_step(step);
  tensorboard::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  tensorboard::Summary::Image* image = v->mutable_image();
  image->set_height(height);
  image->set_width(width);
  image->set_colorspace(channels);
  image->set_encoded_image_string(std::move(png));
  return WriteEvent(std::move(event));
}

namespace {

// A Summary.Value as TensorBoard's hparams summaries write it: the plugin
// data in the metadata, an empty float tensor as the value.
tensorboard::Event HParamsEvent(const std::string& tag,
                                const tensorboard::HParamsPluginData& data) {
  tensorboard::Event event;
  event.set_step(0);
  tensorboard::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  tensorboard::SummaryMetadata::PluginData* plugin = v->mutable_metadata()->mutable_plugin_data();
  plugin->set_plugin_name("hparams");
  plugin->set_content(data.SerializeAsString());
  tensorboard::TensorProto* tensor = v->mutable_tensor();
  tensor->set_dtype(1);  // DT_FLOAT
  tensor->mutable_tensor_shape()->add_dim()->set_size(0);
  return event;
}

}  // namespace

absl::Status EventWriter::WriteSessionStart(
    const google::protobuf::Map<std::string, google::protobuf::Value>& hparams,
    const std::string& model_uri, absl::Time start) {
  tensorboard::HParamsPluginData data;
  data.set_version(0);
  tensorboard::SessionStartInfo* info = data.mutable_session_start_info();
  *info->mutable_hparams() = hparams;
  info->set_model_uri(model_uri);
  info->set_start_time_secs(UnixSeconds(start));
  return WriteEvent(HParamsEvent("_hparams_/session_start_info", data));
}

absl::Status EventWriter::WriteSessionEnd(tensorboard::SessionStatus status, absl::Time end) {
  tensorboard::HParamsPluginData data;
  data.set_version(0);
  tensorboard::SessionEndInfo* info = data.mutable_session_end_info();
  info->set_status(status);
  info->set_end_time_secs(UnixSeconds(end));
  return WriteEvent(HParamsEvent("_hparams_/session_end_info", data));
}

absl::Status EventWriter::Flush() {
  last_flush_ = absl::Now();
  return file_->Flush();
}

}  // namespace pstrain
