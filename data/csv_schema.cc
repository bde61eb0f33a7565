// The CSV schema (data/csv_format.h): its YAML form, read and checked.

#include <charconv>
#include <cmath>
#include <exception>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/csv_format.h"
#include "data/csv_format_internal.h"

namespace pstrain {

using csv_internal::CharName;
using csv_internal::NumberError;
using csv_internal::NumberProblem;
using csv_internal::ParseNumber;
using csv_internal::Shown;
using csv_internal::Sv;
using csv_internal::Transform;

namespace {

// --- The YAML form ---------------------------------------------------------

// As config's ErrorAt: "<where>: <message>, line N".
absl::Status YamlError(const std::string& where, const YAML::Node& node, std::string_view message) {
  const YAML::Mark mark = node.Mark();
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": ", Sv(message),
                   mark.is_null() ? std::string() : absl::StrCat(", line ", mark.line + 1)));
}

// Where an error about the value of `key` is reported: the value, or the
// key for a key with no value (yaml-cpp places that after the key's line).
const YAML::Node& At(const YAML::Node& key, const YAML::Node& value) {
  return value.IsNull() || value.Mark().is_null() ? key : value;
}

// The scalar text of the value of `key`; "" for null (a key with no value).
absl::StatusOr<std::string> ScalarOf(const std::string& where, const YAML::Node& key,
                                     const YAML::Node& value, const std::string& path) {
  if (value.IsNull()) return std::string();
  if (!value.IsScalar()) {
    return YamlError(where, At(key, value),
                     absl::StrCat(path, " must be a single value, not a list or map"));
  }
  return value.Scalar();
}

// One character: a delimiter or a separator.
absl::StatusOr<char> CharOf(const std::string& where, const YAML::Node& key,
                            const YAML::Node& value, const std::string& path,
                            std::string_view example) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::string text, ScalarOf(where, key, value, path));
  if (text.size() != 1 || text[0] == '"' || text[0] == '\r' || text[0] == '\n') {
    return YamlError(where, At(key, value),
                     absl::StrCat(path, " = ", Shown(text),
                                  ": write one character other than '\"' "
                                  "and a line break, quoted, e.g. ",
                                  Sv(example)));
  }
  return text[0];
}

absl::StatusOr<double> NumberOf(const std::string& where, const YAML::Node& key,
                                const YAML::Node& value, const std::string& path,
                                std::string_view example) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::string text, ScalarOf(where, key, value, path));
  double number = 0;
  const NumberError e = ParseNumber(text, &number);
  if (e != NumberError::kNone) {
    return YamlError(where, At(key, value),
                     absl::StrCat(path, " = ", Shown(text), ": ", NumberProblem(e),
                                  "; write a decimal number, e.g. ", Sv(example)));
  }
  return number;
}

// Calls visit(key, key_node, value, path) for each entry of map `node` at
// `path`, refusing a key given twice.
template <typename Visit>
absl::Status ForEachKey(const std::string& where, const YAML::Node& node, const std::string& path,
                        std::string_view expected, Visit visit) {
  if (!node.IsMap()) {
    return YamlError(where, node, absl::StrCat(path, " must be a map, e.g. ", Sv(expected)));
  }
  std::set<std::string> given;
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) {
      return YamlError(where, entry.first, absl::StrCat("a key in ", path, " is not a plain name"));
    }
    const std::string& key = entry.first.Scalar();
    const std::string key_path = absl::StrCat(path, ".", key);
    if (!given.insert(key).second) {
      return YamlError(where, entry.first, absl::StrCat(key_path, " is given twice"));
    }
    PSTRAIN_RETURN_IF_ERROR(visit(key, entry.first, entry.second, key_path));
  }
  return absl::OkStatus();
}

absl::Status UnknownKey(const std::string& where, const YAML::Node& key_node,
                        const std::string& key_path, std::string_view keys) {
  return YamlError(where, key_node,
                   absl::StrCat("unknown key ", key_path, "; the keys here are ", Sv(keys)));
}

// A column's name and where it was given, to report a name used twice.
struct NameAt {
  std::string name;
  std::string path;
  YAML::Node node;
};

