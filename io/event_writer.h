#ifndef PSTRAIN_IO_EVENT_WRITER_H_
#define PSTRAIN_IO_EVENT_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/env.h"
#include "common/record_writer.h"
#include "proto/event.pb.h"
#include "proto/graph.pb.h"

namespace pstrain {

// The name of a new event file: "events.out.tfevents.<10-digit unix
// time>.<host>.<pid>.<n>", the trailing pid and counter keeping two writers
// apart (TensorBoard reads every file whose name contains "tfevents").
std::string EventFileName(absl::Time now, const std::string& host, int pid, int n);

// A histogram of `values` in `buckets` equal-width buckets between their
// min and max (one bucket if they are all equal).
tensorboard::HistogramProto MakeHistogram(absl::Span<const float> values, int buckets = 30);

// Writes one TensorBoard event file: TFRecord-framed Event records, the
// first one carrying file_version "brain.Event:2". Each record goes to the
// file in one append, and buffered records reach the OS at least every
// `flush_interval` (at the write after it) and on Flush/Close, so a crash
// leaves whole records with at most one cut record at the end. Not
// thread-safe.
class EventWriter {
 public:
  // Creates `dir` if needed and a new file in it.
  static absl::StatusOr<std::unique_ptr<EventWriter>> Create(Env* env, const std::string& dir,
                                                             absl::Duration flush_interval);
  ~EventWriter();  // Flushes.

  absl::Status WriteScalar(const std::string& tag, int64_t step, float value);
  absl::Status WriteHistogram(const std::string& tag, int64_t step, absl::Span<const float> values);
  // A PNG-encoded 8-bit HWC image (1, 3 or 4 channels), as TF1's
  // tf.summary.image writes it (tag "<name>/image/<i>").
  absl::Status WriteImage(const std::string& tag, int64_t step, int height, int width, int channels,
                          absl::Span<const uint8_t> pixels);
  // A precision-recall curve for TensorBoard's PR CURVES tab (pr_curves
  // plugin data version 0): `curve` is PrCurve's 6 x num_thresholds floats
  // (data/binary_metrics.h).
  absl::Status WritePrCurve(const std::string& tag, int64_t step, absl::Span<const float> curve,
                            int num_thresholds);
  // The run's hyperparameters for TensorBoard's HPARAMS tab (hparams plugin
  // data version 0, tag "_hparams_/session_start_info", at step 0), and how
  // the run ended ("_hparams_/session_end_info"). The tab lists each run
  // holding a session start, with the scalars of that run and of its
  // subdirectories (e.g. eval/accuracy) as metrics.
  absl::Status WriteSessionStart(
      const google::protobuf::Map<std::string, google::protobuf::Value>& hparams,
      const std::string& model_uri, absl::Time start);
  absl::Status WriteSessionEnd(tensorboard::SessionStatus status, absl::Time end);
  // The model's graph for TensorBoard's GRAPHS tab (Event.graph_def, as
  // tf.summary.FileWriter(graph=...) writes it), at step 0.
  absl::Status WriteGraph(const tensorboard::GraphDef& graph);
  // Any event; wall_time is set to now if it is 0.
  absl::Status WriteEvent(tensorboard::Event event);
  absl::Status Flush();

  const std::string& path() const { return path_; }

 private:
  EventWriter(std::string path, std::unique_ptr<WritableFile> file, absl::Duration flush_interval);

  const std::string path_;
  std::unique_ptr<WritableFile> file_;
  RecordWriter records_;
  const absl::Duration flush_interval_;
  absl::Time last_flush_;
};

}  // namespace pstrain

#endif  // PSTRAIN_IO_EVENT_WRITER_H_
