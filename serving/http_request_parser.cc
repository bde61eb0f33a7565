#include "serving/http_request_parser.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace pstrain {
namespace {

// RFC 9110's token characters (method and header names).
bool IsTokenChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

bool IsToken(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

absl::string_view TrimOws(absl::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %HH -> the byte; false for a '%' not followed by two hex digits.
bool PercentDecode(absl::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

// A value for a message: printable ASCII as is, anything else as \xHH, at
// most 64 characters.
std::string Printable(absl::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64)) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out.push_back(c);
    } else {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
    }
  }
  if (s.size() > 64) out += "...";
  return out;
}

}  // namespace

const std::string* HttpServerRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return &value;
  }
  return nullptr;
}

HttpRequestParser::HttpRequestParser(const HttpLimits& limits) : limits_(limits) {}

HttpRequestParser::State HttpRequestParser::Append(std::string_view bytes) {
  if (state_ == State::kError) return state_;
  buffer_.append(bytes.data(), bytes.size());
  if (state_ != State::kComplete) Parse();
  // A body's bytes are copied into the request as they come: drop them from
  // the buffer, so a large body is not held twice. (In these states scanned_
  // is not a position in the buffer.)
  if ((state_ == State::kBody || state_ == State::kComplete) && pos_ >= (64 << 10)) {
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  return state_;
}

HttpServerRequest HttpRequestParser::TakeRequest() {
  HttpServerRequest out = std::move(request_);
  request_ = HttpServerRequest();
  state_ = State::kIdle;
  body_ = Body::kNone;
  buffer_.erase(0, pos_);
  pos_ = 0;
  scanned_ = 0;
  Parse();
  return out;
}

void HttpRequestParser::Fail(int status, std::string message) {
  state_ = State::kError;
  error_status_ = status;
  error_message_ = std::move(message);
}

void HttpRequestParser::Parse() {
  while (true) {
    if (state_ == State::kIdle) {
      // Empty lines before a request line are allowed (RFC 9112 2.2).
      while (pos_ < buffer_.size() && (buffer_[pos_] == '\r' || buffer_[pos_] == '\n')) ++pos_;
      if (pos_ == buffer_.size()) {
        buffer_.clear();
        pos_ = 0;
        return;
      }
      state_ = State::kHead;
      scanned_ = pos_;
    }
    if (state_ == State::kHead) {
      // The head ends at an empty line: "\n\n" or "\n\r\n".
      size_t end = std::string::npos;
      size_t i = std::max(scanned_, pos_);
      for (; i < buffer_.size(); ++i) {
        if (buffer_[i] != '\n') continue;
        const size_t j = i + 1;
        if (j == buffer_.size() || (buffer_[j] == '\r' && j + 1 == buffer_.size())) break;
        if (buffer_[j] == '\n') end = j + 1;
        if (buffer_[j] == '\r' && buffer_[j + 1] == '\n') end = j + 2;
        if (end != std::string::npos) break;
      }
      scanned_ = i;
      const size_t head_bytes = (end == std::string::npos ? buffer_.size() : end) - pos_;
      if (head_bytes > limits_.max_head_bytes) {
        return Fail(431, absl::StrCat("the request line and headers are over ",
                                      limits_.max_head_bytes, " bytes"));
      }
      if (end == std::string::npos) return;
      const absl::string_view head(buffer_.data() + pos_, end - pos_);
      pos_ = end;
      if (!ParseHead(head) || !StartBody()) return;
      continue;
    }
    if (state_ != State::kBody) return;
    bool progressed = false;
    switch (body_) {
      case Body::kNone:
        state_ = State::kComplete;
        return;
      case Body::kLength:
        progressed = ReadLengthBody();
        break;
      case Body::kChunkSize:
        progressed = ReadChunkSize();
        break;
      case Body::kChunkData:
        progressed = ReadChunkData();
        break;
      case Body::kChunkEnd:
        progressed = ReadCrlf(Body::kChunkSize);
        break;
      case Body::kTrailers:
        progressed = ReadTrailers();
        break;
    }
    if (!progressed) return;
  }
}

bool HttpRequestParser::ParseHead(absl::string_view head) {
  for (char c : head) {
    if (c == '\0') return Fail(400, "a NUL byte in the request line or headers"), false;
  }
  std::vector<absl::string_view> lines = absl::StrSplit(head, '\n');
  for (absl::string_view& line : lines) {
    absl::ConsumeSuffix(&line, "\r");
    if (line.find('\r') != absl::string_view::npos) {
      return Fail(400, "a bare CR in the request line or headers"), false;
    }
  }
  if (!ParseRequestLine(lines[0])) return false;
  lines.erase(lines.begin());
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  return ParseHeaders(absl::StrJoin(lines, "\n"));
}

bool HttpRequestParser::ParseRequestLine(absl::string_view line) {
  std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3) {
    return Fail(400, absl::StrCat("malformed request line \"", Printable(line),
                                  "\" (expected METHOD /path HTTP/1.1)")),
           false;
  }
  if (!IsToken(parts[0]) || parts[0].size() > 32) {
    return Fail(400, absl::StrCat("bad method \"", Printable(parts[0]), "\"")), false;
  }
  request_.method = std::string(parts[0]);
  absl::string_view version = parts[2];
  if (!absl::ConsumePrefix(&version, "HTTP/")) {
    return Fail(400, absl::StrCat("bad HTTP version \"", Printable(parts[2]), "\"")), false;
  }
  if (version == "1.1") {
    request_.minor_version = 1;
  } else if (version == "1.0") {
    request_.minor_version = 0;
  } else if (version.size() == 3 && absl::ascii_isdigit(version[0]) && version[1] == '.' &&
             absl::ascii_isdigit(version[2])) {
    return Fail(505, absl::StrCat("HTTP/", version, " is not supported; use HTTP/1.1")), false;
  } else {
    return Fail(400, absl::StrCat("bad HTTP version \"", Printable(parts[2]), "\"")), false;
  }
  request_.keep_alive = request_.minor_version == 1;
  absl::string_view target = parts[1];
  if (target.size() > limits_.max_target_bytes) {
    return Fail(414,
                absl::StrCat("the request target is over ", limits_.max_target_bytes, " bytes")),
           false;
  }
  // The absolute form (a proxy's "http://host/path") carries the path after
  // the authority.
  if (absl::ConsumePrefix(&target, "http://") || absl::ConsumePrefix(&target, "https://")) {
    const size_t slash = target.find('/');
    target = slash == absl::string_view::npos ? absl::string_view("/") : target.substr(slash);
  }
  if (target.empty() || target[0] != '/') {
    return Fail(400, absl::StrCat("the request target \"", Printable(target),
                                  "\" is not a path (it starts with /)")),
           false;
  }
  const size_t query = target.find('?');
  if (query != absl::string_view::npos) {
    request_.query = std::string(target.substr(query + 1));
    target = target.substr(0, query);
  }
  if (!PercentDecode(target, &request_.path)) {
    return Fail(400, absl::StrCat("bad percent-encoding in the path \"", Printable(target),
                                  "\" (% is followed by two hex digits)")),
           false;
  }
  return true;
}

bool HttpRequestParser::ParseHeaders(absl::string_view lines) {
  if (lines.empty()) return true;
  for (absl::string_view line : absl::StrSplit(lines, '\n')) {
    if (line.empty()) continue;
    if (line[0] == ' ' || line[0] == '\t') {
      return Fail(400, "a folded header line (continuation lines are not accepted)"), false;
    }
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos || !IsToken(line.substr(0, colon))) {
      return Fail(400, absl::StrCat("malformed header line \"", Printable(line),
                                    "\" (expected Name: value, no space before the colon)")),
             false;
    }
    const absl::string_view value = TrimOws(line.substr(colon + 1));
    for (char c : value) {
      const unsigned char u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7f) {
        return Fail(400, absl::StrCat("a control character in header ",
                                      Printable(line.substr(0, colon)))),
               false;
      }
    }
    if (request_.headers.size() == limits_.max_headers) {
      return Fail(431, absl::StrCat("more than ", limits_.max_headers, " header lines")), false;
    }
    request_.headers.emplace_back(absl::AsciiStrToLower(line.substr(0, colon)), std::string(value));
  }
  return true;
}

bool HttpRequestParser::StartBody() {
  state_ = State::kBody;
  int64_t length = -1;
  bool chunked = false;
  for (const auto& [name, value] : request_.headers) {
    if (name == "content-length") {
      int64_t n = 0;
      if (value.empty() || value.size() > 18 ||
          !std::all_of(value.begin(), value.end(), absl::ascii_isdigit) ||
          !absl::SimpleAtoi(value, &n)) {
        return Fail(400, absl::StrCat("bad Content-Length \"", Printable(value), "\"")), false;
      }
      if (length >= 0 && n != length) return Fail(400, "two different Content-Lengths"), false;
      length = n;
    } else if (name == "transfer-encoding") {
      if (!absl::EqualsIgnoreCase(value, "chunked")) {
        return Fail(501, absl::StrCat("Transfer-Encoding \"", Printable(value),
                                      "\" is not supported (send Content-Length or chunked)")),
               false;
      }
      chunked = true;
    } else if (name == "connection") {
      for (absl::string_view token : absl::StrSplit(value, ',')) {
        token = TrimOws(token);
        if (absl::EqualsIgnoreCase(token, "close")) request_.keep_alive = false;
        if (absl::EqualsIgnoreCase(token, "keep-alive")) request_.keep_alive = true;
      }
    } else if (name == "expect") {
      if (!absl::EqualsIgnoreCase(value, "100-continue")) {
        return Fail(417, absl::StrCat("Expect \"", Printable(value),
                                      "\" is not supported (only 100-continue)")),
               false;
      }
      request_.expect_continue = request_.minor_version == 1;
    }
  }
  if (chunked && request_.minor_version == 0) {
    // HTTP/1.0 has no chunked framing: a 1.0 proxy in front would read the
    // body differently (RFC 9112 6.1), so the connection ends with this request.
    request_.keep_alive = false;
  }
  if (chunked && length >= 0) {
    // Two ways to read one body: a proxy and this server could disagree.
    return Fail(400, "both Content-Length and Transfer-Encoding: send one of them"), false;
  }
  if (length > limits_.max_body_bytes) {
    return Fail(413,
                absl::StrCat("the request body is ", length, " bytes, over --max_request_bytes (",
                             limits_.max_body_bytes, ")")),
           false;
  }
  if (chunked) {
    body_ = Body::kChunkSize;
  } else if (length > 0) {
    body_ = Body::kLength;
    remaining_ = length;
    // Reserve what was declared only up to a bound: the declaration is the
    // client's word, the bytes are not here yet.
    request_.body.reserve(static_cast<size_t>(std::min<int64_t>(length, 1 << 20)));
  } else {
    body_ = Body::kNone;
  }
  return true;
}

bool HttpRequestParser::ReadLengthBody() {
  const size_t n = std::min<size_t>(remaining_, buffer_.size() - pos_);
  if (n == 0) return false;
  request_.body.append(buffer_, pos_, n);
  pos_ += n;
  remaining_ -= static_cast<int64_t>(n);
  if (remaining_ == 0) body_ = Body::kNone;
  return true;
}

size_t HttpRequestParser::FindLineEnd(size_t limit) {
  const size_t end = std::min(buffer_.size(), pos_ + limit);
  for (size_t i = pos_; i < end; ++i) {
    if (buffer_[i] == '\n') return i;
  }
  return std::string::npos;
}

bool HttpRequestParser::ReadChunkSize() {
  constexpr size_t kMaxLine = 1024;
  const size_t nl = FindLineEnd(kMaxLine);
  if (nl == std::string::npos) {
    if (buffer_.size() - pos_ >= kMaxLine) Fail(400, "a chunk-size line over 1024 bytes");
    return false;
  }
  absl::string_view line(buffer_.data() + pos_, nl - pos_);
  pos_ = nl + 1;
  absl::ConsumeSuffix(&line, "\r");
  // Chunk extensions are ignored; whitespace may come before them, not before
  // the size.
  line = line.substr(0, line.find(';'));
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  int64_t size = 0;
  if (line.empty() || line.size() > 15) {
    Fail(400, absl::StrCat("bad chunk size \"", Printable(line), "\""));
    return false;
  }
  for (char c : line) {
    const int v = HexValue(c);
    if (v < 0) {
      Fail(400, absl::StrCat("bad chunk size \"", Printable(line), "\""));
      return false;
    }
    size = size * 16 + v;
  }
  if (size == 0) {
    body_ = Body::kTrailers;
    scanned_ = 0;
    return true;
  }
  if (size > limits_.max_body_bytes - static_cast<int64_t>(request_.body.size())) {
    Fail(413, absl::StrCat("the request body is over --max_request_bytes (", limits_.max_body_bytes,
                           ")"));
    return false;
  }
  remaining_ = size;
  body_ = Body::kChunkData;
  return true;
}

bool HttpRequestParser::ReadChunkData() {
  const size_t n = std::min<size_t>(remaining_, buffer_.size() - pos_);
  if (n == 0) return false;
  request_.body.append(buffer_, pos_, n);
  pos_ += n;
  remaining_ -= static_cast<int64_t>(n);
  if (remaining_ == 0) body_ = Body::kChunkEnd;
  return true;
}

bool HttpRequestParser::ReadCrlf(Body next) {
  const size_t avail = buffer_.size() - pos_;
  if (avail >= 1 && buffer_[pos_] == '\n') {
    pos_ += 1;
  } else if (avail >= 2 && buffer_[pos_] == '\r' && buffer_[pos_ + 1] == '\n') {
    pos_ += 2;
  } else if (avail == 0 || (avail == 1 && buffer_[pos_] == '\r')) {
    return false;
  } else {
    Fail(400, "a chunk's data is not followed by CRLF (its size is wrong)");
    return false;
  }
  body_ = next;
  return true;
}

bool HttpRequestParser::ReadTrailers() {
  // Trailer lines are read and dropped, up to the head's limit in all.
  while (true) {
    const size_t nl = FindLineEnd(limits_.max_head_bytes);
    if (nl == std::string::npos) {
      if (buffer_.size() - pos_ >= limits_.max_head_bytes) {
        Fail(431, "the chunked body's trailers are too long");
      }
      return false;
    }
    scanned_ += nl + 1 - pos_;
    if (scanned_ > limits_.max_head_bytes) {
      Fail(431, "the chunked body's trailers are too long");
      return false;
    }
    const bool empty = nl == pos_ || (nl == pos_ + 1 && buffer_[pos_] == '\r');
    pos_ = nl + 1;
    if (empty) {
      body_ = Body::kNone;
      return true;
    }
  }
}

const char* HttpReason(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 417:
      return "Expectation Failed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

}  // namespace pstrain
