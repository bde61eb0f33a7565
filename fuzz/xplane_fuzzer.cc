// The profile plugin files (common/xplane.h) on arbitrary bytes, read both
// ways: as a `<host>.xplane.pb` (ParseXSpace) and as the Chrome trace JSON
// the XSpace is made from (ChromeTraceToXSpace). Checks: no crash, leak or
// overflow; an XSpace it accepts serializes and parses back the same; an
// XSpace converted from a trace passes ParseXSpace's checks unchanged.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/xplane.h"
#include "google/protobuf/util/message_differencer.h"

namespace {

using tensorflow::profiler::XSpace;

// `space` written and read back: accepted, and equal to itself.
void RoundTrip(const XSpace& space) {
  std::string bytes;
  if (!space.SerializeToString(&bytes)) std::abort();
  absl::StatusOr<XSpace> again = pstrain::ParseXSpace(bytes);
  if (!again.ok()) std::abort();
  if (!google::protobuf::util::MessageDifferencer::Equals(*again, space)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<XSpace> parsed = pstrain::ParseXSpace(bytes);
  if (parsed.ok()) RoundTrip(*parsed);
  absl::StatusOr<XSpace> converted = pstrain::ChromeTraceToXSpace(bytes, "fuzz-0");
  if (converted.ok()) {
    if (converted->hostnames_size() != 1 || converted->planes_size() != 1) std::abort();
    RoundTrip(*converted);
  }
  return 0;
}