absl::StatusOr<CsvNumericColumn> ParseNumeric(const std::string& where, const YAML::Node& node,
                                              const std::string& path) {
  CsvNumericColumn column;
  // Nodes are kept in optionals: assigning to a YAML::Node that refers to a
  // node would assign into the document.
  std::optional<YAML::Node> mean_key, std_key, default_node;
  PSTRAIN_RETURN_IF_ERROR(ForEachKey(
      where, node, path, "{name: price, transform: log1p}",
      [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& value,
          const std::string& key_path) -> absl::Status {
        if (key == "name") {
          PSTRAIN_ASSIGN_OR_RETURN(column.name, ScalarOf(where, key_node, value, key_path));
        } else if (key == "transform") {
          PSTRAIN_ASSIGN_OR_RETURN(const std::string t, ScalarOf(where, key_node, value, key_path));
          if (t == "none") {
            column.transform = CsvTransform::kNone;
          } else if (t == "log1p") {
            column.transform = CsvTransform::kLog1p;
          } else if (t == "standardize") {
            column.transform = CsvTransform::kStandardize;
          } else {
            return YamlError(where, At(key_node, value),
                             absl::StrCat(key_path, " = ", Shown(t),
                                          ": write none, log1p or standardize (with mean and "
                                          "std)"));
          }
        } else if (key == "mean") {
          PSTRAIN_ASSIGN_OR_RETURN(column.mean, NumberOf(where, key_node, value, key_path, "35.2"));
          mean_key.emplace(key_node);
        } else if (key == "std") {
          PSTRAIN_ASSIGN_OR_RETURN(column.stddev,
                                   NumberOf(where, key_node, value, key_path, "12.1"));
          if (!(column.stddev > 0)) {
            return YamlError(where, At(key_node, value),
                             absl::StrCat(key_path, " = ", value.Scalar(),
                                          ": the standard deviation must be > 0"));
          }
          std_key.emplace(key_node);
        } else if (key == "default") {
          PSTRAIN_ASSIGN_OR_RETURN(const double d, NumberOf(where, key_node, value, key_path, "0"));
          if (!(std::fabs(d) <= std::numeric_limits<float>::max())) {
            return YamlError(
                where, value,
                absl::StrCat(key_path, " = ", value.Scalar(), ": is out of the range of a float"));
          }
          column.default_value = static_cast<float>(d);
          default_node.emplace(value);
        } else {
          return UnknownKey(where, key_node, key_path, "name, transform, mean, std and default");
        }
        return absl::OkStatus();
      }));
  if (column.name.empty()) {
    return YamlError(where, node,
                     absl::StrCat(path, " needs name: the column's name in the CSV header"));
  }
  const bool standardize = column.transform == CsvTransform::kStandardize;
  if (!standardize && (mean_key || std_key)) {
    return YamlError(where, mean_key ? *mean_key : *std_key,
                     absl::StrCat(path, ".", mean_key ? "mean" : "std",
                                  " goes with transform: standardize; add it, or remove mean "
                                  "and std"));
  }
  if (standardize && !(mean_key && std_key)) {
    return YamlError(where, node,
                     absl::StrCat(path,
                                  ": transform: standardize needs mean and std (the column's "
                                  "mean and standard deviation), e.g. {name: ",
                                  column.name, ", transform: standardize, mean: 35.2, std: 12.1}"));
  }
  if (default_node) {
    float unused;
    const char* problem = Transform(column, *column.default_value, &unused);
    if (*problem != '\0') {
      return YamlError(where, *default_node,
                       absl::StrCat(path, ".default = ", default_node->Scalar(), " ", problem));
    }
  }
  return column;
}

