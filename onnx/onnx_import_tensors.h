#ifndef PSTRAIN_ONNX_ONNX_IMPORT_TENSORS_H_
#define PSTRAIN_ONNX_ONNX_IMPORT_TENSORS_H_

// Internal to onnx_import.cc: an ONNX TensorProto's values, read without
// trusting it. Every dimension must be positive and the product of the
// dimensions must match the data the tensor holds (computed without
// overflow) before anything is allocated, so a tensor that declares 2^40
// elements costs nothing. Messages name the tensor (`what`) and do not
// begin with the file's name (the caller adds it).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "onnx/onnx.pb.h"

namespace pstrain {
namespace onnx_import_internal {

// More elements than this in one tensor is refused (4 GiB of floats).
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 30;

// "[8, 1, 3, 3]".
std::string DimsText(const std::vector<int64_t>& dims);
std::vector<int64_t> DimsOf(const onnx::TensorProto& t);

// The ONNX name of a data type ("FLOAT", "INT64", ...).
std::string DataTypeName(int data_type);

// The product of `dims`; InvalidArgument for a dimension that is not
// positive, DataLoss for a product over kMaxTensorElements.
absl::StatusOr<int64_t> CheckedElements(const std::vector<int64_t>& dims, absl::string_view what);

// A float32 tensor's values (raw_data little-endian or float_data).
// InvalidArgument for another type, external data or segments; DataLoss
// when the data does not hold exactly the declared elements.
absl::StatusOr<std::vector<float>> FloatValues(const onnx::TensorProto& t, absl::string_view what);

// An INT64 or INT32 tensor's values, at most `max_elements` of them (shape
// arithmetic: a few numbers).
absl::StatusOr<std::vector<int64_t>> IntValues(const onnx::TensorProto& t, absl::string_view what,
                                               int64_t max_elements);

}  // namespace onnx_import_internal
}  // namespace pstrain

#endif  // PSTRAIN_ONNX_ONNX_IMPORT_TENSORS_H_
