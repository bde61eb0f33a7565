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
#include "serving/http_server_impl.h"

namespace pstrain {

std::string JsonError(const std::string& message) {
  return nlohmann::json({{"error", message}})
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string HttpServer::Impl::SerializeResponse(const HttpServerResponse& r, bool head,
                                                bool close) {
  std::string out =
      absl::StrCat("HTTP/1.1 ", r.status, " ", HttpReason(r.status),
                   "\r\nContent-Type: ", r.content_type, "\r\nContent-Length: ", r.body.size(),
                   close ? "\r\nConnection: close" : "\r\nConnection: keep-alive", "\r\n\r\n");
  if (!head) out += r.body;
  return out;
}

std::string HttpServer::Impl::ErrorResponse(int status, const std::string& message) {
  return SerializeResponse({status, JsonError(message), "application/json"}, false, true);
}

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
