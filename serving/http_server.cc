#include "serving/http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kListenId = 0;
constexpr uint64_t kWakeId = 1;
constexpr size_t kReadChunk = 64 << 10;
constexpr int kReadsPerEvent = 16;  // then other connections get their turn
constexpr auto kSweepEvery = std::chrono::milliseconds(50);
// After a response that ends the connection, what the client still sends is
// read and dropped for this long, so closing does not reset the connection
// before the client has read the answer.
constexpr auto kLinger = std::chrono::seconds(2);

Clock::duration ToClock(absl::Duration d) { return absl::ToChronoNanoseconds(d); }

std::string SerializeResponse(const HttpServerResponse& r, bool head, bool close) {
  std::string out =
      absl::StrCat("HTTP/1.1 ", r.status, " ", HttpReason(r.status),
                   "\r\nContent-Type: ", r.content_type, "\r\nContent-Length: ", r.body.size(),
                   close ? "\r\nConnection: close" : "\r\nConnection: keep-alive", "\r\n\r\n");
  if (!head) out += r.body;
  return out;
}

std::string ErrorResponse(int status, const std::string& message) {
  return SerializeResponse({status, JsonError(message), "application/json"}, false, true);
}

}  // namespace

std::string JsonError(const std::string& message) {
  return nlohmann::json({{"error", message}})
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

class HttpServer::Impl {
 public:
  Impl(const HttpServerOptions& options, HttpHandler handler)
      : options_(options), handler_(std::move(handler)) {}
  ~Impl();

  absl::Status Listen(const std::string& host, int port);
  void Run();
  void Stop();
  int port() const { return port_; }
  Stats stats() const;

 private:
  enum class Phase {
    kReading,    // parsing a request (or idle between requests)
    kHandling,   // a handler thread has the request
    kWriting,    // sending a response
    kLingering,  // answered and shut down for writing; draining until close
  };

  struct Conn {
    explicit Conn(const HttpLimits& limits) : parser(limits) {}
    uint64_t id = 0;
    int fd = -1;
    bool counted = true;  // false for a connection refused over max_connections
    Phase phase = Phase::kReading;
    HttpRequestParser parser;
    int requests = 0;  // answered on this connection
    Clock::time_point head_start, body_start, idle_since, write_start, linger_start;
    std::string out;
    size_t out_pos = 0;
    bool close_after_write = false;
    bool continue_sent = false;
    uint32_t events = 0;  // the epoll interest set
  };

  struct Task {
    uint64_t id;
    HttpServerRequest request;
    bool close;
  };
  struct Done {
    uint64_t id;
    HttpServerResponse response;
    bool head;   // a HEAD request: no body
    bool close;  // what the client asked for (stopping closes too)
  };

  void WorkerLoop();
  bool WorkReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return workers_stop_ || !tasks_.empty();
  }
  void Accept();
  void Refuse(int fd, Clock::time_point now);
  void OnEvent(Conn* conn, uint32_t events, Clock::time_point now);
  void ReadRequest(Conn* conn, Clock::time_point now);
  // Acts on the parser's state: dispatch a whole request, answer an error,
  // or wait for more bytes.
  void Advance(Conn* conn, HttpRequestParser::State before, Clock::time_point now);
  void StartWrite(Conn* conn, std::string bytes, bool close, Clock::time_point now);
  void Write(Conn* conn, Clock::time_point now);
  void Linger(Conn* conn, Clock::time_point now);
  void DrainCompletions(Clock::time_point now);
  void Sweep(Clock::time_point now);
  void SetInterest(Conn* conn, uint32_t events);
  void Close(Conn* conn);
  void BeginStop(Clock::time_point now);

  const HttpServerOptions options_;
  const HttpHandler handler_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;

  // The event loop's own (Run's thread).
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  uint64_t next_id_ = 2;
  int open_ = 0;      // counted connections
  int refusing_ = 0;  // refused connections still draining
  bool listening_ = true;
  Clock::time_point accept_paused_until_{};
  bool stopping_loop_ = false;
  Clock::time_point stop_deadline_{};

  std::atomic<bool> stop_requested_{false};
  std::atomic<int64_t> stat_open_{0}, stat_accepted_{0}, stat_refused_{0}, stat_timed_out_{0},
      stat_requests_{0};

  mutable absl::Mutex mu_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<Done> done_ ABSL_GUARDED_BY(mu_);
  bool workers_stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

HttpServer::Impl::~Impl() {
  {
    absl::MutexLock lock(&mu_);
    workers_stop_ = true;
  }
  for (std::thread& t : workers_) t.join();
  for (auto& [id, conn] : conns_) ::close(conn->fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

absl::Status HttpServer::Impl::Listen(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int gai =
      ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (gai != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve --host ", host, ": ", ::gai_strerror(gai)));
  }
  std::string last_error = "no address";
  for (addrinfo* a = found; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
      last_error = std::strerror(errno);
      ::close(fd);
      continue;
    }
    listen_fd_ = fd;
  }
  ::freeaddrinfo(found);
  if (listen_fd_ < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port, ": ",
                                               last_error, " (in use? choose another --port)"));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    return absl::InternalError(absl::StrCat("epoll/eventfd: ", std::strerror(errno)));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenId;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.u64 = kWakeId;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  for (int i = 0; i < std::max(1, options_.num_threads); ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
  return absl::OkStatus();
}

void HttpServer::Impl::WorkerLoop() {
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &Impl::WorkReady));
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    const bool head = task.request.method == "HEAD";
    HttpServerResponse response;
    try {
      response = handler_(task.request);
    } catch (const std::exception& e) {
      LOG(ERROR) << task.request.method << " " << task.request.path
                 << ": the handler threw: " << e.what();
      response = {500, JsonError(absl::StrCat("internal error: ", e.what())), "application/json"};
    } catch (...) {
      LOG(ERROR) << task.request.method << " " << task.request.path << ": the handler threw";
      response = {500, JsonError("internal error"), "application/json"};
    }
    Done done{task.id, std::move(response), head, task.close};
    {
      absl::MutexLock lock(&mu_);
      done_.push_back(std::move(done));
    }
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
}

