// One connection's life in the HTTP server (http_server_impl.h): reading and
// parsing a request, handing it to a handler thread, writing the response,
// lingering after a closing one, and the timeouts that end each phase.
#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "serving/http_server_impl.h"

namespace pstrain {

void HttpServer::Impl::OnEvent(Conn* conn, uint32_t events, Clock::time_point now) {
  if (events & EPOLLERR) return Close(conn);
  switch (conn->phase) {
    case Phase::kReading:
      return ReadRequest(conn, now);
    case Phase::kWriting:
      if (events & EPOLLHUP) return Close(conn);
      return Write(conn, now);
    case Phase::kLingering:
      return Linger(conn, now);
    case Phase::kHandling:
      // The client hung up while its request is handled: the answer has
      // nowhere to go.
      if (events & EPOLLHUP) Close(conn);
      return;
  }
}

void HttpServer::Impl::ReadRequest(Conn* conn, Clock::time_point now) {
  char buffer[kReadChunk];
  for (int i = 0; i < kReadsPerEvent; ++i) {
    const ssize_t n = ::recv(conn->fd, buffer, sizeof(buffer), 0);
    if (n == 0) return Close(conn);  // the client is gone; nothing whole to answer
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      return Close(conn);
    }
    const HttpRequestParser::State before = conn->parser.state();
    conn->parser.Append(std::string_view(buffer, static_cast<size_t>(n)));
    const uint64_t id = conn->id;
    Advance(conn, before, now);
    // Advance may have closed (and freed) the connection.
    if (conns_.find(id) == conns_.end() || conn->phase != Phase::kReading) return;
  }
}

