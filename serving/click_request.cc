#include "serving/click_request.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "data/feature_hash.h"

namespace pstrain {
namespace {

constexpr char kDense[] = "dense";

absl::Status BadField(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(where.empty() ? what : absl::StrCat(where, ": ", what));
}

// One value of a sparse feature as the column stores it.
absl::Status SparseValue(const nlohmann::json& v, const std::string& where, SparseValueKind* kind,
                         uint64_t* out) {
  if (v.is_string()) {
    *kind = SparseValueKind::kTokens;
    *out = Fingerprint64(v.get_ref<const std::string&>());
    return absl::OkStatus();
  }
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return BadField(where, absl::StrCat(u, " is past the largest id (2^63 - 1)"));
    }
    *kind = SparseValueKind::kIds;
    *out = u;
    return absl::OkStatus();
  }
  if (v.is_number_integer()) {
    const int64_t id = v.get<int64_t>();
    if (id < 0) return BadField(where, absl::StrCat("id ", id, " is negative; ids are >= 0"));
    *kind = SparseValueKind::kIds;
    *out = static_cast<uint64_t>(id);
    return absl::OkStatus();
  }
  return BadField(where, absl::StrCat("a sparse feature's value is an integer id or a string, not ",
                                      v.is_number_float() ? absl::StrCat("the number ", v.dump())
                                                          : std::string(v.type_name())));
}

// An instance's parsed values, before they join the request.
struct ParsedInstance {
  std::vector<float> dense;
  // Per feature: the values and whether they are ids or strings (-1: none).
  std::vector<std::vector<uint64_t>> values;
  std::vector<int> kinds;
};

// Whether `instance` (an object) is a raw row: no value is a list.
bool IsRawRow(const nlohmann::json& instance) {
  for (const auto& item : instance.items()) {
    if (item.value().is_array()) return false;
  }
  return true;
}

// The CSV field of a raw row's value, or an error.
absl::Status FieldText(const nlohmann::json& v, const std::string& at, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
  } else if (v.is_number_unsigned()) {
    *out = std::to_string(v.get<uint64_t>());
  } else if (v.is_number_integer()) {
    *out = std::to_string(v.get<int64_t>());
  } else if (v.is_number_float()) {
    // The shortest text that reads back as this double: the CSV parser
    // reads the number the client sent.
    char buffer[64];
    const std::to_chars_result r = std::to_chars(buffer, buffer + sizeof(buffer), v.get<double>());
    out->assign(buffer, r.ptr);
  } else if (v.is_null()) {
    out->clear();
  } else {
    return BadField(at, absl::StrCat("a raw row's value is the CSV field: a string, a number or "
                                     "null (missing), not ",
                                     v.type_name()));
  }
  return absl::OkStatus();
}

absl::Status ParseRawRow(const nlohmann::json& instance, const ClickInputs& inputs,
                         const std::string& where, ParsedInstance* parsed) {
  const CsvSchema& schema = *inputs.schema;
  const std::vector<std::string>& columns = inputs.raw_columns;
  std::vector<std::string> texts(columns.size());
  for (const auto& [key, value] : instance.items()) {
    const std::string at = absl::StrCat(where, where.empty() ? "" : ".", key);
    const auto it = std::find(columns.begin(), columns.end(), key);
    if (it == columns.end()) {
      // A whole CSV row, its labels too.
      if (std::find(schema.labels.begin(), schema.labels.end(), key) != schema.labels.end()) {
        continue;
      }
      return BadField(
          at, absl::StrCat("the model has no column \"", key, "\"; its CSV schema reads ",
                           absl::StrJoin(columns, ", "), " (send ids as lists for the id form)"));
    }
    PSTRAIN_RETURN_IF_ERROR(FieldText(value, at, &texts[it - columns.begin()]));
  }
  std::vector<std::string_view> fields(texts.begin(), texts.end());
  PSTRAIN_ASSIGN_OR_RETURN(CsvParser parser,
                           CsvParser::CreateForColumns(schema, columns, "row", CsvLabel::kNone));
  PSTRAIN_RETURN_IF_ERROR(parser.AppendFields(fields, where.empty() ? "the row" : where));
  const Dataset row = parser.Take();
  parsed->dense = row.dense;
  parsed->values.assign(inputs.features.size(), {});
  parsed->kinds.assign(inputs.features.size(), -1);
  for (size_t f = 0; f < inputs.features.size(); ++f) {
    for (const SparseFeatureColumn& column : row.sparse) {
      if (column.name != inputs.features[f] || column.values.empty()) continue;
      parsed->values[f] = column.values;
      parsed->kinds[f] = static_cast<int>(SparseValueKind::kIds);
    }
  }
  return absl::OkStatus();
}

