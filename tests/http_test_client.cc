#include "tests/http_test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace testing_util {
namespace {

using std::chrono::milliseconds;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

std::string Request(const std::string& method, const std::string& path, const std::string& body,
                    bool keep_alive) {
  std::string r = absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  if (!keep_alive) r += "Connection: close\r\n";
  if (method != "GET") {
    absl::StrAppend(&r, "Content-Type: application/json\r\nContent-Length: ", body.size(), "\r\n");
  }
  return absl::StrCat(r, "\r\n", body);
}

std::string Image(int k) {
  std::string s = "[";
  for (int i = 0; i < 784; ++i) {
    absl::StrAppend(&s, i ? "," : "", static_cast<float>((i * 31 + k * 7) % 256) / 255);
  }
  return s + "]";
}

std::string PredictRequest(int k, bool keep_alive) {
  return Request("POST", "/v1/models/mnist:predict",
                 absl::StrCat("{\"instances\": [", Image(k), "]}"), keep_alive);
}

Connection::Connection(Connection&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), in_(std::move(o.in_)), eof_(o.eof_) {}

Connection& Connection::operator=(Connection&& o) noexcept {
  if (this != &o) {
    Close();
    fd_ = std::exchange(o.fd_, -1);
    in_ = std::move(o.in_);
    eof_ = o.eof_;
  }
  return *this;
}

Connection::~Connection() { Close(); }

int Connection::local_port() const {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  return ntohs(addr.sin_port);
}

bool Connection::Connect(int port, Clock::time_point deadline, int rcvbuf) {
  Close();
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return false;
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    if (err == EINPROGRESS && Wait(POLLOUT, deadline)) {
      socklen_t len = sizeof(err);
      ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err != 0) {
      Close();
      return false;
    }
  }
  return true;
}

void Connection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  in_.clear();
  eof_ = false;
}

bool Connection::Wait(short events, Clock::time_point deadline) const {
  while (true) {
    const int64_t left =
        std::max<int64_t>(0, std::chrono::ceil<milliseconds>(deadline - Clock::now()).count());
    pollfd p{fd_, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    return r > 0;
  }
}

ssize_t Connection::SendSome(std::string_view data) {
  const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
  if (n >= 0) return n;
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
}

bool Connection::SendAll(std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    const ssize_t n = SendSome(data);
    if (n < 0) return false;
    data.remove_prefix(n);
    if (!data.empty() && n == 0 && !Wait(POLLOUT, deadline)) return false;
  }
  return true;
}

bool Connection::ReadAvailable() {
  char buf[65536];
  while (!eof_) {
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n > 0) {
      in_.append(buf, n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else if (!(n < 0 && errno == EINTR)) {
      eof_ = true;
    }
  }
  return !eof_;
}

bool Connection::ReadUntilClosed(Clock::time_point deadline) {
  while (ReadAvailable()) {
    if (!Wait(POLLIN, deadline)) return false;
  }
  return true;
}

Response Connection::ReadResponse(Clock::time_point deadline) {
  Response r;
  while (true) {
    const size_t end = in_.find("\r\n\r\n");
    if (end != std::string::npos) {
      const std::string head = absl::AsciiStrToLower(in_.substr(0, end + 2));
      if (!absl::StartsWith(head, "http/1.") || head.size() < 12 ||
          !absl::SimpleAtoi(head.substr(9, 3), &r.status)) {
        r.error = "not an HTTP response: " + in_.substr(0, 200);
        r.status = 0;
        return r;
      }
      const size_t cl = head.find("\r\ncontent-length:");
      size_t length = 0;
      if (cl != std::string::npos) {
        const size_t from = cl + 17, to = head.find("\r\n", from);
        if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(head.substr(from, to - from)), &length)) {
          r.error = "bad Content-Length";
          r.status = 0;
          return r;
        }
      }
      if (cl != std::string::npos && in_.size() >= end + 4 + length) {
        r.body = in_.substr(end + 4, length);
        in_.erase(0, end + 4 + length);
        ReadAvailable();
        r.closed = eof_ && in_.empty();
        return r;
      }
      if (cl == std::string::npos && eof_) {
        r.body = in_.substr(end + 4);
        in_.clear();
        r.closed = true;
        return r;
      }
    }
    if (eof_) {
      r = {.status = 0, .closed = true, .error = "closed before a whole response"};
      return r;
    }
    const size_t before = in_.size();
    ReadAvailable();
    if (in_.size() > before || eof_) continue;
    if (!Wait(POLLIN, deadline)) {
      r = {.status = 0, .error = "no whole response in time"};
      return r;
    }
  }
}

Response Call(int port, const std::string& request, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  Connection c;
  if (!c.Connect(port, deadline)) return {.error = "cannot connect"};
  if (!c.SendAll(request, deadline)) return {.error = "cannot send the request"};
  return c.ReadResponse(deadline);
}

int Threads(pid_t pid) {
  std::istringstream status(ReadFile(absl::StrCat("/proc/", pid, "/status")));
  std::string line;
  int n = -1;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "Threads:") &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(8)), &n)) {
      return n;
    }
  }
  return -1;
}

int ServerSideState(int server_port, int client_port) {
  char local[32], remote[32];
  std::snprintf(local, sizeof(local), "0100007F:%04X", server_port);
  std::snprintf(remote, sizeof(remote), "0100007F:%04X", client_port);
  std::istringstream lines(ReadFile("/proc/net/tcp"));
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string sl, l, r, st;
    if (fields >> sl >> l >> r >> st && l == local && r == remote) {
      return static_cast<int>(std::strtol(st.c_str(), nullptr, 16));
    }
  }
  return -1;
}

bool ErrorNames(const std::string& body, const std::string& word) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("error") && j["error"].is_string() &&
         absl::StrContains(j["error"].get<std::string>(), word);
}

}  // namespace testing_util
}  // namespace pstrain
