#include "cloud/metadata.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace pstrain {

MetadataClient::MetadataClient(HttpTransport* transport, std::string base_url,
                               absl::Duration retry_budget)
    : transport_(transport), base_url_(std::move(base_url)), retry_budget_(retry_budget) {}

absl::StatusOr<std::string> MetadataClient::Get(const std::string& path) {
  HttpRequest request;
  request.url = absl::StrCat(base_url_, "/computeMetadata/v1/", path);
  request.headers = {{"Metadata-Flavor", "Google"}};
  request.timeout = absl::Seconds(10);
  absl::StatusOr<HttpResponse> response = SendWithRetries(transport_, request, retry_budget_);
  if (!response.ok()) {
    return absl::UnavailableError(
        absl::StrCat("the metadata server does not answer: ", response.status().message()));
  }
  if (response->status == 404) {
    return absl::NotFoundError(
        absl::StrCat("metadata ", path, " is not set on this instance (", request.url, ")"));
  }
  if (response->status != 200) {
    return absl::UnavailableError(
        absl::StrCat("metadata ", request.url, ": ", DescribeResponse(*response)));
  }
  return response->body;
}

absl::StatusOr<std::string> MetadataClient::AccessToken() {
  absl::MutexLock lock(&mu_);
  if (absl::Now() < token_expiry_) return token_;
  absl::StatusOr<std::string> body = Get("instance/service-accounts/default/token");
  if (!body.ok()) return body.status();
  const nlohmann::json json = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("access_token") || !json["access_token"].is_string()) {
    return absl::DataLossError(absl::StrCat(
        "the metadata server's token answer has no access_token: ", body->substr(0, 200)));
  }
  token_ = json["access_token"].get<std::string>();
  const int64_t expires_in = json.contains("expires_in") && json["expires_in"].is_number_integer()
                                 ? json["expires_in"].get<int64_t>()
                                 : 300;
  token_expiry_ = absl::Now() + absl::Seconds(expires_in) - absl::Minutes(1);
  return token_;
}

}  // namespace pstrain
