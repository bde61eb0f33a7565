#include "cloud/http.h"

#include <curl/curl.h>

#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/backoff.h"

namespace pstrain {
namespace {

size_t AppendBody(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

class CurlTransport : public HttpTransport {
 public:
  CurlTransport() {
    // curl_global_init is not thread-safe; once per process.
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  }

  absl::StatusOr<HttpResponse> Send(const HttpRequest& request) override {
    CURL* curl = curl_easy_init();
    if (curl == nullptr) return absl::ResourceExhaustedError("libcurl could not start a request");
    HttpResponse response;
    curl_slist* headers = nullptr;
    for (const auto& [name, value] : request.headers) {
      headers = curl_slist_append(headers, absl::StrCat(name, ": ", value).c_str());
    }
    // No "Expect: 100-continue" round trip before uploads.
    headers = curl_slist_append(headers, "Expect:");
    curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(absl::ToInt64Milliseconds(request.timeout)));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, AppendBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
    if (request.method == "POST" || request.method == "PUT") {
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
    }
    if (request.method != "GET" && request.method != "POST") {
      curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
    char error[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    const CURLcode code = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    if (code != CURLE_OK) {
      return absl::UnavailableError(
          absl::StrCat(request.method, " ", request.url, ": ",
                       error[0] != '\0' ? error : curl_easy_strerror(code)));
    }
    response.status = static_cast<int>(status);
    return response;
  }
};

}  // namespace

std::unique_ptr<HttpTransport> NewCurlTransport() { return std::make_unique<CurlTransport>(); }

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&out, "%%%02X", c);
    }
  }
  return out;
}

bool RetryableHttpStatus(int status) { return status == 408 || status == 429 || status >= 500; }

absl::StatusOr<HttpResponse> SendWithRetries(HttpTransport* transport, const HttpRequest& request,
                                             absl::Duration budget) {
  const absl::Time start = absl::Now();
  Backoff backoff(absl::Milliseconds(100), absl::Seconds(2));
  for (int tries = 1;; ++tries) {
    absl::StatusOr<HttpResponse> response = transport->Send(request);
    const bool retry = !response.ok() || RetryableHttpStatus(response->status);
    if (!retry || !backoff.FitsBefore(absl::Now(), start + budget)) {
      if (!response.ok() && tries > 1) {
        return absl::UnavailableError(absl::StrCat(response.status().message(), " (", tries,
                                                   " tries in ",
                                                   absl::FormatDuration(absl::Now() - start), ")"));
      }
      return response;
    }
    absl::SleepFor(backoff.Next());
  }
}

std::string DescribeResponse(const HttpResponse& response) {
  std::string body = response.body.substr(0, 200);
  for (char& c : body) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return absl::StrCat("HTTP ", response.status, body.empty() ? "" : ": ", body);
}

}  // namespace pstrain