void HttpServer::Impl::Advance(Conn* conn, HttpRequestParser::State before, Clock::time_point now) {
  using State = HttpRequestParser::State;
  HttpRequestParser& parser = conn->parser;
  const State state = parser.state();
  if (before == State::kIdle && state != State::kIdle && conn->requests > 0) {
    conn->head_start = now;  // the first request's clock runs from the accept
  }
  if (state == State::kError) {
    const std::string message = parser.error_message();
    return StartWrite(conn, ErrorResponse(parser.error_status(), message), true, now);
  }
  if ((state == State::kBody || state == State::kComplete) && before != State::kBody &&
      before != State::kComplete) {
    conn->body_start = now;
  }
  if (state == State::kBody && parser.request().expect_continue && !conn->continue_sent) {
    // The client waits for this before sending the body. Nothing else is
    // being written on the connection now, so the socket's buffer has room.
    conn->continue_sent = true;
    static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    ssize_t sent;
    do {
      sent = ::send(conn->fd, kContinue, sizeof(kContinue) - 1, MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    // A client that pipelines and leaves its answers unread can have filled
    // the socket's buffer: it is closed rather than waited for.
    if (sent != static_cast<ssize_t>(sizeof(kContinue) - 1)) return Close(conn);
  }
  if (state != State::kComplete) return;
  Task task{conn->id, parser.TakeRequest(), false};
  conn->continue_sent = false;
  task.close = !task.request.keep_alive || stopping_loop_ ||
               conn->requests + 1 >= options_.keep_alive_max_requests;
  conn->phase = Phase::kHandling;
  SetInterest(conn, 0);
  ++stat_requests_;
  {
    absl::MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
  }
}

void HttpServer::Impl::DrainCompletions(Clock::time_point now) {
  std::vector<Done> done;
  {
    absl::MutexLock lock(&mu_);
    done.swap(done_);
  }
  for (Done& d : done) {
    auto it = conns_.find(d.id);
    if (it == conns_.end()) continue;  // closed meanwhile
    const bool close = d.close || stopping_loop_;
    StartWrite(it->second.get(), SerializeResponse(d.response, d.head, close), close, now);
  }
}

void HttpServer::Impl::StartWrite(Conn* conn, std::string bytes, bool close,
                                  Clock::time_point now) {
  conn->phase = Phase::kWriting;
  conn->out = std::move(bytes);
  conn->out_pos = 0;
  conn->close_after_write = close;
  conn->write_start = now;
  Write(conn, now);
}

void HttpServer::Impl::Write(Conn* conn, Clock::time_point now) {
  while (conn->out_pos < conn->out.size()) {
    const ssize_t n = ::send(conn->fd, conn->out.data() + conn->out_pos,
                             conn->out.size() - conn->out_pos, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return SetInterest(conn, EPOLLOUT);
      return Close(conn);
    }
    conn->out_pos += static_cast<size_t>(n);
  }
  conn->out.clear();
  conn->out.shrink_to_fit();
  // Stopping: a keep-alive connection whose answer was still going out when
  // the stop began closes too.
  if (conn->close_after_write || stopping_loop_) {
    ::shutdown(conn->fd, SHUT_WR);
    // Stopping: the request was read whole, nothing is left to drain.
    if (stopping_loop_ && conn->counted) return Close(conn);
    conn->phase = Phase::kLingering;
    conn->linger_start = now;
    SetInterest(conn, EPOLLIN);
    return;
  }
  ++conn->requests;
  conn->phase = Phase::kReading;
  conn->idle_since = now;
  SetInterest(conn, EPOLLIN);
  // A pipelined request may be buffered already.
  Advance(conn, HttpRequestParser::State::kIdle, now);
}

void HttpServer::Impl::Linger(Conn* conn, Clock::time_point) {
  char buffer[kReadChunk];
  for (int i = 0; i < kReadsPerEvent; ++i) {
    const ssize_t n = ::recv(conn->fd, buffer, sizeof(buffer), 0);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    return Close(conn);
  }
}

void HttpServer::Impl::Sweep(Clock::time_point now) {
  using State = HttpRequestParser::State;
  if (!listening_ && !stopping_loop_ && now >= accept_paused_until_) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenId;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
    listening_ = true;
  }
  std::vector<std::pair<Conn*, std::string>> late;  // (connection, the 408's reason or "")
  for (auto& [id, c] : conns_) {
    Conn* conn = c.get();
    switch (conn->phase) {
      case Phase::kReading: {
        const State state = conn->parser.state();
        if (state == State::kIdle && conn->requests > 0) {
          if (now - conn->idle_since >= ToClock(options_.keep_alive_timeout)) {
            late.emplace_back(conn, "");
          }
        } else if (state == State::kIdle || state == State::kHead) {
          if (now - conn->head_start >= ToClock(options_.header_timeout)) {
            late.emplace_back(conn,
                              absl::StrCat("the request line and headers did not arrive within ",
                                           absl::ToInt64Milliseconds(options_.header_timeout),
                                           " ms (--header_timeout_ms)"));
          }
        } else if (state == State::kBody) {
          if (now - conn->body_start >= ToClock(options_.body_timeout)) {
            late.emplace_back(conn, absl::StrCat("the request body did not arrive within ",
                                                 absl::ToInt64Milliseconds(options_.body_timeout),
                                                 " ms of its headers (--body_timeout_ms)"));
          }
        }
        break;
      }
      case Phase::kWriting:
        if (now - conn->write_start >= ToClock(options_.write_timeout)) late.emplace_back(conn, "");
        break;
      case Phase::kLingering:
        if (now - conn->linger_start >= kLinger) late.emplace_back(conn, "");
        break;
      case Phase::kHandling:
        break;
    }
  }
  for (auto& [conn, reason] : late) {
    const bool idle = conn->phase == Phase::kReading && reason.empty();
    if (conn->phase != Phase::kLingering && !idle) ++stat_timed_out_;
    if (reason.empty()) {
      Close(conn);
    } else {
      StartWrite(conn, ErrorResponse(408, reason), true, now);
    }
  }
}

void HttpServer::Impl::SetInterest(Conn* conn, uint32_t events) {
  if (conn->events == events) return;
  epoll_event ev{};
  ev.events = conn->events = events;
  ev.data.u64 = conn->id;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, conn->fd, &ev);
}

void HttpServer::Impl::Close(Conn* conn) {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, conn->fd, nullptr);
  ::close(conn->fd);
  if (conn->counted) {
    --open_;
    --stat_open_;
  } else {
    --refusing_;
  }
  conns_.erase(conn->id);  // `conn` is gone from here on
}

}  // namespace pstrain
