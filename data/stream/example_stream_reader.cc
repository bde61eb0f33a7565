#include "data/stream/example_stream_reader.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/formats/csv_lines.h"
#include "data/stream/stream_deal.h"
#include "glog/logging.h"

namespace pstrain {

ExampleStream::Reader::Reader(Env* env, ExampleStreamOptions options)
    : env_(env),
      options_(std::move(options)),
      decoder_(options_.format, options_.features, options_.csv),
      bad_records_(options_.max_bad_records),
      list_(env, options_.follow_list, options_.poll_secs, options_.format, options_.files) {
  interleaved_ = !following() && options_.files.size() < static_cast<size_t>(options_.num_replicas);
}

absl::Status ExampleStream::Reader::Start(const InputPosition& from) {
  InputPosition position = from;
  if (options_.redeal.has_value() && position.epoch < options_.redeal->epoch) {
    position = InputPosition();
    position.epoch = options_.redeal->epoch;
  }
  if (following()) {
    position.epoch = 0;
    // The first window reads the files its position says were listed.
    PSTRAIN_RETURN_IF_ERROR(RefreshList(position.listed));
  } else {
    order_ = EpochFiles(position.epoch);
  }
  if (position.next_file > static_cast<int64_t>(order_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("input position ", position.ToString(),
                                                   ": this replica has ", order_.size(),
                                                   " files in epoch ", position.epoch));
  }
  for (const InputPosition::Open& o : position.open) {
    if (o.file >= position.next_file) {
      return absl::InvalidArgumentError(
          absl::StrCat("input position ", position.ToString(), ": an open file not yet begun"));
    }
  }
  if (following()) position.listed = static_cast<int64_t>(list_.files().size());
  start_ = position;
  at_ = position;
  at_.taken = 0;
  // Resumed inside an epoch: its examples before the position count.
  epoch_examples_ = position.next_file > 0 || position.window > 0 ? 1 : 0;
  progress_.epoch = position.epoch;
  progress_.num_epochs = options_.num_epochs;
  // Resumed: the files begun before the open ones are done.
  progress_.files_done = position.next_file - static_cast<int64_t>(position.open.size());
  progress_.files = static_cast<int64_t>(order_.size());
  progress_.fraction = static_cast<double>(progress_.files_done) /
                       static_cast<double>(std::max<size_t>(1, order_.size()));
  skip_ = position.taken;
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void ExampleStream::Reader::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::unique_ptr<ExampleStream::Window> ExampleStream::Reader::Take() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !ready_.empty(); });
  std::unique_ptr<Window> w = std::move(ready_.front());
  ready_.pop_front();
  cv_.notify_all();
  return w;
}

std::unique_ptr<ExampleStream::Window> ExampleStream::Reader::TakeFor(double secs) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::duration<double>(secs), [&] { return !ready_.empty(); })) {
    return nullptr;
  }
  std::unique_ptr<Window> w = std::move(ready_.front());
  ready_.pop_front();
  cv_.notify_all();
  return w;
}

bool ExampleStream::Reader::CaughtUp() const {
  std::lock_guard<std::mutex> lock(mu_);
  return caught_up_ && ready_.empty();
}

InputProgress ExampleStream::Reader::progress() const {
  std::lock_guard<std::mutex> lock(mu_);
  return progress_;
}

void ExampleStream::Reader::Run() {
  bool first = true;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stop_ || static_cast<int>(ready_.size()) < std::max(1, options_.prefetch_windows);
      });
      if (stop_) return;
    }
    std::unique_ptr<Window> w = ReadWindow();
    if (!w->error.ok() && options_.shuffle_buffer > 0) {
      // A window cut short by an error is not handed out: its order would
      // not be the one a resumed stream draws over the whole window.
      w->examples = Dataset();
      w->order.clear();
    }
    if (first) {
      w->taken = std::min<int64_t>(skip_, w->examples.size());
      first = false;
    }
    const bool end = w->last || !w->error.ok();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ready_.push_back(std::move(w));
    }
    cv_.notify_all();
    if (end) return;
  }
}

bool ExampleStream::Reader::Stopping() {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_;
}

std::unique_ptr<ExampleStream::Window> ExampleStream::Reader::ReadWindow() {
  auto w = std::make_unique<Window>();
  const int64_t size = options_.shuffle_buffer > 0 ? options_.shuffle_buffer : kInOrderWindow;
  absl::Status status = BeginWindow();
  w->start = at_;
  int64_t read = 0;
  size_t next_slot = 0;  // where the next round would start
  while (status.ok() && read < size && !Stopping()) {
    if (status = FillCycle(); !status.ok()) break;
    if (slots_.empty() && following()) {
      // Every file listed is read: the examples so far go out, then the
      // list is read again until it has new files.
      if (read > 0) break;
      if (status = WaitForNewFiles(); !status.ok()) break;
      // Nothing read yet: the window begins anew with the list as it is.
      w->start = at_;
      continue;
    }
    if (slots_.empty()) {
      // The epoch ended.
      if (read > 0) break;  // its last window first
      if (status = EndEpoch(); !status.ok()) break;
      if (LastEpoch()) {
        w->last = true;
        break;
      }
      NextEpoch();
      w->start = at_;
      w->start.open.clear();
      if (order_.empty()) {
        w->last = true;
        break;
      }
      continue;
    }
    next_slot = ReadRound(size, &read, &status);
  }
  EndWindow(next_slot);
  w->examples = decoder_.Take();
  w->order = WindowOrder(options_, w->start.epoch, w->start.window, w->examples.size());
  w->error = status;
  return w;
}

absl::Status ExampleStream::Reader::BeginWindow() {
  // At a window's start: at_ holds the open files' places (slots_ are
  // opened there when the stream begins).
  if (!started_) {
    const absl::Status status = OpenSlots();
    started_ = true;
    return status;
  }
  if (following()) return RefreshList();
  return absl::OkStatus();
}

absl::Status ExampleStream::Reader::WaitForNewFiles() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    caught_up_ = true;
  }
  const int64_t listed = static_cast<int64_t>(list_.files().size());
  if (waiting_logged_at_ != listed) {
    LOG(INFO) << "input: replica " << options_.replica << " of " << options_.num_replicas
              << " has read its " << order_.size() << " files of the " << listed << " listed in "
              << options_.follow_list << "; waiting for new ones";
    waiting_logged_at_ = listed;
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stop_; });
  }
  return RefreshList();
}

absl::Status ExampleStream::Reader::EndEpoch() {
  // (A re-dealt epoch may have left this replica nothing.)
  if (epoch_examples_ == 0 && !Redealt(at_.epoch)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "replica ", options_.replica, " of ", options_.num_replicas, " read no example from ",
        order_.size(), " files in epoch ", at_.epoch,
        " (the first: ", order_.empty() ? "none" : order_[0],
        "); give every replica data: files that hold examples, at least one per replica"));
  }
  epoch_examples_ = 0;
  return absl::OkStatus();
}

bool ExampleStream::Reader::LastEpoch() const {
  return options_.num_epochs > 0 && at_.epoch + 1 >= options_.num_epochs;
}

void ExampleStream::Reader::NextEpoch() {
  ++at_.epoch;
  at_.next_file = 0;
  at_.window = 0;
  order_ = EpochFiles(at_.epoch);
  std::lock_guard<std::mutex> lock(mu_);
  progress_.epoch = at_.epoch;
  progress_.files = static_cast<int64_t>(order_.size());
  progress_.files_done = 0;
  progress_.files_open = 0;
  progress_.fraction = 0;
}

size_t ExampleStream::Reader::ReadRound(int64_t size, int64_t* read, absl::Status* status) {
  size_t i = 0;
  while (i < slots_.size() && *read < size) {
    absl::StatusOr<bool> got = ReadOne(slots_[i]);
    if (!got.ok()) {
      *status = got.status();
      break;
    }
    if (!*got) {
      CloseSlot(i);
      continue;  // the next file takes its place at the end, by FillCycle
    }
    ++*read;
    ++epoch_examples_;
    ++i;
  }
  return i < slots_.size() ? i : 0;
}

void ExampleStream::Reader::EndWindow(size_t next_slot) {
  // The saved order is the reading order.
  if (next_slot > 0) {
    std::rotate(slots_.begin(), slots_.begin() + static_cast<ptrdiff_t>(next_slot), slots_.end());
  }
  at_.open.clear();
  for (const Slot& s : slots_) {
    at_.open.push_back({s.file, s.stream->offset(), s.stream->record()});
  }
  ++at_.window;
}

std::vector<std::string> ExampleStream::Reader::EpochFiles(int64_t epoch) const {
  std::vector<std::string> files;
  for (const FilePiece& p : EpochPieces(options_, epoch)) files.push_back(options_.files[p.file]);
  return files;
}

bool ExampleStream::Reader::Redealt(int64_t epoch) const {
  return options_.redeal.has_value() && epoch == options_.redeal->epoch;
}

ExampleStream::Reader::Slot ExampleStream::Reader::NewSlot(int64_t file,
                                                           std::unique_ptr<RecordStream> stream) {
  Slot s;
  s.file = file;
  absl::StatusOr<uint64_t> size = env_->FileSize(stream->path());
  if (size.ok()) s.size = *size;
  s.stream = std::move(stream);
  // A file opened past its start (a resumed stream) counts from there.
  s.counted = s.stream->file_bytes();
  return s;
}

absl::Status ExampleStream::Reader::OpenSlots() {
  slots_.clear();
  for (const InputPosition::Open& o : at_.open) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<RecordStream> stream,
                             OpenFile(order_[o.file], o.offset, o.record));
    slots_.push_back(NewSlot(o.file, std::move(stream)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RecordStream>> ExampleStream::Reader::OpenFile(
    const std::string& path, uint64_t offset, int64_t record) {
  if (options_.log_opens) {
    LOG(INFO) << "input: replica " << options_.replica << " of " << options_.num_replicas
              << " opens " << path
              << (offset > 0 ? absl::StrCat(" at offset ", offset, " (record ", record, ")")
                             : std::string())
              << " in epoch " << at_.epoch + 1;
  }
  const bool lines = options_.format != ExampleFormat::kTfExamples;
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<RecordStream> stream,
      RecordStream::Open(env_, path, options_.compression,
                         lines ? RecordFraming::kLines : RecordFraming::kTfRecord, offset, record));
  // A text file's last line may lack its '\n' (a line cut short does not
  // parse, and is named).
  if (lines) stream->AcceptUnterminatedLastLine();
  if (options_.format == ExampleFormat::kCsv) {
    PSTRAIN_ASSIGN_OR_RETURN(const std::string header,
                             ReadCsvHeader(env_, path, options_.compression, offset, stream.get()));
    PSTRAIN_RETURN_IF_ERROR(decoder_.UseCsvHeader(path, header));
  }
  return stream;
}

absl::Status ExampleStream::Reader::RefreshList(int64_t limit) {
  PSTRAIN_ASSIGN_OR_RETURN(const bool read, list_.Refresh(limit));
  if (!read) return absl::OkStatus();
  at_.listed = static_cast<int64_t>(list_.files().size());
  const size_t before = order_.size();
  order_ = ListedFilesOf(options_, list_.files());
  if (order_.size() > before) {
    waiting_logged_at_ = -1;
    std::lock_guard<std::mutex> lock(mu_);
    progress_.files = static_cast<int64_t>(order_.size());
    caught_up_ = false;
  }
  return absl::OkStatus();
}

absl::Status ExampleStream::Reader::FillCycle() {
  while (static_cast<int>(slots_.size()) < options_.cycle_length &&
         at_.next_file < static_cast<int64_t>(order_.size())) {
    const int64_t file = at_.next_file++;
    // A re-dealt piece begins where the replica that had it stopped.
    const FilePiece begin =
        Redealt(at_.epoch) ? options_.redeal->pieces[static_cast<size_t>(file)] : FilePiece();
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<RecordStream> stream,
                             OpenFile(order_[file], begin.offset, begin.record));
    slots_.push_back(NewSlot(file, std::move(stream)));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> ExampleStream::Reader::ReadOne(Slot& s) {
  while (true) {
    const uint64_t offset = s.stream->offset();
    const int64_t record = s.stream->record();
    absl::StatusOr<std::string_view> data = s.stream->Next();
    Count(s, s.stream->offset() - offset);
    if (absl::IsOutOfRange(data.status())) return false;
    if (data.ok() && options_.format == ExampleFormat::kCsv) {
      // Every replica joins a record's lines, its own or not, to find
      // where the next begins.
      data = JoinCsvRecord(s.stream.get(), *data, options_.csv->delimiter, &joined_,
                           [&](uint64_t bytes) { Count(s, bytes); });
    }
    if (!data.ok()) {
      // With max_bad_records left: a record whose data is damaged is
      // skipped; a file that cannot be read on (damaged framing, a
      // truncated gzip stream) ends here.
      PSTRAIN_RETURN_IF_ERROR(SkipBadRecord(data.status()));
      if (s.stream->SkipDamagedRecord()) continue;
      return false;
    }
    if (interleaved_ && record % options_.num_replicas != options_.replica) continue;
    absl::StatusOr<bool> appended = decoder_.Append(*data, s.stream->path(), record, offset);
    if (!appended.ok()) {
      // Nothing of it was appended: skipped, while max_bad_records lasts.
      PSTRAIN_RETURN_IF_ERROR(SkipBadRecord(appended.status()));
      continue;
    }
    if (!*appended) continue;  // a record that holds no example
    return true;
  }
}

absl::Status ExampleStream::Reader::SkipBadRecord(const absl::Status& error) {
  PSTRAIN_RETURN_IF_ERROR(bad_records_.Skip(error));
  std::lock_guard<std::mutex> lock(mu_);
  progress_.bad_records = bad_records_.skipped();
  return absl::OkStatus();
}

void ExampleStream::Reader::Count(Slot& s, uint64_t record_bytes) {
  const uint64_t now = s.stream->file_bytes();
  const double share =
      s.size > 0 ? std::min(1.0, static_cast<double>(now) / static_cast<double>(s.size)) : 0;
  std::lock_guard<std::mutex> lock(mu_);
  progress_.bytes += record_bytes;
  progress_.files_open = static_cast<int64_t>(slots_.size());
  progress_.file_bytes += now - s.counted;
  progress_.fraction += (share - s.share) / static_cast<double>(std::max<size_t>(1, order_.size()));
  s.counted = now;
  s.share = share;
}

void ExampleStream::Reader::CloseSlot(size_t i) {
  const double share = slots_[i].share;
  slots_.erase(slots_.begin() + static_cast<ptrdiff_t>(i));
  std::lock_guard<std::mutex> lock(mu_);
  ++progress_.files_done;
  progress_.files_open = static_cast<int64_t>(slots_.size());
  progress_.fraction =
      std::min(1.0, progress_.fraction +
                        (1 - share) / static_cast<double>(std::max<size_t>(1, order_.size())));
}

}  // namespace pstrain
