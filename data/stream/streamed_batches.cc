#include "data/stream/streamed_batches.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "data/tabular.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

constexpr char kHeader[] = "pstrain input positions v1";

// What decides the batches: `replicas` adds the replica, their number and
// a re-deal (in the order logs written before re-deals existed have).
std::string StreamKey(const ExampleStreamOptions& o, bool replicas) {
  std::string key = absl::StrCat(static_cast<int>(o.format), " ");
  if (replicas) absl::StrAppend(&key, o.replica, " ", o.num_replicas, " ");
  absl::StrAppend(&key, o.seed, " ", o.shuffle_buffer, " ", o.cycle_length, " ", o.batch_size, " ",
                  o.features.num_dense);
  for (const std::string& f : o.features.sparse) absl::StrAppend(&key, " ", f);
  if (o.follow_list.empty()) {
    // The files' order: as given (the key of logs from before shuffle_files,
    // when the order did not depend on it), drawn per epoch, or as given
    // where a shuffle_buffer once shuffled each replica's files.
    if (o.shuffle_files) {
      absl::StrAppend(&key, " files shuffled");
    } else if (o.shuffle_buffer > 0) {
      absl::StrAppend(&key, " files in order");
    }
    for (const std::string& f : o.files) absl::StrAppend(&key, "\n", f);
  } else {
    absl::StrAppend(&key, "\nfollow ", o.follow_list);  // its files only grow
  }
  if (replicas && o.redeal.has_value()) {
    absl::StrAppend(&key, "\nredeal ", o.redeal->epoch, " ", o.redeal->first_batch);
    for (const FilePiece& p : o.redeal->pieces) {
      absl::StrAppend(&key, " ", p.file, ":", p.offset, ":", p.record);
    }
  }
  return key;
}

}  // namespace

uint64_t StreamFingerprint(const ExampleStreamOptions& o) {
  return StableNameHash(StreamKey(o, true));
}

uint64_t StreamBaseFingerprint(const ExampleStreamOptions& o) {
  return StableNameHash(StreamKey(o, false));
}

std::string PositionLogAbout(const ExampleStreamOptions& o) {
  return absl::StrCat("replica=", o.replica, " replicas=", o.num_replicas,
                      " base=", StreamBaseFingerprint(o));
}

InputPositionLog::InputPositionLog(Env* env, std::string path, uint64_t fingerprint, int64_t every,
                                   int keep, std::string about)
    : env_(env),
      path_(std::move(path)),
      fingerprint_(fingerprint),
      about_(std::move(about)),
      every_(std::max<int64_t>(1, every)),
      keep_(std::max(1, keep)) {}

absl::Status InputPositionLog::Load(std::string* note) {
  entries_.clear();
  note->clear();
  if (!env_->FileExists(path_)) return absl::OkStatus();
  PSTRAIN_ASSIGN_OR_RETURN(const std::string text, env_->ReadFile(path_));
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  const std::string header = absl::StrCat(kHeader, " ", fingerprint_);
  if (lines.empty() || lines[0] != header) {
    *note =
        absl::StrCat(path_,
                     " was written for other input settings (files, their order, replicas, seed, "
                     "shuffle_buffer, cycle_length or batch_size); its positions are not used");
    return absl::OkStatus();
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    if (absl::StartsWith(lines[i], "#")) continue;
    const size_t space = lines[i].find(' ');
    int64_t n = 0;
    absl::StatusOr<InputPosition> p =
        space == absl::string_view::npos
            ? absl::InvalidArgumentError("no position")
            : InputPosition::FromString(
                  std::string_view(lines[i].data() + space + 1, lines[i].size() - space - 1));
    if (!p.ok() || !absl::SimpleAtoi(lines[i].substr(0, space), &n) || n < 0 ||
        (!entries_.empty() && n <= entries_.back().first)) {
      return absl::DataLossError(
          absl::StrCat(path_, ": line ", i + 1, " is not a position (",
                       p.ok() ? "batch numbers out of order" : p.status().message(),
                       "); delete the file to start the input over"));
    }
    entries_.emplace_back(n, *std::move(p));
  }
  return absl::OkStatus();
}

std::optional<std::pair<int64_t, InputPosition>> InputPositionLog::Find(int64_t n) const {
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->first <= n) return *it;
  }
  return std::nullopt;
}

absl::Status InputPositionLog::Record(int64_t n, const InputPosition& position, bool always) {
  if (n % every_ != 0 && !always) return absl::OkStatus();
  while (!entries_.empty() && entries_.back().first >= n) entries_.pop_back();
  entries_.emplace_back(n, position);
  if (static_cast<int>(entries_.size()) > keep_) {
    entries_.erase(entries_.begin(), entries_.end() - keep_);
  }
  std::string text = absl::StrCat(kHeader, " ", fingerprint_, "\n");
  if (!about_.empty()) absl::StrAppend(&text, "# ", about_, "\n");
  for (const auto& [batch, p] : entries_) absl::StrAppend(&text, batch, " ", p.ToString(), "\n");
  return env_->WriteFileAtomic(path_, text);
}