// Appends `parsed` to `out` if each feature keeps one kind of value over
// the request.
absl::Status AppendParsed(const ParsedInstance& parsed, const ClickInputs& inputs,
                          const std::string& where, ClickRequest* out) {
  for (size_t f = 0; f < parsed.values.size(); ++f) {
    const SparseFeatureColumn& column = out->sparse.features[f];
    if (parsed.kinds[f] < 0 || column.values.empty()) continue;
    if (static_cast<int>(column.kind) != parsed.kinds[f]) {
      return BadField(absl::StrCat(where, where.empty() ? "" : ".", inputs.features[f]),
                      absl::StrCat(parsed.kinds[f] == static_cast<int>(SparseValueKind::kIds)
                                       ? "integer ids, but earlier instances gave strings"
                                       : "strings, but earlier instances gave integer ids",
                                   "; send one kind of value per feature in a request"));
    }
  }
  out->dense.insert(out->dense.end(), parsed.dense.begin(), parsed.dense.end());
  for (size_t f = 0; f < parsed.values.size(); ++f) {
    SparseFeatureColumn& column = out->sparse.features[f];
    if (parsed.kinds[f] >= 0 && column.values.empty()) {
      column.kind = static_cast<SparseValueKind>(parsed.kinds[f]);
    }
    column.values.insert(column.values.end(), parsed.values[f].begin(), parsed.values[f].end());
    column.offsets.push_back(static_cast<int64_t>(column.values.size()));
  }
  ++out->n;
  return absl::OkStatus();
}

}  // namespace

absl::Status AcceptRawRows(const CsvSchema& schema, ClickInputs* inputs) {
  PSTRAIN_RETURN_IF_ERROR(CheckCsvSchema(schema));
  PSTRAIN_RETURN_IF_ERROR(CheckCsvSchemaFits(schema, inputs->num_dense, inputs->features));
  std::vector<std::string> columns;
  for (const CsvNumericColumn& c : schema.numeric) columns.push_back(c.name);
  for (const CsvCategoricalColumn& c : schema.categorical) {
    if (std::find(columns.begin(), columns.end(), c.name) == columns.end()) {
      columns.push_back(c.name);
    }
  }
  inputs->schema = std::make_shared<const CsvSchema>(schema);
  inputs->raw_columns = std::move(columns);
  return absl::OkStatus();
}

ClickRequest EmptyClickRequest(const ClickInputs& inputs) {
  ClickRequest r;
  for (const std::string& f : inputs.features) {
    SparseFeatureColumn column;
    column.name = f;
    r.sparse.features.push_back(std::move(column));
  }
  return r;
}

ClickRequest ClickRequestOfExamples(const Dataset& examples, const ClickInputs& inputs) {
  ClickRequest r = EmptyClickRequest(inputs);
  r.n = examples.size();
  r.dense = examples.dense;
  for (SparseFeatureColumn& feature : r.sparse.features) {
    feature.offsets.assign(r.n + 1, 0);  // no column: no values
    for (const SparseFeatureColumn& column : examples.sparse) {
      if (column.name == feature.name) feature = column;
    }
  }
  return r;
}

