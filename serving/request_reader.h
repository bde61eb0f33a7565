#ifndef PSTRAIN_SERVING_REQUEST_READER_H_
#define PSTRAIN_SERVING_REQUEST_READER_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace pstrain {

// The instances of a :predict request read straight into the model's input.
struct PlainRequest {
  bool row = true;            // "instances" (row format) or "inputs" (columnar)
  int64_t n = 0;              // instances
  std::vector<float> images;  // n * H * W * C, row-major
};

// Reads the body of POST /v1/models/<name>:predict (TensorFlow Serving's
// REST API) into `out`: ReadPlainRequest if it takes it, else
// ReadGeneralRequest. InvalidArgument saying what is wrong and where, or
// ResourceExhausted for more than `max_instances`.
absl::Status ReadPredictRequest(std::string_view body, const std::vector<int64_t>& shape,
                                int64_t max_instances, PlainRequest* out);

// Reads the common request fast: {"instances": [...]} or {"inputs": [...]}
// / {"inputs": {"image": [...]}}, optionally with "signature_name":
// "serving_default", every instance numbers in [0, 1] nested as the model's
// input `shape` (HWC) takes them (a flat list of H * W * C, [H][W] when C is
// 1, or [H][W][C]), at most `max_instances` of them. simdjson parses the body
// at GB/s and the numbers go straight into the model's input (nlohmann-json's
// lexer spends ~3.5 ms on a 220 KB batch-32 body, a third of its forward pass).
//
// Returns false for anything else -- PNG instances, objects, a wrong shape,
// malformed JSON -- and leaves the caller to read the body the general way
// (ReadGeneralRequest), which accepts the other forms and names what is
// wrong. The two agree on every body this accepts (tested).
bool ReadPlainRequest(std::string_view body, const std::vector<int64_t>& shape,
                      int64_t max_instances, PlainRequest* out);

// Every request form: a JSON document (nlohmann::json::parse), then each
// instance through ParseInstance (numbers, {"image": ...}, {"b64": PNG}).
absl::Status ReadGeneralRequest(std::string_view body, const std::vector<int64_t>& shape,
                                int64_t max_instances, PlainRequest* out);

}  // namespace pstrain

#endif  // PSTRAIN_SERVING_REQUEST_READER_H_
