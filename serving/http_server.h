#ifndef PSTRAIN_SERVING_HTTP_SERVER_H_
#define PSTRAIN_SERVING_HTTP_SERVER_H_

// pstrain-serve's HTTP/1.1 server core: one event-loop thread (epoll) reads
// and writes every connection without blocking, and a fixed pool of handler
// threads runs the handler on requests that have arrived whole. A slow or
// stalled client therefore holds a file descriptor and its buffered bytes,
// never a handler thread, so healthy requests keep their latency while many
// clients stall (slowloris). Bounded everywhere:
//   - a request's line and headers must arrive within header_timeout (from
//     the connection's accept, or from the first byte of a later request), its
//     body within body_timeout after the headers: else 408 and close;
//   - an idle keep-alive connection closes after keep_alive_timeout, and
//     after keep_alive_max_requests requests;
//   - a response the client does not take within write_timeout: close;
//   - at most max_connections open; one more is answered 503 and closed;
//   - the parser's limits (head bytes, header count, body bytes).
// cpp-httplib (which pstrain-serve used before) gives every connection a
// thread of its pool for its whole life and times out only single reads, so
// 64 connections dripping bytes starve it; it offers no deadline per request
// or cap on connections (docs/serving.md).
//
// Lifecycle: Create() binds and listens; Run() serves until Stop(), then
// finishes the requests being handled (writing their answers, within
// stop_grace), closes every connection and returns.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "serving/http_request_parser.h"

namespace pstrain {

struct HttpServerOptions {
  int num_threads = 8;  // handler threads
  int max_connections = 1024;
  absl::Duration header_timeout = absl::Seconds(10);
  absl::Duration body_timeout = absl::Seconds(60);
  absl::Duration keep_alive_timeout = absl::Seconds(5);
  int keep_alive_max_requests = 1000;
  absl::Duration write_timeout = absl::Seconds(10);
  absl::Duration stop_grace = absl::Seconds(10);
  HttpLimits limits;
};

struct HttpServerResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

// Runs on a handler thread, concurrently with itself. An exception it throws
// is logged and answered 500 (a fault of the server, not of the request).
using HttpHandler = std::function<HttpServerResponse(const HttpServerRequest&)>;

// {"error": message} (TensorFlow Serving's error form), for any bytes in
// `message`: ones that are not UTF-8 are replaced, never thrown on.
std::string JsonError(const std::string& message);

class HttpServer {
 public:
  // Listens on host:port (port 0: a free one, see port()). The handler must
  // outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Create(const std::string& host, int port,
                                                            const HttpServerOptions& options,
                                                            HttpHandler handler);
  ~HttpServer();

  int port() const;

  // Serves until Stop(). Call once.
  void Run();
  // From any thread, any number of times (not from a signal handler).
  void Stop();

  struct Stats {
    int64_t open = 0;       // connections open now
    int64_t accepted = 0;   // connections accepted
    int64_t refused = 0;    // answered 503 for max_connections
    int64_t timed_out = 0;  // closed for a header, body or write timeout
    int64_t requests = 0;   // requests handed to the handler
  };
  Stats stats() const;

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pstrain

#endif  // PSTRAIN_SERVING_HTTP_SERVER_H_
