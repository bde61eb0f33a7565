#ifndef PSTRAIN_SERVING_HTTP_REQUEST_PARSER_H_
#define PSTRAIN_SERVING_HTTP_REQUEST_PARSER_H_

// An incremental HTTP/1.0 and 1.1 request parser, free of sockets: bytes go
// in as they arrive (one at a time or all at once: the result is the same),
// requests come out. It is strict where laxness lets a request be read two
// ways (request smuggling: Content-Length with Transfer-Encoding, two
// different lengths, whitespace before a header's colon, folded header
// lines) and bounded everywhere (head bytes, header count, body bytes), so a
// client cannot make it hold more than the limits say. Every refusal is an
// HTTP status with a message saying what is wrong.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace pstrain {

struct HttpLimits {
  size_t max_head_bytes = 64 << 10;   // request line + headers (431 beyond)
  size_t max_target_bytes = 8 << 10;  // the request target (414 beyond)
  size_t max_headers = 100;           // header lines (431 beyond)
  int64_t max_body_bytes = 64 << 20;  // decoded body (413 beyond)
};

struct HttpServerRequest {
  std::string method;                                        // as sent: "GET", "POST", ...
  std::string path;                                          // percent-decoded, without the query
  std::string query;                                         // after '?', as sent
  int minor_version = 1;                                     // HTTP/1.<minor_version>
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  bool keep_alive = true;        // what the client asked for (Connection, version)
  bool expect_continue = false;  // "Expect: 100-continue"

  // The first header named `name` (lower-case), or nullptr.
  const std::string* Header(std::string_view name) const;
};

class HttpRequestParser {
 public:
  enum class State {
    kIdle,      // no byte of a request yet
    kHead,      // reading the request line and headers
    kBody,      // headers complete (request() has them), reading the body
    kComplete,  // request() is whole; TakeRequest() then parses what follows
    kError,     // error_status()/error_message(); the connection must close
  };

  explicit HttpRequestParser(const HttpLimits& limits);

  // Appends `bytes` and parses as far as they go. Bytes after a complete
  // request (a pipelined next one) are kept for after TakeRequest().
  State Append(std::string_view bytes);
  State state() const { return state_; }

  // The request so far (method, path, headers from kBody on; all of it in
  // kComplete).
  const HttpServerRequest& request() const { return request_; }
  // In kComplete: hands over the request and parses any buffered bytes of
  // the next one. Returns the new state.
  HttpServerRequest TakeRequest();

  // In kError: 400, 413, 414, 417, 431, 501 or 505, and what was wrong.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

  // Bytes buffered and not yet part of a complete request.
  size_t buffered() const { return buffer_.size() - pos_; }
  // Bytes the buffer holds, consumed ones included (a body's are dropped as
  // they are copied into the request).
  size_t buffer_bytes() const { return buffer_.size(); }

 private:
  enum class Body { kNone, kLength, kChunkSize, kChunkData, kChunkEnd, kTrailers };

  void Parse();
  bool ParseHead(absl::string_view head);
  bool ParseRequestLine(absl::string_view line);
  bool ParseHeaders(absl::string_view lines);
  bool StartBody();
  // Each consumes from buffer_[pos_..]; false when more bytes are needed or
  // on an error (state_ says which).
  bool ReadLengthBody();
  bool ReadChunkSize();
  bool ReadChunkData();
  bool ReadCrlf(Body next);
  bool ReadTrailers();
  // Finds the end of a line from pos_; npos if none yet.
  size_t FindLineEnd(size_t limit);
  void Fail(int status, std::string message);

  const HttpLimits limits_;
  State state_ = State::kIdle;
  Body body_ = Body::kNone;
  std::string buffer_;
  size_t pos_ = 0;         // first byte not yet consumed
  size_t scanned_ = 0;     // head bytes already searched for its end
  int64_t remaining_ = 0;  // bytes left of the body or of the current chunk
  HttpServerRequest request_;
  int error_status_ = 0;
  std::string error_message_;
};

// "Bad Request" for 400, ...; "Unknown" for a code it does not know.
const char* HttpReason(int status);

}  // namespace pstrain

#endif  // PSTRAIN_SERVING_HTTP_REQUEST_PARSER_H_