absl::StatusOr<CsvCategoricalColumn> ParseCategorical(const std::string& where,
                                                      const YAML::Node& node,
                                                      const std::string& path) {
  CsvCategoricalColumn column;
  bool has_buckets = false;
  PSTRAIN_RETURN_IF_ERROR(ForEachKey(
      where, node, path, "{name: country, hash_buckets: 1000}",
      [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& value,
          const std::string& key_path) -> absl::Status {
        if (key == "name") {
          PSTRAIN_ASSIGN_OR_RETURN(column.name, ScalarOf(where, key_node, value, key_path));
        } else if (key == "hash_buckets") {
          PSTRAIN_ASSIGN_OR_RETURN(const std::string text,
                                   ScalarOf(where, key_node, value, key_path));
          const char* end = text.data() + text.size();
          const std::from_chars_result r = std::from_chars(text.data(), end, column.hash_buckets);
          if (r.ec != std::errc() || r.ptr != end || column.hash_buckets < 1) {
            return YamlError(where, At(key_node, value),
                             absl::StrCat(key_path, " = ", Shown(text),
                                          ": write an integer >= 1, the number of ids the "
                                          "values hash into, e.g. 1000"));
          }
          has_buckets = true;
        } else if (key == "separator") {
          PSTRAIN_ASSIGN_OR_RETURN(column.separator,
                                   CharOf(where, key_node, value, key_path, "\"|\""));
        } else {
          return UnknownKey(where, key_node, key_path, "name, hash_buckets and separator");
        }
        return absl::OkStatus();
      }));
  if (column.name.empty()) {
    return YamlError(where, node,
                     absl::StrCat(path, " needs name: the column's name in the CSV header"));
  }
  if (!has_buckets) {
    return YamlError(where, node,
                     absl::StrCat(path,
                                  " needs hash_buckets: the number of ids its values hash "
                                  "into (tf.strings.to_hash_bucket_fast), e.g. {name: ",
                                  column.name, ", hash_buckets: 1000}"));
  }
  return column;
}

// The entries of list `node` at `path` (null: none).
template <typename Parse>
absl::Status ForEachItem(const std::string& where, const YAML::Node& node, const std::string& path,
                         Parse parse) {
  if (node.IsNull()) return absl::OkStatus();
  if (!node.IsSequence()) {
    return YamlError(where, node,
                     absl::StrCat(path,
                                  " must be a list of columns, one per line "
                                  "beginning with -"));
  }
  size_t i = 0;
  for (const YAML::Node& item : node) {
    PSTRAIN_RETURN_IF_ERROR(parse(item, absl::StrCat(path, "[", i++, "]")));
  }
  return absl::OkStatus();
}

absl::StatusOr<CsvSchema> ParseSchema(const YAML::Node& node, const std::string& where) {
  constexpr std::string_view kExample = "{label: clicked, numeric: [{name: price}]}";
  if (node.IsNull()) {
    return YamlError(where, node,
                     absl::StrCat("csv is empty; it needs at least label: the label column, "
                                  "e.g. csv: ",
                                  Sv(kExample)));
  }
  CsvSchema schema;
  std::vector<NameAt> names;
  PSTRAIN_RETURN_IF_ERROR(ForEachKey(
      where, node, "csv", kExample,
      [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& value,
          const std::string& key_path) -> absl::Status {
        if (key == "delimiter") {
          PSTRAIN_ASSIGN_OR_RETURN(schema.delimiter,
                                   CharOf(where, key_node, value, key_path, "\";\""));
        } else if (key == "label") {
          PSTRAIN_ASSIGN_OR_RETURN(schema.label, ScalarOf(where, key_node, value, key_path));
          if (schema.label.empty()) {
            return YamlError(where, At(key_node, value),
                             absl::StrCat(key_path, " is empty; write the label column's name"));
          }
          names.push_back({schema.label, key_path, value});
        } else if (key == "numeric") {
          return ForEachItem(where, value, key_path,
                             [&](const YAML::Node& item, const std::string& path) -> absl::Status {
                               PSTRAIN_ASSIGN_OR_RETURN(CsvNumericColumn c,
                                                        ParseNumeric(where, item, path));
                               names.push_back({c.name, path, item});
                               schema.numeric.push_back(std::move(c));
                               return absl::OkStatus();
                             });
        } else if (key == "categorical") {
          return ForEachItem(where, value, key_path,
                             [&](const YAML::Node& item, const std::string& path) -> absl::Status {
                               PSTRAIN_ASSIGN_OR_RETURN(CsvCategoricalColumn c,
                                                        ParseCategorical(where, item, path));
                               names.push_back({c.name, path, item});
                               schema.categorical.push_back(std::move(c));
                               return absl::OkStatus();
                             });
        } else if (key == "missing") {
          PSTRAIN_ASSIGN_OR_RETURN(const std::string m, ScalarOf(where, key_node, value, key_path));
          if (m == "error") {
            schema.missing = CsvMissing::kError;
          } else if (m == "default") {
            schema.missing = CsvMissing::kDefault;
          } else if (m == "skip") {
            schema.missing = CsvMissing::kSkip;
          } else {
            return YamlError(where, At(key_node, value),
                             absl::StrCat(key_path, " = ", Shown(m),
                                          ": write error (an empty field is an error), default "
                                          "(numeric columns take their default or 0, categorical "
                                          "ones no ids) or skip (the record is dropped)"));
          }
        } else {
          return UnknownKey(where, key_node, key_path,
                            "delimiter, label, numeric, categorical and missing");
        }
        return absl::OkStatus();
      }));
  if (schema.label.empty()) {
    return YamlError(where, node, "csv needs label: the name of the label column");
  }
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (names[i].name != names[j].name) continue;
      const YAML::Mark first = names[j].node.Mark();
      return YamlError(
          where, names[i].node,
          absl::StrCat(
              names[i].path, " reads column ", Shown(names[i].name), ", as ", names[j].path,
              first.is_null() ? std::string() : absl::StrCat(" (line ", first.line + 1, ")"),
              " does; each column is read once"));
    }
  }
  if (absl::Status s = CheckCsvSchema(schema); !s.ok()) {
    return YamlError(where, node, std::string(s.message()));
  }
  return schema;
}

}  // namespace

