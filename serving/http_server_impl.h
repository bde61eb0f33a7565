#ifndef PSTRAIN_SERVING_HTTP_SERVER_IMPL_H_
#define PSTRAIN_SERVING_HTTP_SERVER_IMPL_H_

// Internal to http_server*.cc: the server's event loop. http_server.cc
// listens, accepts, refuses and stops, and runs the handler threads;
// http_server_connections.cc carries each connection through reading,
// handling, writing and lingering, and times it out.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "serving/http_request_parser.h"
#include "serving/http_server.h"

namespace pstrain {

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
  using Clock = std::chrono::steady_clock;

  static constexpr uint64_t kListenId = 0;
  static constexpr uint64_t kWakeId = 1;
  static constexpr size_t kReadChunk = 64 << 10;
  static constexpr int kReadsPerEvent = 16;  // then other connections get their turn
  static constexpr auto kSweepEvery = std::chrono::milliseconds(50);
  // After a response that ends the connection, what the client still sends is
  // read and dropped for this long, so closing does not reset the connection
  // before the client has read the answer.
  static constexpr auto kLinger = std::chrono::seconds(2);

  static Clock::duration ToClock(absl::Duration d) { return absl::ToChronoNanoseconds(d); }
  // The bytes of `r` (no body when answering a HEAD request).
  static std::string SerializeResponse(const HttpServerResponse& r, bool head, bool close);
  // `status` with JsonError(message) as its body, closing the connection.
  static std::string ErrorResponse(int status, const std::string& message);

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

}  // namespace pstrain

#endif  // PSTRAIN_SERVING_HTTP_SERVER_IMPL_H_
