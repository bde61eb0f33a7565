#include "serving/request_reader.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "serving/predictor.h"
#include "simdjson.h"

namespace pstrain {
namespace {

// The offset of the first byte that does not belong to well-formed UTF-8
// (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF), or npos.
size_t FirstInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int extra = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
    if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (i + extra >= s.size()) return i;
    for (int k = 1; k <= extra; ++k) {
      const unsigned char b = static_cast<unsigned char>(s[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return i;
    }
    i += extra + 1;
  }
  return std::string_view::npos;
}

// InvalidArgument if `body` is not UTF-8 (RFC 8259: JSON exchanged between
// systems is UTF-8), naming the encoding it looks like.
absl::Status CheckUtf8(std::string_view body) {
  constexpr char kSend[] = "; send the JSON as UTF-8";
  auto starts = [&](std::string_view prefix) { return body.substr(0, prefix.size()) == prefix; };
  if (starts(std::string_view("\x00\x00\xFE\xFF", 4)) ||
      starts(std::string_view("\xFF\xFE\x00\x00", 4))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request body is UTF-32, not UTF-8 (it starts with a UTF-32 byte-order mark)", kSend));
  }
  if (starts("\xFF\xFE") || starts("\xFE\xFF")) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request body is UTF-16, not UTF-8 (it starts with the byte-order mark ",
                     starts("\xFF\xFE") ? "FF FE" : "FE FF", ")", kSend));
  }
  if (body.size() >= 2 && body[0] != '\0' && body[1] == '\0') {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request body looks like UTF-16, not UTF-8 (its second byte is 0)", kSend));
  }
  const size_t bad = FirstInvalidUtf8(body);
  if (bad != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request body is not UTF-8: byte ", bad, " is 0x",
                     absl::Hex(static_cast<unsigned char>(body[bad]), absl::kZeroPad2),
                     " (Latin-1 or another 8-bit encoding?)", kSend));
  }
  return absl::OkStatus();
}

// Numbers nested exactly as `dims` (from `depth` on), each in [0, 1],
// appended to `out`; false at the first thing that is not.
bool ReadNumbers(simdjson::dom::element v, const int64_t* dims, int depth, int levels,
                 std::vector<float>* out) {
  if (depth == levels) {
    double x;
    if (v.get_double().get(x) != simdjson::SUCCESS) return false;  // not a number
    if (!std::isfinite(x) || x < 0.0 || x > 1.0) return false;
    out->push_back(static_cast<float>(x));
    return true;
  }
  simdjson::dom::array list;
  if (v.get_array().get(list) != simdjson::SUCCESS) return false;
  if (static_cast<int64_t>(list.size()) != dims[depth]) return false;
  for (simdjson::dom::element e : list) {
    if (!ReadNumbers(e, dims, depth + 1, levels, out)) return false;
  }
  return true;
}

// One instance: a flat list of H * W * C, [H][W] when C is 1, or [H][W][C].
bool ReadInstance(simdjson::dom::element instance, const std::vector<int64_t>& shape,
                  std::vector<float>* out) {
  int levels = 0;  // how deep the first elements go: [[0, ...], ...] is 2
  for (simdjson::dom::element e = instance; e.is_array() && levels < 4; ++levels) {
    simdjson::dom::array list = e.get_array().value_unsafe();
    if (list.begin() == list.end()) return false;
    e = *list.begin();
  }
  const int64_t h = shape[0], w = shape[1], c = shape[2];
  int64_t dims[3];
  if (levels == 1) {
    dims[0] = h * w * c;
  } else if (levels == 2 && c == 1) {
    dims[0] = h, dims[1] = w;
  } else if (levels == 3) {
    dims[0] = h, dims[1] = w, dims[2] = c;
  } else {
    return false;
  }
  return ReadNumbers(instance, dims, 0, levels, out);
}

