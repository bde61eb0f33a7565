#include "data/feature_hash.h"

#include <farmhash.h>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pstrain {

uint64_t Fingerprint64(std::string_view s) { return util::Fingerprint64(s.data(), s.size()); }

int64_t HashBucketFast(std::string_view s, int64_t num_buckets) {
  CHECK_GE(num_buckets, 1) << "HashBucketFast: num_buckets must be >= 1";
  return static_cast<int64_t>(Fingerprint64(s) % static_cast<uint64_t>(num_buckets));
}

int64_t HashBucketFastInt64(int64_t id, int64_t num_buckets) {
  const absl::AlphaNum decimal(id);  // formats into its own buffer: no allocation
  return HashBucketFast(std::string_view(decimal.data(), decimal.size()), num_buckets);
}

}  // namespace pstrain
