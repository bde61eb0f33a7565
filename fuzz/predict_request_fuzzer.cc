// pstrain-serve's :predict body readers: any body is read or refused with a
// message; whatever the fast reader (simdjson) takes, the general reader
// (nlohmann-json and ParseInstance) takes too, with the same instances. A
// click model's reader (serving/click_request.h) reads or refuses it too, and
// what it reads has one dense row and one offset per instance in every column.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "serving/click_request.h"
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
  pstrain::ClickInputs inputs;
  inputs.num_dense = 2;
  inputs.features = {"user", "tokens"};
  pstrain::ClickRequest clicks;
  const absl::Status read = pstrain::ReadClickRequest(body, inputs, 8, &clicks);
  if (!read.ok() && read.message().empty()) std::abort();
  if (read.ok()) {
    if (clicks.n > 8 || clicks.dense.size() != static_cast<size_t>(clicks.n) * 2) std::abort();
    for (const pstrain::SparseFeatureColumn& column : clicks.sparse.features) {
      if (column.examples() != clicks.n ||
          column.offsets.back() != static_cast<int64_t>(column.values.size())) {
        std::abort();
      }
    }
  }
  return 0;
}