// The list of instances the request object holds under "instances" or
// "inputs" (or "inputs": {"image": list}), next to at most a
// "signature_name" of "serving_default" and nothing else.
bool InstanceList(simdjson::dom::object request, bool* row, simdjson::dom::array* list) {
  bool seen_signature = false, seen_list = false;
  for (simdjson::dom::key_value_pair field : request) {
    if (field.key == "signature_name" && !seen_signature) {
      seen_signature = true;
      std::string_view name;
      if (field.value.get_string().get(name) != simdjson::SUCCESS || name != "serving_default")
        return false;
    } else if ((field.key == "instances" || field.key == "inputs") && !seen_list) {
      seen_list = true;
      *row = field.key == "instances";
      simdjson::dom::element v = field.value;
      simdjson::dom::object inputs;
      if (!*row && v.get_object().get(inputs) == simdjson::SUCCESS) {
        if (inputs.size() != 1 || (*inputs.begin()).key != "image") return false;
        v = (*inputs.begin()).value;
      }
      if (v.get_array().get(*list) != simdjson::SUCCESS) return false;
    } else {
      return false;
    }
  }
  return seen_list;
}

}  // namespace

bool ReadPlainRequest(std::string_view body, const std::vector<int64_t>& shape,
                      int64_t max_instances, PlainRequest* out) {
  if (shape.size() != 3) return false;
  *out = PlainRequest();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::object request;
  simdjson::dom::array list;
  if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(request) != simdjson::SUCCESS ||
      !InstanceList(request, &out->row, &list)) {
    return false;
  }
  const int64_t size = shape[0] * shape[1] * shape[2];
  const int64_t n = static_cast<int64_t>(list.size());
  if (n == 0 || n > max_instances) return false;
  out->images.reserve(n * size);
  for (simdjson::dom::element instance : list) {
    if (!ReadInstance(instance, shape, &out->images)) return false;
  }
  out->n = n;
  return static_cast<int64_t>(out->images.size()) == n * size;
}

absl::Status ReadGeneralRequest(std::string_view body, const std::vector<int64_t>& shape,
                                int64_t max_instances, PlainRequest* out) {
  if (shape.size() != 3) return absl::InternalError("the model's input is not HWC");
  if (absl::StripAsciiWhitespace(absl::string_view(body.data(), body.size())).empty()) {
    return absl::InvalidArgumentError("empty request body: send {\"instances\": [...]}");
  }
  // The fast reader refuses what is not UTF-8 (simdjson validates it), so
  // only bodies that come this way are checked.
  if (absl::Status utf8 = CheckUtf8(body); !utf8.ok()) return utf8;
  nlohmann::json request;
  try {
    request = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number too large for a double
    // ("9E999"), which the fuzzer found escaping as an exception.
    return absl::InvalidArgumentError(absl::StrCat("malformed JSON: ", e.what()));
  }
  if (!request.is_object()) {
    return absl::InvalidArgumentError("the request is a JSON object: {\"instances\": [...]}");
  }
  const auto signature = request.find("signature_name");
  if (signature != request.end() &&
      (!signature->is_string() || signature->get<std::string>() != "serving_default")) {
    return absl::InvalidArgumentError(
        absl::StrCat("no signature ", signature->dump(), "; the model has serving_default"));
  }
  const bool row = request.contains("instances");
  if (row == request.contains("inputs")) {
    return absl::InvalidArgumentError(
        "the request has \"instances\" (row format) or \"inputs\" (columnar), one of them");
  }
  // A reference into the request, not a copy of every number in it.
  const nlohmann::json* list = &request.at(row ? "instances" : "inputs");
  if (!row && list->is_object()) {
    if (list->size() != 1 || !list->contains("image")) {
      return absl::InvalidArgumentError(
          "\"inputs\" names the model's one input: {\"inputs\": {\"image\": [...]}}");
    }
    list = &list->at("image");
  }
  const nlohmann::json& instances = *list;
  if (!instances.is_array() || instances.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", row ? "instances" : "inputs", "\" is a non-empty list"));
  }
  const int64_t n = static_cast<int64_t>(instances.size());
  if (n > max_instances) {
    return absl::ResourceExhaustedError(
        absl::StrCat(n, " instances; at most ", max_instances, " per request"));
  }
  const int64_t size = shape[0] * shape[1] * shape[2];
  *out = PlainRequest();
  out->row = row;
  out->n = n;
  out->images.assign(n * size, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    absl::Status s = ParseInstance(instances[i], shape, out->images.data() + i * size);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(row ? "instances" : "inputs", "[", i, "]",
                                                     s.message()[0] == '[' ? "" : ": ",
                                                     s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadPredictRequest(std::string_view body, const std::vector<int64_t>& shape,
                                int64_t max_instances, PlainRequest* out) {
  if (ReadPlainRequest(body, shape, max_instances, out)) return absl::OkStatus();
  return ReadGeneralRequest(body, shape, max_instances, out);
}

}  // namespace pstrain
