#include "io/event_writer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace pstrain {

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
  if (event.wall_time() == 0)
    event.set_wall_time(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
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

absl::Status EventWriter::Flush() {
  last_flush_ = absl::Now();
  return file_->Flush();
}

}  // namespace pstrain
