#ifndef PSTRAIN_CLOUD_HTTP_H_
#define PSTRAIN_CLOUD_HTTP_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pstrain {

struct HttpRequest {
  std::string method = "GET";  // GET, POST, PUT, DELETE
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  absl::Duration timeout = absl::Seconds(60);
};

struct HttpResponse {
  int status = 0;  // the HTTP status code
  std::string body;
};

// Sends HTTP requests. An answer with any status code is a response; only a
// request that got no answer (no connection, a timeout, a name that does not
// resolve) is an error: Unavailable, naming the URL and why. Thread-safe.
class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  virtual absl::StatusOr<HttpResponse> Send(const HttpRequest& request) = 0;
};

// The transport over libcurl.
std::unique_ptr<HttpTransport> NewCurlTransport();

// `s` percent-encoded for a URL path segment or query value (everything but
// RFC 3986's unreserved characters).
std::string UrlEncode(const std::string& s);

// True for the statuses a retry may cure: 408, 429 and 5xx.
bool RetryableHttpStatus(int status);

// Sends `request`; a request that got no answer, or a retryable status, is
// sent again after an exponential backoff (100 ms, doubling up to 2 s) while
// `budget` lasts. Returns the last response (whatever its status), or
// Unavailable naming the URL, the number of tries and the last cause.
absl::StatusOr<HttpResponse> SendWithRetries(HttpTransport* transport, const HttpRequest& request,
                                             absl::Duration budget);

// "HTTP 404: <the first 200 bytes of the body>", for messages.
std::string DescribeResponse(const HttpResponse& response);

}  // namespace pstrain

#endif  // PSTRAIN_CLOUD_HTTP_H_