absl::Status AppendClickInstance(const nlohmann::json& instance, const ClickInputs& inputs,
                                 const std::string& where, ClickRequest* out) {
  if (!instance.is_object()) {
    return BadField(where,
                    absl::StrCat("a click model's instance is an object of \"dense\" and its "
                                 "features, not a ",
                                 instance.type_name()));
  }
  ParsedInstance parsed;
  if (inputs.schema != nullptr && IsRawRow(instance)) {
    PSTRAIN_RETURN_IF_ERROR(ParseRawRow(instance, inputs, where, &parsed));
    return AppendParsed(parsed, inputs, where, out);
  }
  std::vector<float>& dense = parsed.dense;
  std::vector<std::vector<uint64_t>>& values = parsed.values;
  std::vector<int>& kinds = parsed.kinds;
  values.resize(inputs.features.size());
  kinds.assign(inputs.features.size(), -1);
  for (const auto& [key, value] : instance.items()) {
    const std::string at = absl::StrCat(where, where.empty() ? "" : ".", key);
    if (key == kDense) {
      if (inputs.num_dense == 0) {
        return BadField(at, "the model has no dense input; send only its sparse features");
      }
      if (!value.is_array() || static_cast<int64_t>(value.size()) != inputs.num_dense) {
        return BadField(at, absl::StrCat("a list of ", inputs.num_dense, " numbers, not ",
                                         value.is_array() ? absl::StrCat("one of ", value.size())
                                                          : std::string(value.type_name())));
      }
      for (size_t i = 0; i < value.size(); ++i) {
        if (!value[i].is_number() || !std::isfinite(value[i].get<double>()) ||
            std::fabs(value[i].get<double>()) > std::numeric_limits<float>::max()) {
          return BadField(absl::StrCat(at, "[", i, "]"),
                          absl::StrCat("expected a finite float32, got ", value[i].dump()));
        }
        dense.push_back(value[i].get<float>());
      }
      continue;
    }
    const auto it = std::find(inputs.features.begin(), inputs.features.end(), key);
    if (it == inputs.features.end()) {
      const bool raw_column = inputs.schema != nullptr &&
                              std::find(inputs.raw_columns.begin(), inputs.raw_columns.end(),
                                        key) != inputs.raw_columns.end();
      return BadField(at, absl::StrCat("the model has no input \"", key, "\"; it reads ",
                                       inputs.num_dense > 0 ? "\"dense\" and " : "",
                                       "the features ", absl::StrJoin(inputs.features, ", "),
                                       raw_column ? " (\"" : "", raw_column ? key : "",
                                       raw_column ? "\" is a CSV column: a raw row of the columns "
                                                    "has no list values, and this instance has one)"
                                                  : ""));
    }
    const size_t f = it - inputs.features.begin();
    const nlohmann::json one = nlohmann::json::array({value});
    const nlohmann::json& list = value.is_array() ? value : one;
    for (size_t i = 0; i < list.size(); ++i) {
      SparseValueKind kind;
      uint64_t v;
      PSTRAIN_RETURN_IF_ERROR(
          SparseValue(list[i], value.is_array() ? absl::StrCat(at, "[", i, "]") : at, &kind, &v));
      if (kinds[f] >= 0 && kinds[f] != static_cast<int>(kind)) {
        return BadField(at, "mixes integer ids and strings; send one kind");
      }
      kinds[f] = static_cast<int>(kind);
      values[f].push_back(v);
    }
  }
  if (inputs.num_dense > 0 && dense.empty()) {
    return BadField(where, absl::StrCat("no \"dense\": the model takes ", inputs.num_dense,
                                        " dense numbers besides its sparse features"));
  }
  return AppendParsed(parsed, inputs, where, out);
}

absl::Status ReadClickRequest(std::string_view body, const ClickInputs& inputs,
                              int64_t max_instances, ClickRequest* out) {
  *out = EmptyClickRequest(inputs);
  const nlohmann::json doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return BadField("", "the body is not JSON");
  if (!doc.is_object())
    return BadField("", "the body is a JSON object with \"instances\" or \"inputs\"");
  for (const auto& [key, value] : doc.items()) {
    if (key == "instances" || key == "inputs") continue;
    if (key == "signature_name" && value == "serving_default") continue;
    return BadField("", absl::StrCat("unexpected key \"", key,
                                     "\": the body has \"instances\" or \"inputs\" (and optionally "
                                     "\"signature_name\": \"serving_default\")"));
  }
  if (doc.contains("instances") == doc.contains("inputs")) {
    return BadField("",
                    "the body has exactly one of \"instances\" (a list) or \"inputs\" (an object "
                    "of columns)");
  }
  if (doc.contains("instances")) {
    const nlohmann::json& instances = doc["instances"];
    if (!instances.is_array()) return BadField("instances", "is a list of instance objects");
    if (static_cast<int64_t>(instances.size()) > max_instances) {
      return absl::ResourceExhaustedError(absl::StrCat(
          instances.size(), " instances, more than the ", max_instances, " one request may carry"));
    }
    for (size_t i = 0; i < instances.size(); ++i) {
      PSTRAIN_RETURN_IF_ERROR(
          AppendClickInstance(instances[i], inputs, absl::StrCat("instances[", i, "]"), out));
    }
    return absl::OkStatus();
  }
  // Columnar: every column a list of one entry per instance.
  out->row = false;
  const nlohmann::json& columns = doc["inputs"];
  if (!columns.is_object() || columns.empty()) {
    return BadField("inputs", "is an object of columns: \"dense\" and the features, a list each");
  }
  int64_t n = -1;
  for (const auto& [key, column] : columns.items()) {
    if (!column.is_array())
      return BadField(absl::StrCat("inputs.", key), "is a list, one per instance");
    if (n >= 0 && static_cast<int64_t>(column.size()) != n) {
      return BadField(absl::StrCat("inputs.", key),
                      absl::StrCat("has ", column.size(), " entries; the other columns ", n));
    }
    n = static_cast<int64_t>(column.size());
  }
  if (n > max_instances) {
    return absl::ResourceExhaustedError(
        absl::StrCat(n, " instances, more than the ", max_instances, " one request may carry"));
  }
  for (int64_t i = 0; i < n; ++i) {
    nlohmann::json instance = nlohmann::json::object();
    for (const auto& [key, column] : columns.items()) instance[key] = column[i];
    PSTRAIN_RETURN_IF_ERROR(
        AppendClickInstance(instance, inputs, absl::StrCat("inputs[", i, "]"), out));
  }
  return absl::OkStatus();
}

}  // namespace pstrain
