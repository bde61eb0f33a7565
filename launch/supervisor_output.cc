// The Supervisor's output side: children's lines to the sink, whole and
// prefixed, from the reader thread and the Wait() thread.
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "launch/supervisor.h"

namespace pstrain {
namespace {

// A line longer than this (a progress bar redrawn with '\r', binary output)
// goes to the sink in pieces instead of being buffered without bound.
constexpr size_t kMaxLineBytes = 64 << 10;
// Enough to empty a pipe (64 KiB by default, at most 1 MiB) with room to
// spare, yet bounded if an escaped grandchild keeps writing.
constexpr int kMaxDrainReads = 128;
constexpr size_t kReadBytes = 16 << 10;

}  // namespace

void Supervisor::ReaderLoop() {
  std::vector<pollfd> fds;
  std::vector<size_t> index;  // fds[k] belongs to streams_[index[k]]
  for (;;) {
    fds.clear();
    index.clear();
    {
      absl::MutexLock lock(&mu_);
      for (size_t i = 0; i < streams_.size(); ++i) {
        if (streams_[i].eof) continue;
        fds.push_back({streams_[i].fd, POLLIN, 0});
        index.push_back(i);
      }
    }
    // With every output closed it still waits: a restart may bring a new one.
    fds.push_back({wake_fd_, POLLIN, 0});
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      // FinishOutput() still drains every stream from the Wait() thread.
      LOG(ERROR) << "poll on child output: " << strerror(errno);
      return;
    }
    if (fds.back().revents != 0) {
      uint64_t count = 0;
      if (read(wake_fd_, &count, sizeof(count)) < 0 && errno != EAGAIN) {
        LOG(ERROR) << "reading the reader's wake-up: " << strerror(errno);
      }
      absl::MutexLock lock(&mu_);
      if (reader_done_) return;
      continue;  // a restarted child's new output joins the poll
    }
    absl::MutexLock lock(&mu_);
    for (size_t k = 0; k < index.size(); ++k) {
      // One read per stream per round, so a chatty child cannot starve the others.
      if (fds[k].revents != 0) DrainLocked(streams_[index[k]], /*until_empty=*/false);
    }
  }
}

void Supervisor::DrainLocked(Stream& stream, bool until_empty) {
  char buffer[kReadBytes];
  for (int reads = 0; !stream.eof && reads < kMaxDrainReads; ++reads) {
    const ssize_t n = read(stream.fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {
      if (n < 0) LOG(WARNING) << "reading " << stream.prefix << "output: " << strerror(errno);
      stream.eof = true;
      break;
    }
    std::string_view data(buffer, static_cast<size_t>(n));
    for (size_t newline; (newline = data.find('\n')) != std::string_view::npos;) {
      stream.partial.append(data.substr(0, newline));
      EmitLocked(absl::StrCat(stream.prefix, stream.partial));
      stream.partial.clear();
      data.remove_prefix(newline + 1);
    }
    stream.partial.append(data);
    while (stream.partial.size() >= kMaxLineBytes) {
      EmitLocked(absl::StrCat(stream.prefix, stream.partial.substr(0, kMaxLineBytes)));
      stream.partial.erase(0, kMaxLineBytes);
    }
    if (!until_empty) return;
  }
  // A final line without a newline still counts once the pipe has closed.
  if (stream.eof && !stream.partial.empty()) {
    EmitLocked(absl::StrCat(stream.prefix, stream.partial));
    stream.partial.clear();
  }
}

void Supervisor::EmitLocked(std::string_view line) { options_.sink(line); }

void Supervisor::Emit(std::string_view line) {
  absl::MutexLock lock(&mu_);
  EmitLocked(line);
}

void Supervisor::FinishOutput() {
  // Every child is reaped and its group killed, so what they wrote is in the
  // pipes. Drain before and after stopping the reader: before, so a stuck
  // reader cannot hold anything back; after, for what arrived in between.
  {
    absl::MutexLock lock(&mu_);
    for (Stream& stream : streams_) DrainLocked(stream, /*until_empty=*/true);
  }
  if (reader_.joinable()) {
    {
      absl::MutexLock lock(&mu_);
      reader_done_ = true;
    }
    const uint64_t one = 1;
    if (write(wake_fd_, &one, sizeof(one)) < 0) {
      LOG(ERROR) << "waking the output reader: " << strerror(errno);
    }
    reader_.join();
  }
  absl::MutexLock lock(&mu_);
  for (Stream& stream : streams_) {
    DrainLocked(stream, /*until_empty=*/true);
    // Whatever a surviving writer (one that left the process group) has not
    // ended with a newline.
    if (!stream.partial.empty()) EmitLocked(absl::StrCat(stream.prefix, stream.partial));
    stream.partial.clear();
    if (stream.fd >= 0) close(stream.fd);
    stream.fd = -1;
    stream.eof = true;
  }
}

}  // namespace pstrain
