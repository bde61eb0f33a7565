// The HTTP server core on loopback with raw sockets: what a slow, stalled or
// malformed client gets, and that it never takes a handler thread away from
// a healthy request.
#include "serving/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using Clock = std::chrono::steady_clock;

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& bytes) {
  size_t at = 0;
  while (at < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

// Reads until `done` says the bytes so far are enough, the peer closes, or
// `seconds` pass.
std::string ReadUntil(int fd, double seconds, bool (*done)(const std::string&)) {
  std::string in;
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(seconds));
  while (!done(in)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buffer[65536];
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    in.append(buffer, static_cast<size_t>(n));
  }
  return in;
}

// How many whole responses `in` holds (each with a Content-Length).
size_t WholeResponses(const std::string& in) {
  size_t count = 0, at = 0;
  while (true) {
    const size_t head_end = in.find("\r\n\r\n", at);
    if (head_end == std::string::npos) return count;
    const size_t cl = in.find("Content-Length: ", at);
    int64_t length = 0;
    if (cl == std::string::npos || cl > head_end ||
        !absl::SimpleAtoi(in.substr(cl + 16, in.find("\r\n", cl) - cl - 16), &length)) {
      if (in.compare(at, 12, "HTTP/1.1 100") == 0) {
        at = head_end + 4;
        continue;
      }
      return count;
    }
    if (in.size() < head_end + 4 + length) return count;
    at = head_end + 4 + length;
    ++count;
  }
}

bool OneResponse(const std::string& in) { return WholeResponses(in) >= 1; }
bool TwoResponses(const std::string& in) { return WholeResponses(in) >= 2; }
bool Never(const std::string&) { return false; }

int StatusOf(const std::string& response) {
  int status = 0;
  size_t at = 0;
  if (response.compare(0, 12, "HTTP/1.1 100") == 0) at = response.find("\r\n\r\n") + 4;
  if (response.size() < at + 12 || !absl::SimpleAtoi(response.substr(at + 9, 3), &status)) {
    return 0;
  }
  return status;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(HttpServerOptions options, HttpHandler handler) {
    absl::StatusOr<std::unique_ptr<HttpServer>> server =
        HttpServer::Create("127.0.0.1", 0, options, std::move(handler));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    runner_ = std::thread([this] { server_->Run(); });
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Stop();
    if (runner_.joinable()) runner_.join();
    for (int fd : fds_) ::close(fd);
  }
  int Open() {
    const int fd = Connect(server_->port());
    if (fd >= 0) fds_.push_back(fd);
    return fd;
  }
  // One request on a new connection: the response's bytes.
  std::string Roundtrip(const std::string& request, double seconds = 10) {
    const int fd = Open();
    if (fd < 0 || !SendAll(fd, request)) return "";
    return ReadUntil(fd, seconds, OneResponse);
  }
  // Waits up to `seconds` for `pred` on the server's stats.
  bool WaitFor(double seconds, const std::function<bool(const HttpServer::Stats&)>& pred) {
    const Clock::time_point end =
        Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
    while (Clock::now() < end) {
      if (pred(server_->stats())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return pred(server_->stats());
  }

  static HttpServerResponse Echo(const HttpServerRequest& r) {
    return {200,
            absl::StrCat("{\"method\":\"", r.method, "\",\"path\":\"", r.path, "\",\"body\":\"",
                         r.body, "\"}"),
            "application/json"};
  }

  std::unique_ptr<HttpServer> server_;
  std::thread runner_;
  std::vector<int> fds_;
};

TEST_F(HttpServerTest, AnswersKeepAliveAndPipelinedRequestsInOrder) {
  Start(HttpServerOptions(), Echo);
  const int fd = Open();
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd,
                      "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                      "POST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"));
  const std::string in = ReadUntil(fd, 10, TwoResponses);
  ASSERT_EQ(WholeResponses(in), 2u) << in;
  const size_t a = in.find("\"path\":\"/a\""), b = in.find("\"path\":\"/b\",\"body\":\"hi\"");
  EXPECT_NE(a, std::string::npos) << in;
  EXPECT_NE(b, std::string::npos) << in;
  EXPECT_LT(a, b);
  EXPECT_NE(in.find("Connection: keep-alive"), std::string::npos);
  // The same connection takes another request.
  ASSERT_TRUE(SendAll(fd, "HEAD /c HTTP/1.1\r\nConnection: close\r\n\r\n"));
  const std::string head = ReadUntil(fd, 10, Never);  // until the server closes
  EXPECT_EQ(StatusOf(head), 200) << head;
  EXPECT_NE(head.find("Connection: close"), std::string::npos) << head;
  EXPECT_EQ(head.find("\"method\""), std::string::npos) << "HEAD has no body: " << head;
}

TEST_F(HttpServerTest, ExpectContinueGetsA100BeforeTheBodyIsSent) {
  Start(HttpServerOptions(), Echo);
  const int fd = Open();
  ASSERT_TRUE(SendAll(fd, "POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n"));
  const std::string cont = ReadUntil(
      fd, 10, [](const std::string& in) { return in.find("\r\n\r\n") != std::string::npos; });
  EXPECT_EQ(cont, "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(SendAll(fd, "abc"));
  const std::string in = ReadUntil(fd, 10, OneResponse);
  EXPECT_EQ(StatusOf(in), 200) << in;
  EXPECT_NE(in.find("\"body\":\"abc\""), std::string::npos) << in;
}

TEST_F(HttpServerTest, StalledClientsDoNotHoldTheHandlerThreads) {
  HttpServerOptions options;
  options.num_threads = 2;
  Start(options, Echo);
  // Twenty times as many stalled clients as handler threads, in every phase:
  // nothing sent, half a request line, headers without their end, half a body.
  const std::string partial[] = {"", "POST /v1/mo", "POST /x HTTP/1.1\r\nContent-Len",
                                 "POST /x HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{\"in"};
  for (int i = 0; i < 40; ++i) {
    const int fd = Open();
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, partial[i % 4]) || partial[i % 4].empty());
  }
  ASSERT_TRUE(WaitFor(10, [](const HttpServer::Stats& s) { return s.open == 40; }));
  // A thread per connection would hang here until the stalled ones time out
  // (10 s for the headers, 60 s for a body).
  for (int i = 0; i < 10; ++i) {
    const std::string in = Roundtrip("GET /healthy HTTP/1.1\r\n\r\n", 5);
    EXPECT_EQ(StatusOf(in), 200) << in;
  }
}

TEST_F(HttpServerTest, SlowHeadersAndBodiesGet408WithinTheirTimeouts) {
  HttpServerOptions options;
  options.header_timeout = absl::Milliseconds(300);
  options.body_timeout = absl::Milliseconds(300);
  Start(options, Echo);
  const int slow_head = Open();
  ASSERT_TRUE(SendAll(slow_head, "GET /x HTTP/1.1\r\nA: "));
  const int slow_body = Open();
  ASSERT_TRUE(SendAll(slow_body, "POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\n12"));
  const Clock::time_point start = Clock::now();
  // Drip a byte every 100 ms: each read is quick, the request as a whole is not.
  std::string head_in;
  for (int i = 0; i < 30 && WholeResponses(head_in) == 0; ++i) {
    SendAll(slow_head, "a");
    head_in += ReadUntil(slow_head, 0.1, OneResponse);
  }
  const std::string body_in = ReadUntil(slow_body, 5, OneResponse);
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(StatusOf(head_in), 408) << head_in;
  EXPECT_NE(head_in.find("--header_timeout_ms"), std::string::npos) << head_in;
  EXPECT_EQ(StatusOf(body_in), 408) << body_in;
  EXPECT_NE(body_in.find("--body_timeout_ms"), std::string::npos) << body_in;
  EXPECT_LT(waited, 5.0);
  EXPECT_TRUE(WaitFor(5, [](const HttpServer::Stats& s) { return s.open == 0; }));
  EXPECT_EQ(server_->stats().timed_out, 2);
}

TEST_F(HttpServerTest, IdleKeepAliveConnectionsCloseAndSoDoesTheLastAllowedRequest) {
  HttpServerOptions options;
  options.keep_alive_timeout = absl::Milliseconds(200);
  options.keep_alive_max_requests = 2;
  Start(options, Echo);
  const int fd = Open();
  ASSERT_TRUE(SendAll(fd, "GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\nGET /3 HTTP/1.1\r\n\r\n"));
  const std::string in = ReadUntil(fd, 10, Never);  // until the server closes
  EXPECT_EQ(WholeResponses(in), 2u) << in;
  EXPECT_NE(in.find("Connection: close"), std::string::npos) << in;
  const int idle = Open();
  ASSERT_TRUE(SendAll(idle, "GET /1 HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(WholeResponses(ReadUntil(idle, 10, OneResponse)), 1u);
  // Then nothing: the server closes it without an answer.
  EXPECT_EQ(ReadUntil(idle, 5, Never), "");
  EXPECT_TRUE(WaitFor(5, [](const HttpServer::Stats& s) { return s.open == 0; }));
}

TEST_F(HttpServerTest, ConnectionsOverTheCapAre503AndTheCapFreesAsTheyClose) {
  HttpServerOptions options;
  options.max_connections = 3;
  Start(options, Echo);
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(Open());
  ASSERT_TRUE(WaitFor(10, [](const HttpServer::Stats& s) { return s.open == 3; }));
  const std::string refused = Roundtrip("GET /x HTTP/1.1\r\n\r\n");
  EXPECT_EQ(StatusOf(refused), 503) << refused;
  EXPECT_NE(refused.find("--max_connections=3"), std::string::npos) << refused;
  ::shutdown(held[0], SHUT_RDWR);
  ASSERT_TRUE(WaitFor(10, [](const HttpServer::Stats& s) { return s.open == 2; }));
  EXPECT_EQ(StatusOf(Roundtrip("GET /x HTTP/1.1\r\n\r\n")), 200);
  EXPECT_GE(server_->stats().refused, 1);
}

TEST_F(HttpServerTest, AClientThatNeverReadsIsClosedAfterTheWriteTimeout) {
  HttpServerOptions options;
  options.write_timeout = absl::Milliseconds(300);
  const std::string big(8 << 20, 'x');
  Start(options, [&big](const HttpServerRequest&) {
    return HttpServerResponse{200, big, "text/plain"};
  });
  const int fd = Open();
  const int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  ASSERT_TRUE(SendAll(fd, "GET /big HTTP/1.1\r\n\r\n"));
  EXPECT_TRUE(WaitFor(10, [](const HttpServer::Stats& s) { return s.timed_out == 1; }));
  EXPECT_TRUE(WaitFor(5, [](const HttpServer::Stats& s) { return s.open == 0; }));
}

TEST_F(HttpServerTest, MalformedRequestsAre4xxWithAJsonErrorAndTheConnectionCloses) {
  Start(HttpServerOptions(), Echo);
  const std::string in = Roundtrip("GET / HTTP/1.1\r\nBad Header: x\r\n\r\n");
  EXPECT_EQ(StatusOf(in), 400) << in;
  EXPECT_NE(in.find("{\"error\":\"malformed header line"), std::string::npos) << in;
  EXPECT_NE(in.find("Connection: close"), std::string::npos) << in;
  const std::string big =
      Roundtrip(absl::StrCat("POST / HTTP/1.1\r\nContent-Length: ", int64_t{1} << 40, "\r\n\r\n"));
  EXPECT_EQ(StatusOf(big), 413) << big;
}

TEST_F(HttpServerTest, AHandlerExceptionIsA500AndTheServerGoesOn) {
  Start(HttpServerOptions(), [](const HttpServerRequest& r) -> HttpServerResponse {
    if (r.path == "/throw") throw std::runtime_error("boom");
    return Echo(r);
  });
  const std::string in = Roundtrip("GET /throw HTTP/1.1\r\n\r\n");
  EXPECT_EQ(StatusOf(in), 500) << in;
  EXPECT_NE(in.find("internal error: boom"), std::string::npos) << in;
  EXPECT_EQ(StatusOf(Roundtrip("GET /fine HTTP/1.1\r\n\r\n")), 200);
}

TEST_F(HttpServerTest, StopFinishesTheRequestsBeingHandled) {
  std::atomic<bool> entered{false};
  Start(HttpServerOptions(), [&entered](const HttpServerRequest& r) {
    entered = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return Echo(r);
  });
  const int fd = Open();
  ASSERT_TRUE(SendAll(fd, "GET /slow HTTP/1.1\r\n\r\n"));
  for (int i = 0; i < 1000 && !entered; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(entered);
  server_->Stop();
  const std::string in = ReadUntil(fd, 10, OneResponse);
  EXPECT_EQ(StatusOf(in), 200) << in;
  EXPECT_NE(in.find("Connection: close"), std::string::npos) << in;
  runner_.join();
  EXPECT_LT(Connect(server_->port()), 0) << "still accepting after Stop";
}

TEST(JsonErrorTest, BytesThatAreNotUtf8AreReplacedNotThrownOn) {
  EXPECT_EQ(JsonError("no such endpoint: /\xff"),
            "{\"error\":\"no such endpoint: /\xEF\xBF\xBD\"}");
}

}  // namespace
}  // namespace pstrain
