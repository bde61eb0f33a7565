#ifndef PSTRAIN_CLOUD_METADATA_H_
#define PSTRAIN_CLOUD_METADATA_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cloud/http.h"

namespace pstrain {

// The Compute Engine metadata server: this instance's attributes and its
// service account's access token, read with "Metadata-Flavor: Google" as
// the server requires. Thread-safe.
class MetadataClient {
 public:
  // The real server's address; GCE_METADATA_HOST ("host:port") overrides it,
  // as in Google's client libraries.
  static constexpr char kDefaultBaseUrl[] = "http://metadata.google.internal";

  // `base_url` is e.g. "http://169.254.169.254" (no trailing slash);
  // `transport` must outlive the client.
  MetadataClient(HttpTransport* transport, std::string base_url,
                 absl::Duration retry_budget = absl::Seconds(10));

  // The value at computeMetadata/v1/<path> ("instance/attributes/pstrain-role").
  // NotFound naming the key if it is not set; Unavailable naming the URL if
  // the server does not answer.
  absl::StatusOr<std::string> Get(const std::string& path);

  // The default service account's OAuth access token, cached until a minute
  // before it expires.
  absl::StatusOr<std::string> AccessToken();

  const std::string& base_url() const { return base_url_; }

 private:
  HttpTransport* const transport_;
  const std::string base_url_;
  const absl::Duration retry_budget_;
  absl::Mutex mu_;
  std::string token_ ABSL_GUARDED_BY(mu_);
  absl::Time token_expiry_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace pstrain

#endif  // PSTRAIN_CLOUD_METADATA_H_
