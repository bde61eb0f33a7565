// pstrain-serve's :predict body readers: any body is read or refused with a
// message; whatever the fast reader (simdjson) takes, the general reader
// (nlohmann-json and ParseInstance) takes too, with the same instances.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "serving/request_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{2, 3, 1}, std::vector<int64_t>{2, 2, 3}}) {
    pstrain::PlainRequest plain, general;
    const bool fast = pstrain::ReadPlainRequest(body, shape, 8, &plain);
    const absl::Status s = pstrain::ReadGeneralRequest(body, shape, 8, &general);
    if (fast && (!s.ok() || plain.row != general.row || plain.n != general.n ||
                 plain.images != general.images)) {
      std::abort();
    }
    if (!s.ok() && s.message().empty()) std::abort();
  }
  return 0;
}
