#ifndef PSTRAIN_TESTS_HTTP_TEST_CLIENT_H_
#define PSTRAIN_TESTS_HTTP_TEST_CLIENT_H_

// A raw-socket HTTP/1.1 client for tests that must control every byte and
// every stall (half-sent headers, a body that stops, pipelined requests that
// are never read, a tiny receive window), which curl cannot; and the helpers
// such tests use: request builders, latency percentiles, and what the kernel
// says about the server (its threads, its end of a loopback connection).
// Loopback (127.0.0.1) only. Every wait is bounded by a deadline the caller
// gives; nothing here blocks past it.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace pstrain {
namespace testing_util {

using Clock = std::chrono::steady_clock;

// `d` in milliseconds.
double Ms(Clock::duration d);

// The `q` quantile (0..1) of `v` (the element at rank q * size, clamped to
// the last), or 0 if `v` is empty.
double Percentile(std::vector<double> v, double q);

// An HTTP/1.1 request to Host 127.0.0.1, whole and ready to send. Any method
// but GET gets "Content-Type: application/json" and the body's
// Content-Length; `keep_alive` false adds "Connection: close".
std::string Request(const std::string& method, const std::string& path, const std::string& body,
                    bool keep_alive = true);

// One MNIST-shaped image (784 values in [0, 1], a function of `k`) as a JSON
// list.
std::string Image(int k);

// A POST of {"instances": [Image(k)]} to /v1/models/mnist:predict.
std::string PredictRequest(int k, bool keep_alive = true);

// A response read by Connection::ReadResponse.
struct Response {
  int status = 0;  // 0: no whole response (see `error`)
  std::string body{};
  bool closed = false;  // the server closed the connection (EOF or reset)
  std::string error{};  // why there is no whole response; empty if there is
};

// A client connection to 127.0.0.1: a non-blocking socket (TCP_NODELAY,
// close-on-exec) that it owns and closes on destruction, Close() or
// reassignment; movable, not copyable. Every call that waits takes a
// deadline and returns by it. Not thread-safe: one thread at a time.
class Connection {
 public:
  Connection() = default;
  Connection(Connection&& o) noexcept;
  Connection& operator=(Connection&& o) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // Whether a socket is open (connected, or the peer closed but Close() was
  // not called).
  bool open() const { return fd_ >= 0; }
  // The socket, for poll() over many connections; -1 if none. Still owned
  // by the Connection.
  int fd() const { return fd_; }
  // The client's port (getsockname), or -1.
  int local_port() const;

  // Closes any socket, then connects to 127.0.0.1:`port`. `rcvbuf` > 0 sets
  // SO_RCVBUF before connecting (a small receive window). False (and no
  // socket) if it is refused or not connected by `deadline`.
  bool Connect(int port, Clock::time_point deadline, int rcvbuf = 0);

  // Closes the socket and drops what was received. Safe to call twice.
  void Close();

  // True when `events` (POLLIN, POLLOUT), an error or a hangup happen before
  // `deadline`; a deadline in the past only looks.
  bool Wait(short events, Clock::time_point deadline) const;

  // Sends what the socket takes now, without waiting: the bytes sent, 0 if
  // none fit, -1 if the peer closed (no SIGPIPE).
  ssize_t SendSome(std::string_view data);

  // Sends all of `data`, waiting for room up to `deadline`: false if it
  // could not (the peer closed, or the deadline passed part-way).
  bool SendAll(std::string_view data, Clock::time_point deadline);

  // Appends what has arrived to received(), without waiting; false once the
  // peer has closed (EOF or reset), now or before.
  bool ReadAvailable();

  // Reads until the peer closes: true if it did before `deadline`.
  bool ReadUntilClosed(Clock::time_point deadline);

  // The next response from what is received, reading up to `deadline`. Its
  // body is Content-Length bytes, or without Content-Length everything up to
  // the close. Consumed from received(); status 0 with `error` if there is
  // no whole response (not HTTP, a bad Content-Length, closed early, or the
  // deadline passed).
  Response ReadResponse(Clock::time_point deadline);

  // What was received and not yet returned by ReadResponse.
  const std::string& received() const { return in_; }

 private:
  int fd_ = -1;
  std::string in_;
  bool eof_ = false;
};

// `request` sent on a new connection to 127.0.0.1:`port`, and its response,
// all within `timeout`. The connection is closed after.
Response Call(int port, const std::string& request, std::chrono::milliseconds timeout);

// The threads of process `pid` (the Threads: line of /proc/<pid>/status),
// or -1 if it cannot be read.
int Threads(pid_t pid);

// /proc/net/tcp's state ("st") of an established connection.
inline constexpr int kTcpEstablished = 1;

// The TCP state (/proc/net/tcp's "st", e.g. kTcpEstablished) of the
// server's end of the loopback connection from `client_port` to
// `server_port`, or -1 if it is not there (gone, or no /proc/net/tcp).
// Shows whether the server closed its end when the client cannot tell (an
// orderly close queued behind unread data).
int ServerSideState(int server_port, int client_port);

// Whether `body` is a JSON object {"error": "..."} whose error string
// contains `word` ("" : any error string).
bool ErrorNames(const std::string& body, const std::string& word);

}  // namespace testing_util
}  // namespace pstrain

#endif  // PSTRAIN_TESTS_HTTP_TEST_CLIENT_H_