absl::StatusOr<std::unique_ptr<StreamedBatches>> StreamedBatches::Start(
    Env* env, const ExampleStreamOptions& options, std::vector<std::string> sparse_features,
    int64_t first, InputPositionLog* log) {
  InputPosition position;
  int64_t at = 0;
  std::optional<std::pair<int64_t, InputPosition>> found;
  if (log != nullptr) found = log->Find(first);
  if (options.redeal.has_value() &&
      (!found.has_value() || found->first < options.redeal->first_batch)) {
    if (first < options.redeal->first_batch) {
      return absl::InvalidArgumentError(absl::StrCat(
          "replica ", options.replica, "'s batch ", first,
          " is before its re-dealt input begins (batch ", options.redeal->first_batch, ")"));
    }
    found.emplace(options.redeal->first_batch, InputPosition());
    found->second.epoch = options.redeal->epoch;
  }
  if (found.has_value()) {
    at = found->first;
    position = found->second;
  }
  if (first > at) {
    LOG(INFO) << "input: replica " << options.replica << " reads from "
              << (at > 0 ? absl::StrCat("its saved position at batch ", at)
                         : std::string("the start of its files"))
              << " to its batch " << first << " (" << first - at << " batches read past)";
    if (at == 0 && first > 1000) {
      LOG(WARNING) << "input: no saved position at or before batch " << first
                   << (log != nullptr ? absl::StrCat(" in ", log->path()) : std::string())
                   << ": reading " << first << " batches from the start";
    }
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ExampleStream> stream,
                           ExampleStream::Create(env, options, position));
  std::unique_ptr<StreamedBatches> batches(new StreamedBatches(
      std::move(stream), std::move(sparse_features), at, log, options.batch_size));
  batches->following_ = !options.follow_list.empty();
  // The batches between the saved position and `first`, read past. A
  // stream that ends first (a replica restarted after its input ended)
  // gives a source whose input has ended.
  Dataset skipped;
  for (; batches->next_ < first; ++batches->next_) {
    absl::Status s = batches->stream_->Next(&skipped);
    if (absl::IsOutOfRange(s) || (s.ok() && skipped.size() < options.batch_size)) {
      batches->ended_ = true;
      break;
    }
    if (IsWaitingForInput(s)) {
      // Following new files, and every one listed is read (an async
      // replica's batch number is an estimate): it trains on from here,
      // the batch begun kept.
      LOG(INFO) << "input: replica " << options.replica << " has read every file listed by its "
                << "batch " << batches->next_ << " (of " << first
                << " to read past); it goes on from there";
      batches->waiting_ = true;
      break;
    }
    PSTRAIN_RETURN_IF_ERROR(s);
  }
  return batches;
}

absl::Status StreamedBatches::NextBatch(float* images, float* labels, SparseBatch* sparse) {
  if (ended_) return absl::OutOfRangeError("the input's last epoch is done");
  if (log_ != nullptr && !waiting_) {
    // Where this batch begins; a replica that cannot write it trains on
    // (a restart then reads from an earlier position).
    // Following new files, the first batch of every window too: a window
    // is re-read the same only from its own position (which says the
    // files it could see).
    const InputPosition at = stream_->position();
    const bool new_window = following_ && at.window != logged_window_;
    logged_window_ = at.window;
    if (absl::Status s = log_->Record(next_, at, /*always=*/new_window); !s.ok()) {
      LOG_EVERY_N(WARNING, 100) << "cannot save the input position: " << s.message();
    }
  }
  absl::Status read = stream_->Next(&batch_);
  // Waiting for new files: the batch begun goes on at the next call.
  waiting_ = IsWaitingForInput(read);
  PSTRAIN_RETURN_IF_ERROR(read);
  const size_t width = static_cast<size_t>(batch_.label_width);
  if (!label_classes_.empty() && label_classes_.size() != width) {
    return absl::InvalidArgumentError(absl::StrCat("the input files hold ", width,
                                                   " labels per example, but the model has ",
                                                   label_classes_.size(), " heads"));
  }
  if (!label_classes_.empty()) {
    for (size_t i = 0; i < batch_.labels.size(); ++i) {
      const int classes = label_classes_[i % width];
      if (classes > 0 && (batch_.labels[i] < 0 || batch_.labels[i] >= classes)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the input files hold a label of ", batch_.labels[i],
            width > 1 ? absl::StrCat(" (label ", i % width + 1, " of ", width, ")") : "",
            " (in the batch of step ", next_, "), but the model takes classes 0 to ", classes - 1,
            " (0 or 1 for a click model): fix the label column or the model's head"));
      }
    }
  }
  if (batch_.size() < batch_size_) {
    // The last epoch's last examples, fewer than a batch: dropped, as
    // tf.data's batch(drop_remainder=True) drops them (a step trains on a
    // whole batch).
    LOG(INFO) << "input: the last " << batch_.size() << " examples (fewer than a batch of "
              << batch_size_ << ") are not trained on";
    return absl::OutOfRangeError("the input's last epoch is done");
  }
  ++next_;
  std::memcpy(images, batch_.dense.data(), batch_.dense.size() * sizeof(float));
  std::copy(batch_.labels.begin(), batch_.labels.end(), labels);
  if (sparse != nullptr) {
    if (columns_.empty() && !sparse_features_.empty()) {
      PSTRAIN_ASSIGN_OR_RETURN(columns_,
                               SelectSparseFeatures(batch_, sparse_features_, "the input files"));
    }
    sparse->features.resize(columns_.size());
    for (size_t i = 0; i < columns_.size(); ++i) {
      sparse->features[i] = std::move(batch_.sparse[columns_[i]]);
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain
