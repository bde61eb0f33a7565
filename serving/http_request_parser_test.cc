#include "serving/http_request_parser.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

using State = HttpRequestParser::State;

HttpLimits SmallLimits() {
  HttpLimits limits;
  limits.max_head_bytes = 1024;
  limits.max_target_bytes = 256;
  limits.max_headers = 8;
  limits.max_body_bytes = 100;
  return limits;
}

// Feeds `bytes` whole and one byte at a time: both must end the same way.
struct Parsed {
  State state;
  std::vector<HttpServerRequest> requests;
  int error_status = 0;
  std::string error_message;
};

Parsed Parse(const std::string& bytes, size_t step) {
  HttpRequestParser parser(SmallLimits());
  Parsed out;
  for (size_t i = 0; i < bytes.size(); i += step) {
    parser.Append(bytes.substr(i, step));
    while (parser.state() == State::kComplete) out.requests.push_back(parser.TakeRequest());
    if (parser.state() == State::kError) break;
  }
  out.state = parser.state();
  out.error_status = parser.error_status();
  out.error_message = parser.error_message();
  return out;
}

Parsed ParseBothWays(const std::string& bytes) {
  Parsed whole = Parse(bytes, bytes.size() + 1);
  Parsed drip = Parse(bytes, 1);
  EXPECT_EQ(whole.state, drip.state) << bytes;
  EXPECT_EQ(whole.error_status, drip.error_status) << bytes;
  EXPECT_EQ(whole.requests.size(), drip.requests.size()) << bytes;
  for (size_t i = 0; i < std::min(whole.requests.size(), drip.requests.size()); ++i) {
    EXPECT_EQ(whole.requests[i].body, drip.requests[i].body);
    EXPECT_EQ(whole.requests[i].path, drip.requests[i].path);
  }
  return whole;
}

TEST(HttpRequestParserTest, ReadsARequestWithItsBodyWholeOrByteByByte) {
  Parsed p = ParseBothWays(
      "POST /v1/models/m%3Ax:predict?a=1 HTTP/1.1\r\nHost: h\r\nContent-Type: "
      "application/json\r\nContent-Length: 5\r\n\r\nhello");
  ASSERT_EQ(p.requests.size(), 1u);
  const HttpServerRequest& r = p.requests[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/v1/models/m:x:predict");
  EXPECT_EQ(r.query, "a=1");
  EXPECT_EQ(r.body, "hello");
  EXPECT_TRUE(r.keep_alive);
  ASSERT_NE(r.Header("content-type"), nullptr);
  EXPECT_EQ(*r.Header("content-type"), "application/json");
  EXPECT_EQ(p.state, State::kIdle);
}

TEST(HttpRequestParserTest, PipelinedRequestsComeOutInOrder) {
  Parsed p = ParseBothWays(
      "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.0\r\n\r\n"
      "POST /c HTTP/1.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhiGET /d");
  ASSERT_EQ(p.requests.size(), 3u);
  EXPECT_EQ(p.requests[0].path, "/a");
  EXPECT_EQ(p.requests[1].path, "/b");
  EXPECT_FALSE(p.requests[1].keep_alive);  // HTTP/1.0 without keep-alive
  EXPECT_EQ(p.requests[2].body, "hi");
  EXPECT_FALSE(p.requests[2].keep_alive);
  EXPECT_EQ(p.state, State::kHead);  // "GET /d" waits for the rest
}

TEST(HttpRequestParserTest, ChunkedBodiesAreDecoded) {
  Parsed p = ParseBothWays(
      "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: t\r\n\r\n");
  ASSERT_EQ(p.requests.size(), 1u);
  EXPECT_EQ(p.requests[0].body, "hello world");
}

TEST(HttpRequestParserTest, ChunkedFramingOnHttp10EndsTheConnection) {
  Parsed p = ParseBothWays(
      "POST /x HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
      "2\r\nhi\r\n0\r\n\r\n");
  ASSERT_EQ(p.requests.size(), 1u);
  EXPECT_EQ(p.requests[0].body, "hi");
  EXPECT_FALSE(p.requests[0].keep_alive);
}

TEST(HttpRequestParserTest, ALargeBodyIsNotHeldTwice) {
  HttpLimits limits;
  HttpRequestParser parser(limits);
  parser.Append("POST /x HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n");
  const std::string chunk(100000, 'x');
  for (int i = 0; i < 9; ++i) {
    parser.Append(chunk);
    EXPECT_LT(parser.buffer_bytes(), chunk.size() + 100) << "after " << i + 1 << " pieces";
  }
  EXPECT_EQ(parser.state(), HttpRequestParser::State::kBody);
  EXPECT_EQ(parser.request().body.size(), 900000u);
  EXPECT_EQ(parser.Append(chunk), HttpRequestParser::State::kComplete);
  EXPECT_EQ(parser.TakeRequest().body.size(), 1000000u);
}

TEST(HttpRequestParserTest, HeadersCompleteBeforeTheBodySaysExpectContinue) {
  HttpRequestParser parser(SmallLimits());
  EXPECT_EQ(parser.Append("POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n"),
            State::kBody);
  EXPECT_TRUE(parser.request().expect_continue);
  EXPECT_EQ(parser.Append("abc"), State::kComplete);
  EXPECT_EQ(parser.TakeRequest().body, "abc");
}

TEST(HttpRequestParserTest, EveryMalformedRequestIsA4xxOr5xxWithAMessage) {
  struct Case {
    std::string bytes;
    int status;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"GET\r\n\r\n", 400, "malformed request line"},
      {"GET / HTTP/1.1 extra\r\n\r\n", 400, "malformed request line"},
      {"G(T / HTTP/1.1\r\n\r\n", 400, "bad method"},
      {"GET / HTTP/2.0\r\n\r\n", 505, "HTTP/2.0 is not supported"},
      {"GET / HTTX/1.1\r\n\r\n", 400, "bad HTTP version"},
      {"GET nopath HTTP/1.1\r\n\r\n", 400, "is not a path"},
      {"GET /%zz HTTP/1.1\r\n\r\n", 400, "percent-encoding"},
      {"GET /% HTTP/1.1\r\n\r\n", 400, "percent-encoding"},
      {"GET /" + std::string(300, 'a') + " HTTP/1.1\r\n\r\n", 414, "request target"},
      {"GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400, "malformed header line"},
      {"GET / HTTP/1.1\r\nno colon\r\n\r\n", 400, "malformed header line"},
      {"GET / HTTP/1.1\r\nA: b\r\n  folded\r\n\r\n", 400, "folded"},
      {"GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", 400, "bare CR"},
      {"GET / HTTP/1.1\r\nA: b" + std::string(1, '\0') + "c\r\n\r\n", 400, "NUL"},
      {"GET / HTTP/1.1\r\nA: \x01\r\n\r\n", 400, "control character"},
      {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "bad Content-Length"},
      {"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 400,
       "bad Content-Length"},
      {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400, "two different"},
      {"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
       "both Content-Length and Transfer-Encoding"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "not supported"},
      {"POST / HTTP/1.1\r\nExpect: tea\r\n\r\n", 417, "only 100-continue"},
      {"POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", 413, "over --max_request_bytes (100)"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n", 413,
       "over --max_request_bytes"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n", 400, "bad chunk size"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n 2\r\nab\r\n", 400, "bad chunk size"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", 400,
       "not followed by CRLF"},
      {"GET / HTTP/1.1\r\n" + std::string(1100, 'a'), 431, "over 1024 bytes"},
      {"GET / HTTP/1.1\r\nA: 1\r\nA: 1\r\nA: 1\r\nA: 1\r\nA: 1\r\nA: 1\r\nA: 1\r\nA: 1\r\nA: "
       "1\r\n\r\n",
       431, "more than 8 header lines"},
  };
  for (const Case& c : cases) {
    Parsed p = ParseBothWays(c.bytes);
    EXPECT_EQ(p.state, State::kError) << c.bytes;
    EXPECT_EQ(p.error_status, c.status) << c.bytes << " -> " << p.error_message;
    EXPECT_NE(p.error_message.find(c.says), std::string::npos)
        << c.bytes << " -> " << p.error_message;
  }
}

TEST(HttpRequestParserTest, ADeclaredLengthIsNotAllocatedBeforeItsBytesArrive) {
  HttpLimits limits;
  limits.max_body_bytes = 1 << 30;
  HttpRequestParser parser(limits);
  EXPECT_EQ(parser.Append("POST / HTTP/1.1\r\nContent-Length: 1000000000\r\n\r\nab"), State::kBody);
  EXPECT_LE(parser.request().body.capacity(), size_t{1} << 21);
}

TEST(HttpRequestParserTest, EmptyLinesBeforeARequestAreSkipped) {
  Parsed p = ParseBothWays("\r\n\r\nGET /x HTTP/1.1\n\n");
  ASSERT_EQ(p.requests.size(), 1u);
  EXPECT_EQ(p.requests[0].path, "/x");
}

}  // namespace
}  // namespace pstrain