absl::StatusOr<CsvSchema> ParseCsvSchema(const YAML::Node& node, const std::string& where) {
  // yaml-cpp throws (e.g. on a node that became invalid); nothing leaves here
  // but a Status, as in config/config_yaml_util.h.
  try {
    return ParseSchema(node, where);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": csv: ", e.msg, " at line ", e.mark.line + 1));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(where, ": csv: ", e.what()));
  }
}

absl::StatusOr<CsvSchema> LoadCsvSchema(Env* env, const std::string& path) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not YAML: ", e.msg, " at line ", e.mark.line + 1));
  }
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a CSV schema is a map (csv: {label: ..., numeric: [...], categorical: [...]})"));
  }
  const YAML::Node csv = root["csv"];
  return ParseCsvSchema(csv.IsDefined() ? csv : root, path);
}

absl::Status CheckCsvSchema(const CsvSchema& schema) {
  auto bad_char = [](char c) { return c == '"' || c == '\r' || c == '\n'; };
  if (bad_char(schema.delimiter)) {
    return absl::InvalidArgumentError(absl::StrCat("csv delimiter ", CharName(schema.delimiter),
                                                   ": a delimiter cannot be '\"' or a line break"));
  }
  std::vector<std::string> names = {schema.label};
  for (const CsvNumericColumn& c : schema.numeric) names.push_back(c.name);
  for (const CsvCategoricalColumn& c : schema.categorical) names.push_back(c.name);
  std::set<std::string> seen;
  for (const std::string& name : names) {
    if (name.empty()) {
      return absl::InvalidArgumentError(
          "csv schema: a column (the label, a numeric or a categorical one) has no name");
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "csv schema: column ", Shown(name),
          " is read twice (among the label, numeric and categorical columns); each column is "
          "read once"));
    }
  }
  for (const CsvNumericColumn& c : schema.numeric) {
    if (c.transform == CsvTransform::kStandardize &&
        !(std::isfinite(c.mean) && std::isfinite(c.stddev) && c.stddev > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("csv schema: numeric column ", Shown(c.name), " is standardized with mean ",
                       c.mean, " and std ", c.stddev, "; they must be finite and std > 0"));
    }
    if (c.default_value) {
      float unused;
      const char* problem = std::isfinite(*c.default_value)
                                ? Transform(c, *c.default_value, &unused)
                                : "is not finite";
      if (*problem != '\0') {
        return absl::InvalidArgumentError(absl::StrCat("csv schema: numeric column ", Shown(c.name),
                                                       ": default ", *c.default_value, " ",
                                                       problem));
      }
    }
  }
  for (const CsvCategoricalColumn& c : schema.categorical) {
    if (c.hash_buckets < 1) {
      return absl::InvalidArgumentError(absl::StrCat("csv schema: categorical column ",
                                                     Shown(c.name), " has hash_buckets ",
                                                     c.hash_buckets, "; it must be >= 1"));
    }
    if (c.separator && bad_char(*c.separator)) {
      return absl::InvalidArgumentError(
          absl::StrCat("csv schema: categorical column ", Shown(c.name), " has separator ",
                       CharName(*c.separator), "; a separator cannot be '\"' or a line break"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain
