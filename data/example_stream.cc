#include "data/example_stream.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "data/criteo.h"
#include "data/criteo_dataset.h"
#include "data/file_list.h"
#include "data/record_stream.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

uint64_t Draw(uint64_t* state, uint64_t n) { return SplitMix64Next(state) % n; }

// A tabular Dataset with no examples, shaped as `like`.
Dataset EmptyLike(const Dataset& like) {
  Dataset out;
  out.tabular = true;
  out.num_dense = like.num_dense;
  out.sparse.resize(like.sparse.size());
  for (size_t c = 0; c < like.sparse.size(); ++c) {
    out.sparse[c].name = like.sparse[c].name;
    out.sparse[c].kind = like.sparse[c].kind;
  }
  return out;
}

void AppendExample(const Dataset& from, int64_t i, Dataset* to) {
  to->labels.push_back(from.labels[i]);
  to->dense.insert(to->dense.end(), from.dense.begin() + i * from.num_dense,
                   from.dense.begin() + (i + 1) * from.num_dense);
  for (size_t c = 0; c < from.sparse.size(); ++c) to->sparse[c].AppendExample(from.sparse[c], i);
}

}  // namespace

std::vector<FilePiece> EpochPieces(const ExampleStreamOptions& o, int64_t epoch) {
  if (o.redeal.has_value() && epoch == o.redeal->epoch) return o.redeal->pieces;
  std::vector<FilePiece> pieces;
  const size_t replicas = static_cast<size_t>(std::max(1, o.num_replicas));
  for (size_t i = 0; i < o.files.size(); ++i) {
    if (o.files.size() < replicas || i % replicas == static_cast<size_t>(o.replica)) {
      pieces.push_back({static_cast<int64_t>(i), 0, 0});
    }
  }
  if (o.shuffle_buffer > 0) {
    uint64_t state = MixBits64(o.seed ^ MixBits64(static_cast<uint64_t>(epoch) + 1) ^
                               (static_cast<uint64_t>(o.replica) << 32));
    for (size_t i = pieces.size(); i > 1; --i) std::swap(pieces[i - 1], pieces[Draw(&state, i)]);
  }
  return pieces;
}

std::string InputPosition::ToString() const {
  std::vector<std::string> files;
  for (const Open& o : open) files.push_back(absl::StrCat(o.file, ":", o.offset, ":", o.record));
  return absl::StrCat("epoch=", epoch, " next_file=", next_file, " window=", window,
                      " taken=", taken, listed > 0 ? absl::StrCat(" listed=", listed) : "",
                      " open=", absl::StrJoin(files, ","));
}

absl::StatusOr<InputPosition> InputPosition::FromString(std::string_view view) {
  const absl::string_view text(view.data(), view.size());
  InputPosition p;
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("input position \"", text, "\": ", why));
  };
  int fields = 0;
  for (absl::string_view item : absl::StrSplit(text, ' ', absl::SkipWhitespace())) {
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos) return bad(absl::StrCat("\"", item, "\" is not key=value"));
    const absl::string_view key = item.substr(0, eq);
    const absl::string_view value = item.substr(eq + 1);
    // Each key once: epoch, next_file, window, taken and open, and listed
    // if following.
    const int bit = key == "epoch"       ? 1
                    : key == "next_file" ? 2
                    : key == "window"    ? 4
                    : key == "taken"     ? 8
                    : key == "open"      ? 16
                    : key == "listed"    ? 32
                                         : 0;
    if (bit != 0 && (fields & bit) != 0) return bad(absl::StrCat(key, " twice"));
    fields |= bit;
    if (key == "open") {
      for (absl::string_view f : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        std::vector<absl::string_view> parts = absl::StrSplit(f, ':');
        Open o;
        if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &o.file) ||
            !absl::SimpleAtoi(parts[1], &o.offset) || !absl::SimpleAtoi(parts[2], &o.record) ||
            o.file < 0 || o.record < 0) {
          return bad(absl::StrCat("\"", f, "\" is not file:offset:record"));
        }
        p.open.push_back(o);
      }
      continue;
    }
    int64_t* target = key == "epoch"       ? &p.epoch
                      : key == "next_file" ? &p.next_file
                      : key == "window"    ? &p.window
                      : key == "taken"     ? &p.taken
                      : key == "listed"    ? &p.listed
                                           : nullptr;
    if (target == nullptr) return bad(absl::StrCat("unknown key \"", key, "\""));
    if (!absl::SimpleAtoi(value, target) || *target < 0) {
      return bad(absl::StrCat(key, " is not a count"));
    }
  }
  if ((fields & 31) != 31) return bad("needs epoch, next_file, window, taken and open");
  return p;
}

// A window: examples in the order they were read, the order they are
// handed out in, and the position it began at.
struct ExampleStream::Window {
  Dataset examples;
  std::vector<int64_t> order;
  InputPosition start;
  int64_t taken = 0;
  bool last = false;   // the stream ends after it
  absl::Status error;  // after its examples: the stream fails with it
};

// Reads windows on its own thread, prefetch_windows ahead.
class ExampleStream::Reader {
 public:
  Reader(Env* env, ExampleStreamOptions options) : env_(env), options_(std::move(options)) {
    files_ = options_.files;
    interleaved_ =
        !following() && options_.files.size() < static_cast<size_t>(options_.num_replicas);
    if (options_.format == ExampleFormat::kTfExamples) {
      parser_ = std::make_unique<TabularExampleParser>(options_.features);
    }
  }
  ~Reader() { Stop(); }

  absl::Status Start(const InputPosition& from) {
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
    if (following()) position.listed = static_cast<int64_t>(files_.size());
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

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // The next window within `secs`, or null.
  std::unique_ptr<Window> TakeFor(double secs) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::duration<double>(secs), [&] { return !ready_.empty(); })) {
      return nullptr;
    }
    std::unique_ptr<Window> w = std::move(ready_.front());
    ready_.pop_front();
    cv_.notify_all();
    return w;
  }

  bool following() const { return !options_.follow_list.empty(); }

  // Following new files: the reader has read every listed file and waits
  // for more (rather than still reading a window).
  bool CaughtUp() const {
    std::lock_guard<std::mutex> lock(mu_);
    return caught_up_ && ready_.empty();
  }

  // The next window; blocks until it is read.
  std::unique_ptr<Window> Take() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !ready_.empty(); });
    std::unique_ptr<Window> w = std::move(ready_.front());
    ready_.pop_front();
    cv_.notify_all();
    return w;
  }

  std::vector<std::string> EpochFiles(int64_t epoch) const {
    std::vector<std::string> files;
    for (const FilePiece& p : EpochPieces(options_, epoch)) files.push_back(options_.files[p.file]);
    return files;
  }

  const InputPosition& StartPosition() const { return start_; }
  int batch_size() const { return options_.batch_size; }

  InputProgress progress() const {
    std::lock_guard<std::mutex> lock(mu_);
    return progress_;
  }

  bool Stopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  }

 private:
  struct Slot {
    int64_t file = 0;
    std::unique_ptr<RecordStream> stream;
    uint64_t size = 0;     // the file's, 0 if unknown
    uint64_t counted = 0;  // file_bytes already in progress_
    // Of the file read, counted in progress_.fraction: counted / size,
    // plus where it was opened.
    double share = 0;
  };

  // A slot for `stream`, file `file` of the epoch, with its size for the
  // epoch's progress (none if the Env cannot say: then a file counts once
  // it is done).
  Slot NewSlot(int64_t file, std::unique_ptr<RecordStream> stream) {
    Slot s;
    s.file = file;
    absl::StatusOr<uint64_t> size = env_->FileSize(stream->path());
    if (size.ok()) s.size = *size;
    s.stream = std::move(stream);
    // A file opened past its start (a resumed stream) counts from there.
    s.counted = s.stream->file_bytes();
    return s;
  }

  void Run() {
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

  bool Redealt(int64_t epoch) const {
    return options_.redeal.has_value() && epoch == options_.redeal->epoch;
  }

  // Opens the slots of at_.open (at a window's start they are at_'s).
  absl::Status OpenSlots() {
    slots_.clear();
    for (const InputPosition::Open& o : at_.open) {
      PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<RecordStream> stream,
                               OpenFile(order_[o.file], o.offset, o.record));
      slots_.push_back(NewSlot(o.file, std::move(stream)));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<RecordStream>> OpenFile(const std::string& path, uint64_t offset,
                                                         int64_t record) {
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
                           lines ? RecordFraming::kLines : RecordFraming::kTfRecord, offset,
                           record));
    // A text file's last line may lack its '\n' (a line cut short does not
    // parse, and is named).
    if (lines) stream->AcceptUnterminatedLastLine();
    if (options_.format == ExampleFormat::kCsv) {
      // Its first line is its header: read here, or (resumed inside the
      // file) from a look at its start.
      std::unique_ptr<RecordStream> start;
      if (offset > 0) {
        PSTRAIN_ASSIGN_OR_RETURN(
            start, RecordStream::Open(env_, path, options_.compression, RecordFraming::kLines));
        start->AcceptUnterminatedLastLine();
      }
      absl::StatusOr<std::string_view> header = (offset > 0 ? start : stream)->Next();
      if (absl::IsOutOfRange(header.status())) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": an empty CSV file (its first line is the header)"));
      }
      PSTRAIN_RETURN_IF_ERROR(header.status());
      PSTRAIN_RETURN_IF_ERROR(UseCsvHeader(path, *header));
    }
    return stream;
  }

  // Every CSV file has the first one's header; the parser is made from it.
  absl::Status UseCsvHeader(const std::string& path, std::string_view header) {
    std::string_view columns = header;
    if (columns.starts_with("\xEF\xBB\xBF")) columns.remove_prefix(3);
    if (columns.ends_with('\r')) columns.remove_suffix(1);
    if (!csv_.has_value()) {
      PSTRAIN_ASSIGN_OR_RETURN(csv_, CsvParser::Create(*options_.csv, header, path));
      csv_header_ = std::string(columns);
      csv_header_file_ = path;
      return absl::OkStatus();
    }
    if (columns != csv_header_) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": its header \"",
          absl::string_view(columns.data(), std::min<size_t>(columns.size(), 200)),
          "\" differs from that of ", csv_header_file_, " (\"", csv_header_.substr(0, 200),
          "\"): the CSV files of a job have the same columns in the same order"));
    }
    return absl::OkStatus();
  }

  // One CSV record from `s`, which began with `line` (record `record`): its
  // lines joined while a quoted field goes on (CsvRecordComplete).
  absl::StatusOr<std::string_view> JoinCsvRecord(Slot& s, std::string_view line) {
    if (CsvRecordComplete(line, options_.csv->delimiter)) return line;
    joined_.assign(line.data(), line.size());
    while (!CsvRecordComplete(joined_, options_.csv->delimiter) &&
           joined_.size() <= kCsvMaxRecordBytes) {
      const uint64_t offset = s.stream->offset();
      absl::StatusOr<std::string_view> next = s.stream->Next();
      Count(s, s.stream->offset() - offset);
      if (absl::IsOutOfRange(next.status())) break;  // AppendLine names the open quote
      PSTRAIN_RETURN_IF_ERROR(next.status());
      joined_.push_back('\n');
      joined_.append(next->data(), next->size());
    }
    if (joined_.size() > kCsvMaxRecordBytes) {
      // A quote that never closes: where the next record begins is lost,
      // so the rest of the file is damaged (skipped with max_bad_records).
      return absl::DataLossError(absl::StrCat(
          s.stream->path(), ": a record begun before offset ", s.stream->offset(),
          " has a quoted field not closed within ", kCsvMaxRecordBytes,
          " bytes: a stray '\"'? (fields with quotes in them are quoted, the quotes doubled)"));
    }
    return std::string_view(joined_);
  }

  // Following new files: reads the list again (at most every second, or
  // poll_secs), its first `limit` files if not 0, and deals its new files.
  // Only at a window's start, where at_.listed records it: a window
  // re-read from its position reads the same files. The reader thread's
  // (and Start's).
  absl::Status RefreshList(int64_t limit = 0) {
    const auto now = std::chrono::steady_clock::now();
    if (listed_ && now - last_listed_ < std::chrono::duration<double>(
                                            std::min(1.0, std::max(0.01, options_.poll_secs)))) {
      return absl::OkStatus();
    }
    listed_ = true;
    last_listed_ = now;
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> files,
                             ReadFileList(env_, options_.follow_list));
    if (limit > 0 && static_cast<int64_t>(files.size()) >= limit) files.resize(limit);
    if (limit > 0 ? static_cast<int64_t>(files.size()) < limit : files.size() < files_.size()) {
      return absl::DataLossError(
          absl::StrCat(options_.follow_list, " lists ", files.size(), " files, fewer than the ",
                       std::max<int64_t>(limit, static_cast<int64_t>(files_.size())),
                       " it listed before: its files keep their places"));
    }
    // Files of another format than the stream's are refused, not misread.
    for (size_t i = files_.size(); i < files.size(); ++i) {
      if (const ExampleFormat format = ExampleFormatOfFile(files[i]); format != options_.format) {
        return absl::InvalidArgumentError(absl::StrCat(
            files[i], ", listed in ", options_.follow_list, ", is ", ExampleFormatName(format),
            " by its name, but this stream reads ", ExampleFormatName(options_.format),
            " (the format of the files listed first, or of the pattern's names): the files an "
            "online job follows are all of one format"));
      }
    }
    files_ = std::move(files);
    at_.listed = static_cast<int64_t>(files_.size());
    const size_t before = order_.size();
    order_.clear();
    const size_t replicas = static_cast<size_t>(options_.num_replicas);
    for (size_t i = static_cast<size_t>(options_.replica); i < files_.size(); i += replicas) {
      order_.push_back(files_[i]);
    }
    if (order_.size() > before) {
      waiting_ = false;
      std::lock_guard<std::mutex> lock(mu_);
      progress_.files = static_cast<int64_t>(order_.size());
      caught_up_ = false;
    }
    return absl::OkStatus();
  }

  // Fills the cycle up to cycle_length from the epoch's next files.
  absl::Status FillCycle() {
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

  // The next record of this replica from slot `s`, parsed into the window;
  // false when the slot's file ended (the slot is then closed).
  absl::StatusOr<bool> ReadOne(Slot& s, CriteoBatch* criteo) {
    while (true) {
      const uint64_t offset = s.stream->offset();
      const int64_t record = s.stream->record();
      absl::StatusOr<std::string_view> data = s.stream->Next();
      Count(s, s.stream->offset() - offset);
      if (absl::IsOutOfRange(data.status())) return false;
      if (data.ok() && options_.format == ExampleFormat::kCsv) {
        // Every replica joins a record's lines, its own or not, to find
        // where the next begins.
        data = JoinCsvRecord(s, *data);
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
      absl::Status parsed;
      if (options_.format == ExampleFormat::kCsv) {
        if (csv_->file() != s.stream->path()) csv_->set_file(s.stream->path());
        const int64_t before = csv_->size();
        parsed = csv_->AppendLine(*data, record + 1);
        // A blank line or a record dropped by `missing: skip`: no example.
        if (parsed.ok() && csv_->size() == before) continue;
      } else if (options_.format == ExampleFormat::kCriteoTsv) {
        parsed = ParseCriteoLine(*data, criteo);
        if (!parsed.ok()) {
          parsed = absl::Status(parsed.code(), absl::StrCat(s.stream->path(), ":", record + 1, ": ",
                                                            parsed.message()));
        }
      } else {
        parsed = parser_->AppendRecord(
            *data, absl::StrCat(s.stream->path(), ": record ", record, " (offset ", offset, ")"));
      }
      if (!parsed.ok()) {
        // Nothing of it was appended: skipped, while max_bad_records lasts.
        PSTRAIN_RETURN_IF_ERROR(SkipBadRecord(parsed));
        continue;
      }
      return true;
    }
  }

  // A bad record (or the damaged rest of a file): OK, logged and counted,
  // while fewer than max_bad_records were skipped; else `error`, saying
  // the limit. A file that is gone (NotFound) or cannot be reached is never
  // skipped.
  absl::Status SkipBadRecord(const absl::Status& error) {
    const bool data_error = absl::IsDataLoss(error) || absl::IsInvalidArgument(error);
    if (!data_error || bad_records_ >= options_.max_bad_records) {
      if (!data_error || options_.max_bad_records == 0) return error;
      return absl::Status(error.code(),
                          absl::StrCat(error.message(), " (max_bad_records ",
                                       options_.max_bad_records, " were skipped already)"));
    }
    ++bad_records_;
    LOG(WARNING) << "input: skipping bad data (" << bad_records_ << " of max_bad_records "
                 << options_.max_bad_records << "): " << error.message();
    std::lock_guard<std::mutex> lock(mu_);
    progress_.bad_records = bad_records_;
    return absl::OkStatus();
  }

  void Count(Slot& s, uint64_t record_bytes) {
    const uint64_t now = s.stream->file_bytes();
    const double share =
        s.size > 0 ? std::min(1.0, static_cast<double>(now) / static_cast<double>(s.size)) : 0;
    std::lock_guard<std::mutex> lock(mu_);
    progress_.bytes += record_bytes;
    progress_.files_open = static_cast<int64_t>(slots_.size());
    progress_.file_bytes += now - s.counted;
    progress_.fraction +=
        (share - s.share) / static_cast<double>(std::max<size_t>(1, order_.size()));
    s.counted = now;
    s.share = share;
  }

  // Slot `i`'s file ended: it counts as a whole file done.
  void CloseSlot(size_t i) {
    const double share = slots_[i].share;
    slots_.erase(slots_.begin() + static_cast<ptrdiff_t>(i));
    std::lock_guard<std::mutex> lock(mu_);
    ++progress_.files_done;
    progress_.files_open = static_cast<int64_t>(slots_.size());
    progress_.fraction =
        std::min(1.0, progress_.fraction +
                          (1 - share) / static_cast<double>(std::max<size_t>(1, order_.size())));
  }

  std::unique_ptr<Window> ReadWindow() {
    auto w = std::make_unique<Window>();
    const int64_t size = options_.shuffle_buffer > 0 ? options_.shuffle_buffer : kInOrderWindow;
    CriteoBatch criteo;
    absl::Status status = absl::OkStatus();
    // At a window's start: at_ holds the open files' places (slots_ are
    // opened there when the stream begins).
    if (!started_) {
      status = OpenSlots();
      started_ = true;
    } else if (following()) {
      status = RefreshList();
    }
    w->start = at_;
    int64_t read = 0;
    size_t next_slot = 0;  // where the next round would start
    while (status.ok() && read < size && !Stopping()) {
      if (status = FillCycle(); !status.ok()) break;
      if (slots_.empty() && following()) {
        // Every file listed is read: the examples so far go out, then the
        // list is read again until it has new files.
        if (read > 0) break;
        {
          std::lock_guard<std::mutex> lock(mu_);
          caught_up_ = true;
        }
        if (!waiting_) {
          LOG(INFO) << "input: replica " << options_.replica << " of " << options_.num_replicas
                    << " has read its " << order_.size() << " files of the " << files_.size()
                    << " listed in " << options_.follow_list << "; waiting for new ones";
          waiting_ = true;
        }
        {
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stop_; });
        }
        // Nothing read yet: the window begins anew with the list as it is.
        if (status = RefreshList(); !status.ok()) break;
        w->start = at_;
        continue;
      }
      if (slots_.empty()) {
        // The epoch ended.
        if (read > 0) break;  // its last window first
        // (A re-dealt epoch may have left this replica nothing.)
        if (epoch_examples_ == 0 && !Redealt(at_.epoch)) {
          status = absl::FailedPreconditionError(absl::StrCat(
              "replica ", options_.replica, " of ", options_.num_replicas, " read no example from ",
              order_.size(), " files in epoch ", at_.epoch,
              " (the first: ", order_.empty() ? "none" : order_[0],
              "); give every replica data: files that hold examples, at least one per replica"));
          break;
        }
        epoch_examples_ = 0;
        if (options_.num_epochs > 0 && at_.epoch + 1 >= options_.num_epochs) {
          w->last = true;
          break;
        }
        ++at_.epoch;
        at_.next_file = 0;
        at_.window = 0;
        order_ = EpochFiles(at_.epoch);
        {
          std::lock_guard<std::mutex> lock(mu_);
          progress_.epoch = at_.epoch;
          progress_.files = static_cast<int64_t>(order_.size());
          progress_.files_done = 0;
          progress_.files_open = 0;
          progress_.fraction = 0;
        }
        w->start = at_;
        w->start.open.clear();
        if (order_.empty()) {
          w->last = true;
          break;
        }
        continue;
      }
      // One record from each open file in turn, starting with the first.
      size_t i = 0;
      while (i < slots_.size() && read < size) {
        absl::StatusOr<bool> got = ReadOne(slots_[i], &criteo);
        if (!got.ok()) {
          status = got.status();
          break;
        }
        if (!*got) {
          CloseSlot(i);
          continue;  // the next file takes its place at the end, by FillCycle
        }
        ++read;
        ++epoch_examples_;
        ++i;
      }
      next_slot = i < slots_.size() ? i : 0;
    }
    // A window that ended mid-round: the next one starts with the file
    // whose turn it is (the saved order is the reading order).
    if (next_slot > 0) {
      std::rotate(slots_.begin(), slots_.begin() + static_cast<ptrdiff_t>(next_slot), slots_.end());
    }
    // Where the next window begins.
    at_.open.clear();
    for (const Slot& s : slots_) {
      at_.open.push_back({s.file, s.stream->offset(), s.stream->record()});
    }
    ++at_.window;
    if (options_.format == ExampleFormat::kCriteoTsv) {
      w->examples = CriteoToDataset(criteo);
    } else if (options_.format == ExampleFormat::kCsv) {
      if (csv_.has_value()) {
        w->examples = csv_->Take();
      } else {
        w->examples.tabular = true;
        w->examples.num_dense = static_cast<int64_t>(options_.csv->numeric.size());
      }
    } else {
      w->examples = parser_->Take();
    }
    const int64_t n = w->examples.size();
    w->order.resize(n);
    for (int64_t i = 0; i < n; ++i) w->order[i] = i;
    if (options_.shuffle_buffer > 0) {
      uint64_t state = MixBits64(options_.seed ^ MixBits64(static_cast<uint64_t>(w->start.epoch)) ^
                                 MixBits64(static_cast<uint64_t>(w->start.window) + 0x5eed) ^
                                 static_cast<uint64_t>(options_.replica));
      for (int64_t i = n; i > 1; --i) {
        std::swap(w->order[i - 1], w->order[Draw(&state, static_cast<uint64_t>(i))]);
      }
    }
    w->error = status;
    return w;
  }

  Env* const env_;
  const ExampleStreamOptions options_;
  bool interleaved_ = false;
  std::unique_ptr<TabularExampleParser> parser_;
  // kCsv: the parser, made from the first file's header (which every file
  // repeats), and a record joined from lines.
  std::optional<CsvParser> csv_;
  std::string csv_header_;
  std::string csv_header_file_;
  std::string joined_;
  int64_t bad_records_ = 0;  // skipped since Create
  InputPosition start_;
  // The reading thread's own.
  InputPosition at_;
  int64_t skip_ = 0;
  std::vector<std::string> order_;
  std::vector<Slot> slots_;
  // Following new files: the list as last read, when, and whether the
  // wait for new ones was logged.
  std::vector<std::string> files_;
  bool listed_ = false;
  std::chrono::steady_clock::time_point last_listed_;
  bool waiting_ = false;
  bool started_ = false;
  int64_t epoch_examples_ = 0;  // read in this epoch

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Window>> ready_;
  bool stop_ = false;
  bool caught_up_ = false;  // following: every listed file read, waiting
  InputProgress progress_;
  std::thread thread_;
};

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
