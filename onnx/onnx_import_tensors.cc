#include "onnx/onnx_import_tensors.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {
namespace onnx_import_internal {
namespace {

// Refuses what no reader here handles: external data and segments.
absl::Status CheckStorage(const onnx::TensorProto& t, absl::string_view what) {
  if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL || t.external_data_size() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what,
        " keeps its data in an external file, which pstrain does not read; save the model "
        "with every tensor inside it (onnx.save(model, path, save_as_external_data=False))"));
  }
  if (t.has_segment()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is a segment of a larger tensor, which pstrain does not read"));
  }
  return absl::OkStatus();
}

absl::Status SizeMismatch(absl::string_view what, const std::vector<int64_t>& dims, int64_t n,
                          absl::string_view held) {
  return absl::DataLossError(absl::StrCat(what, " declares dims ", DimsText(dims), " (", n,
                                          " elements) but holds ", held,
                                          "; the file is damaged or truncated"));
}

}  // namespace

std::string DimsText(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

std::vector<int64_t> DimsOf(const onnx::TensorProto& t) {
  return std::vector<int64_t>(t.dims().begin(), t.dims().end());
}

std::string DataTypeName(int data_type) {
  if (onnx::TensorProto_DataType_IsValid(data_type)) {
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(data_type));
  }
  return absl::StrCat("type ", data_type);
}

absl::StatusOr<int64_t> CheckedElements(const std::vector<int64_t>& dims, absl::string_view what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has dims ", DimsText(dims), ": every dimension must be positive"));
    }
    if (d > kMaxTensorElements || n > kMaxTensorElements / d) {
      return absl::DataLossError(absl::StrCat(what, " declares dims ", DimsText(dims),
                                              ", over the limit of ", kMaxTensorElements,
                                              " elements; the file is damaged or not a model"));
    }
    n *= d;
  }
  return n;
}

absl::StatusOr<std::vector<float>> FloatValues(const onnx::TensorProto& t, absl::string_view what) {
  if (t.data_type() != onnx::TensorProto_DataType_FLOAT) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", DataTypeName(t.data_type()),
                                                   "; pstrain needs float32 (FLOAT) here"));
  }
  if (absl::Status s = CheckStorage(t, what); !s.ok()) return s;
  const std::vector<int64_t> dims = DimsOf(t);
  absl::StatusOr<int64_t> n = CheckedElements(dims, what);
  if (!n.ok()) return n.status();
  std::vector<float> out;
  if (t.has_raw_data()) {
    if (t.float_data_size() > 0) {
      return absl::DataLossError(absl::StrCat(what, " holds both raw_data and float_data"));
    }
    const std::string& raw = t.raw_data();
    if (raw.size() % sizeof(float) != 0 || static_cast<int64_t>(raw.size() / sizeof(float)) != *n) {
      return SizeMismatch(what, dims, *n, absl::StrCat(raw.size(), " bytes of raw_data"));
    }
    out.resize(*n);
    std::memcpy(out.data(), raw.data(), raw.size());  // little-endian, as this machine
    return out;
  }
  if (t.float_data_size() != *n) {
    return SizeMismatch(what, dims, *n, absl::StrCat(t.float_data_size(), " float_data values"));
  }
  out.assign(t.float_data().begin(), t.float_data().end());
  return out;
}

absl::StatusOr<std::vector<int64_t>> IntValues(const onnx::TensorProto& t, absl::string_view what,
                                               int64_t max_elements) {
  const int type = t.data_type();
  if (type != onnx::TensorProto_DataType_INT64 && type != onnx::TensorProto_DataType_INT32) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", DataTypeName(type), "; pstrain needs INT64 or INT32 here"));
  }
  if (absl::Status s = CheckStorage(t, what); !s.ok()) return s;
  const std::vector<int64_t> dims = DimsOf(t);
  absl::StatusOr<int64_t> n = CheckedElements(dims, what);
  if (!n.ok()) return n.status();
  if (*n > max_elements) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", *n, " elements where at most ", max_elements, " are expected"));
  }
  const size_t width = type == onnx::TensorProto_DataType_INT64 ? 8 : 4;
  std::vector<int64_t> out;
  if (t.has_raw_data()) {
    const std::string& raw = t.raw_data();
    if (raw.size() != static_cast<size_t>(*n) * width) {
      return SizeMismatch(what, dims, *n, absl::StrCat(raw.size(), " bytes of raw_data"));
    }
    for (int64_t i = 0; i < *n; ++i) {
      if (width == 8) {
        int64_t v;
        std::memcpy(&v, raw.data() + i * 8, 8);
        out.push_back(v);
      } else {
        int32_t v;
        std::memcpy(&v, raw.data() + i * 4, 4);
        out.push_back(v);
      }
    }
    return out;
  }
  if (width == 8) {
    if (t.int64_data_size() != *n) {
      return SizeMismatch(what, dims, *n, absl::StrCat(t.int64_data_size(), " int64_data values"));
    }
    out.assign(t.int64_data().begin(), t.int64_data().end());
  } else {
    if (t.int32_data_size() != *n) {
      return SizeMismatch(what, dims, *n, absl::StrCat(t.int32_data_size(), " int32_data values"));
    }
    out.assign(t.int32_data().begin(), t.int32_data().end());
  }
  return out;
}

}  // namespace onnx_import_internal
}  // namespace pstrain