void HttpServer::Impl::Run() {
  std::vector<epoll_event> events(256);
  Clock::time_point next_sweep = Clock::now() + kSweepEvery;
  while (true) {
    if (stop_requested_.load() && !stopping_loop_) BeginStop(Clock::now());
    if (stopping_loop_ && (conns_.empty() || Clock::now() >= stop_deadline_)) break;
    const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()),
                               static_cast<int>(kSweepEvery.count()));
    const Clock::time_point now = Clock::now();
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kListenId) {
        Accept();
      } else if (id == kWakeId) {
        uint64_t count;
        (void)!::read(wake_fd_, &count, sizeof(count));
        DrainCompletions(now);
      } else {
        auto it = conns_.find(id);
        if (it != conns_.end()) OnEvent(it->second.get(), events[i].events, now);
      }
    }
    if (now >= next_sweep) {
      Sweep(now);
      next_sweep = now + kSweepEvery;
    }
  }
  for (auto& [id, conn] : conns_) ::close(conn->fd);
  conns_.clear();
  stat_open_ = 0;
  {
    // Requests still queued after the grace have no connection to answer.
    absl::MutexLock lock(&mu_);
    workers_stop_ = true;
    tasks_.clear();
  }
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void HttpServer::Impl::Stop() {
  stop_requested_ = true;
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

void HttpServer::Impl::BeginStop(Clock::time_point now) {
  stopping_loop_ = true;
  stop_deadline_ = now + ToClock(options_.stop_grace);
  if (listening_) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
  listening_ = false;
  ::close(listen_fd_);
  listen_fd_ = -1;
  // What is not being answered goes now; answers in progress finish.
  std::vector<Conn*> idle;
  for (auto& [id, conn] : conns_) {
    if (conn->phase == Phase::kReading || conn->phase == Phase::kLingering) {
      idle.push_back(conn.get());
    }
  }
  for (Conn* conn : idle) Close(conn);
}

void HttpServer::Impl::Accept() {
  const Clock::time_point now = Clock::now();
  for (int i = 0; i < 64; ++i) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop accepting for a moment (the kernel's
        // backlog holds the rest) instead of spinning on the error.
        LOG_EVERY_N(WARNING, 100) << "cannot accept a connection: " << std::strerror(errno)
                                  << " (raise `ulimit -n` or lower --max_connections)";
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        listening_ = false;
        accept_paused_until_ = now + std::chrono::milliseconds(100);
      }
      return;
    }
    ++stat_accepted_;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (open_ >= options_.max_connections) {
      Refuse(fd, now);
      continue;
    }
    auto conn = std::make_unique<Conn>(options_.limits);
    conn->id = next_id_++;
    conn->fd = fd;
    conn->head_start = now;
    ++open_;
    ++stat_open_;
    epoll_event ev{};
    ev.events = conn->events = EPOLLIN;
    ev.data.u64 = conn->id;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    conns_[conn->id] = std::move(conn);
  }
}

void HttpServer::Impl::Refuse(int fd, Clock::time_point now) {
  ++stat_refused_;
  if (refusing_ >= options_.max_connections) {
    ::close(fd);
    return;
  }
  auto conn = std::make_unique<Conn>(options_.limits);
  conn->id = next_id_++;
  conn->fd = fd;
  conn->counted = false;
  ++refusing_;
  epoll_event ev{};
  ev.events = conn->events = 0;
  ev.data.u64 = conn->id;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  Conn* c = conn.get();
  conns_[conn->id] = std::move(conn);
  StartWrite(
      c,
      ErrorResponse(503, absl::StrCat("the server has --max_connections=", options_.max_connections,
                                      " connections open; try again shortly")),
      true, now);
}

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

HttpServer::Stats HttpServer::Impl::stats() const {
  return {stat_open_.load(), stat_accepted_.load(), stat_refused_.load(), stat_timed_out_.load(),
          stat_requests_.load()};
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Create(const std::string& host, int port,
                                                               const HttpServerOptions& options,
                                                               HttpHandler handler) {
  auto impl = std::make_unique<Impl>(options, std::move(handler));
  absl::Status s = impl->Listen(host, port);
  if (!s.ok()) return s;
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;
int HttpServer::port() const { return impl_->port(); }
void HttpServer::Run() { impl_->Run(); }
void HttpServer::Stop() { impl_->Stop(); }
HttpServer::Stats HttpServer::stats() const { return impl_->stats(); }

}  // namespace pstrain
