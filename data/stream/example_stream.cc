#include "data/stream/example_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/stream/example_stream_reader.h"

namespace pstrain {
namespace {

// A tabular Dataset with no examples, shaped as `like`.
Dataset EmptyLike(const Dataset& like) {
  Dataset out;
  out.tabular = true;
  out.num_dense = like.num_dense;
  out.label_width = like.label_width;
  out.sparse.resize(like.sparse.size());
  for (size_t c = 0; c < like.sparse.size(); ++c) {
    out.sparse[c].name = like.sparse[c].name;
    out.sparse[c].kind = like.sparse[c].kind;
  }
  return out;
}

void AppendExample(const Dataset& from, int64_t i, Dataset* to) {
  to->labels.insert(to->labels.end(), from.labels.begin() + i * from.label_width,
                    from.labels.begin() + (i + 1) * from.label_width);
  to->dense.insert(to->dense.end(), from.dense.begin() + i * from.num_dense,
                   from.dense.begin() + (i + 1) * from.num_dense);
  for (size_t c = 0; c < from.sparse.size(); ++c) to->sparse[c].AppendExample(from.sparse[c], i);
}

}  // namespace

ExampleStream::ExampleStream(std::unique_ptr<Reader> reader) : reader_(std::move(reader)) {}
ExampleStream::~ExampleStream() = default;

absl::StatusOr<std::unique_ptr<ExampleStream>> ExampleStream::Create(
    Env* env, ExampleStreamOptions options, const InputPosition& position) {
  if (options.files.empty() && options.follow_list.empty()) {
    return absl::InvalidArgumentError("an input stream of no files");
  }
  if (!options.follow_list.empty() && options.redeal.has_value()) {
    return absl::InvalidArgumentError("a stream that follows new files is not re-dealt");
  }
  if (options.batch_size < 1 || options.num_replicas < 1 || options.replica < 0 ||
      options.replica >= options.num_replicas || options.cycle_length < 1 ||
      options.shuffle_buffer < 0 || options.num_epochs < 0 || options.max_bad_records < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input stream options: batch_size ", options.batch_size, ", replica ", options.replica,
        " of ", options.num_replicas, ", cycle_length ", options.cycle_length, ", shuffle_buffer ",
        options.shuffle_buffer, ", num_epochs ", options.num_epochs,
        " (sizes at least 1, a replica in [0, replicas), counts not negative)"));
  }
  if (options.format == ExampleFormat::kTfExamples) {
    PSTRAIN_RETURN_IF_ERROR(CheckTabularFeatures(options.features));
  }
  if (options.redeal.has_value()) {
    if (options.files.size() < static_cast<size_t>(options.num_replicas)) {
      return absl::InvalidArgumentError(
          absl::StrCat("input files re-dealt among ", options.num_replicas, " replicas: only ",
                       options.files.size(), " files (a re-deal needs a file per replica)"));
    }
    for (const FilePiece& p : options.redeal->pieces) {
      if (p.file < 0 || p.file >= static_cast<int64_t>(options.files.size()) || p.record < 0) {
        return absl::InvalidArgumentError(absl::StrCat("a re-dealt piece of file ", p.file, " of ",
                                                       options.files.size(), " input files"));
      }
    }
  }
  if (options.format == ExampleFormat::kCsv) {
    if (!options.csv.has_value()) {
      return absl::InvalidArgumentError("CSV input without a schema (csv_schema)");
    }
    PSTRAIN_RETURN_IF_ERROR(CheckCsvSchema(*options.csv));
  }
  auto reader = std::make_unique<Reader>(env, std::move(options));
  PSTRAIN_RETURN_IF_ERROR(reader->Start(position));
  return std::unique_ptr<ExampleStream>(new ExampleStream(std::move(reader)));
}

absl::Status ExampleStream::Next(Dataset* batch) {
  const int batch_size = reader_->batch_size();
  const auto hand_out = [&] {
    *batch = std::move(pending_);
    pending_ = Dataset();
    pending_started_ = false;
    return absl::OkStatus();
  };
  while (true) {
    if (window_ == nullptr || window_->taken == static_cast<int64_t>(window_->order.size())) {
      if (window_ != nullptr && !window_->error.ok()) {
        pending_started_ = false;
        return window_->error;
      }
      if (window_ != nullptr && window_->last) {
        if (pending_started_) return hand_out();  // the last, short batch
        return absl::OutOfRangeError("the input's last epoch is done");
      }
      if (reader_->following()) {
        std::unique_ptr<Window> w = reader_->TakeFor(1.0);
        if (w == nullptr) {
          // Only when every listed file is read: a window slow to read is
          // waited for.
          if (reader_->CaughtUp()) return WaitingForInputError("waiting for new input files");
          continue;
        }
        window_ = std::move(w);
      } else {
        window_ = reader_->Take();
      }
      continue;
    }
    if (!pending_started_) {
      pending_ = EmptyLike(window_->examples);
      pending_started_ = true;
    }
    // A column's kind is fixed by the first example with values (an earlier
    // window may have had none).
    for (size_t c = 0; c < pending_.sparse.size(); ++c) {
      if (pending_.sparse[c].values.empty()) {
        pending_.sparse[c].kind = window_->examples.sparse[c].kind;
      }
    }
    while (window_->taken < static_cast<int64_t>(window_->order.size()) &&
           pending_.size() < batch_size) {
      AppendExample(window_->examples, window_->order[window_->taken++], &pending_);
      ++examples_;
    }
    if (pending_.size() == batch_size) return hand_out();
  }
}

InputPosition ExampleStream::position() const {
  if (window_ == nullptr) return reader_->StartPosition();
  InputPosition p = window_->start;
  p.taken = window_->taken;
  return p;
}

InputProgress ExampleStream::progress() const {
  InputProgress p = reader_->progress();
  p.examples = examples_;
  return p;
}

}  // namespace pstrain
