#include "data/csv_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "data/feature_hash.h"

namespace pstrain {
namespace {

constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";
constexpr size_t kTextShown = 40;     // of a bad field, enough to recognize it
constexpr size_t kColumnsShown = 30;  // of a header, in an error

// Debian's abseil has its own string_view type; absl functions get this.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// `text` as it appears in a message: quoted, escaped, cut at kTextShown.
std::string Shown(std::string_view text) {
  const bool cut = text.size() > kTextShown;
  return absl::StrCat("\"", absl::CHexEscape(Sv(text.substr(0, kTextShown))), cut ? "...\"" : "\"");
}

std::string CharName(char c) { return Shown(std::string_view(&c, 1)); }

// "a, b, c" and " and N more" past kColumnsShown.
std::string ColumnList(const std::vector<std::string>& names) {
  const size_t shown = std::min(names.size(), kColumnsShown);
  std::vector<std::string> quoted;
  for (size_t i = 0; i < shown; ++i) quoted.push_back(Shown(names[i]));
  std::string list = absl::StrJoin(quoted, ", ");
  if (names.size() > shown) absl::StrAppend(&list, " and ", names.size() - shown, " more");
  return list;
}

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

enum class NumberError { kNone, kNotANumber, kNotFinite, kOutOfRange };

// A decimal number, as the file comment of csv_format.h says: spaces around
// it and a leading '+' allowed; no hexadecimal, no locale.
NumberError ParseNumber(std::string_view text, double* value) {
  while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsSpace(text.back())) text.remove_suffix(1);
  if (text.size() > 1 && text[0] == '+' && text[1] != '-' && text[1] != '+') text.remove_prefix(1);
  if (text.empty()) return NumberError::kNotANumber;
  const char* end = text.data() + text.size();
  const std::from_chars_result r =
      std::from_chars(text.data(), end, *value, std::chars_format::general);
  if (r.ec == std::errc::result_out_of_range && r.ptr == end) return NumberError::kOutOfRange;
  if (r.ec != std::errc() || r.ptr != end) return NumberError::kNotANumber;
  if (!std::isfinite(*value)) return NumberError::kNotFinite;
  return NumberError::kNone;
}

const char* NumberProblem(NumberError e) {
  switch (e) {
    case NumberError::kNotANumber:
      return "is not a number";
    case NumberError::kNotFinite:
      return "is not a finite number";
    case NumberError::kOutOfRange:
      return "is out of the range of a float";
    case NumberError::kNone:
      break;
  }
  return "";
}

// The dense feature of raw value `x` in `column`, or the problem ("" when
// fine).
const char* Transform(const CsvNumericColumn& column, double x, float* out) {
  double y = x;
  switch (column.transform) {
    case CsvTransform::kNone:
      break;
    case CsvTransform::kLog1p:
      if (!(x > -1.0)) return "is <= -1, and log1p (log(1 + x)) needs a value > -1";
      y = std::log1p(x);
      break;
    case CsvTransform::kStandardize:
      y = (x - column.mean) / column.stddev;
      break;
  }
  if (!(std::fabs(y) <= std::numeric_limits<float>::max())) {
    return column.transform == CsvTransform::kStandardize
               ? "is out of the range of a float once standardized"
               : "is out of the range of a float";
  }
  *out = static_cast<float>(y);
  return "";
}

// Splits `line` into `*fields` by the quoting rules of csv_format.h. Views
// point into `line` or `*unescaped`, which is reserved here so that it never
// moves while fields are added. On a quoting error returns the problem and
// sets *bad_field; "" on success.
const char* SplitFields(std::string_view line, char delimiter,
                        std::vector<std::string_view>* fields, std::string* unescaped,
                        size_t* bad_field) {
  fields->clear();
  const size_t n = line.size();
  if (std::memchr(line.data(), '"', n) == nullptr) {
    // Fast path: no quotes anywhere.
    for (size_t i = 0;;) {
      const void* d = std::memchr(line.data() + i, delimiter, n - i);
      if (d == nullptr) {
        fields->push_back(line.substr(i));
        return "";
      }
      const size_t at = static_cast<const char*>(d) - line.data();
      fields->push_back(line.substr(i, at - i));
      i = at + 1;
    }
  }
  unescaped->clear();
  unescaped->reserve(n);  // unescaped text is never longer than the line
  for (size_t i = 0;;) {
    if (i < n && line[i] == '"') {
      const size_t start = i + 1;
      bool doubled = false;
      size_t q = start;
      for (;;) {
        q = line.find('"', q);
        if (q == std::string_view::npos) {
          *bad_field = fields->size();
          return "a quoted field is not closed by '\"' before the end of the record (a '\"' "
                 "inside a quoted field is written \"\")";
        }
        if (q + 1 < n && line[q + 1] == '"') {
          doubled = true;
          q += 2;
          continue;
        }
        break;
      }
      std::string_view content = line.substr(start, q - start);
      if (doubled) {
        const size_t begin = unescaped->size();
        for (size_t k = 0; k < content.size(); ++k) {
          unescaped->push_back(content[k]);
          if (content[k] == '"') ++k;  // the second of ""
        }
        content = std::string_view(unescaped->data() + begin, unescaped->size() - begin);
      }
      fields->push_back(content);
      i = q + 1;
      if (i == n) return "";
      if (line[i] != delimiter) {
        *bad_field = fields->size() - 1;
        return "text follows the closing '\"' of a quoted field (a '\"' inside a quoted field "
               "is written \"\")";
      }
      ++i;
      continue;
    }
    const size_t d = line.find(delimiter, i);
    if (d == std::string_view::npos) {
      fields->push_back(line.substr(i));
      return "";
    }
    fields->push_back(line.substr(i, d - i));
    i = d + 1;
  }
}

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

bool CsvRecordComplete(std::string_view text, char delimiter) {
  if (std::memchr(text.data(), '"', text.size()) == nullptr) return true;
  bool quoted = false;
  bool field_start = true;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c != '"') continue;
      if (i + 1 < text.size() && text[i + 1] == '"') {
        ++i;  // "" inside quotes
      } else {
        quoted = false;
      }
    } else if (c == delimiter) {
      field_start = true;
    } else {
      quoted = field_start && c == '"';
      field_start = false;
    }
  }
  return !quoted;
}

CsvParser::CsvParser(const CsvSchema& schema, std::string file, int num_fields)
    : schema_(schema), file_(std::move(file)), num_fields_(num_fields) {
  Reset();
}

void CsvParser::Reset() {
  data_ = Dataset();
  data_.tabular = true;
  data_.num_dense = static_cast<int64_t>(schema_.numeric.size());
  data_.sparse.resize(schema_.categorical.size());
  for (size_t c = 0; c < schema_.categorical.size(); ++c) {
    data_.sparse[c].name = schema_.categorical[c].name;
    data_.sparse[c].kind = SparseValueKind::kIds;
  }
}

absl::StatusOr<CsvParser> CsvParser::Create(const CsvSchema& schema, std::string_view header_line,
                                            const std::string& file) {
  PSTRAIN_RETURN_IF_ERROR(CheckCsvSchema(schema));
  std::string_view line = header_line;
  if (line.substr(0, kByteOrderMark.size()) == kByteOrderMark) {
    line.remove_prefix(kByteOrderMark.size());
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::vector<std::string_view> fields;
  std::string unescaped;
  size_t bad_field = 0;
  const char* problem = SplitFields(line, schema.delimiter, &fields, &unescaped, &bad_field);
  if (*problem != '\0') {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ":1: the header's column ", bad_field + 1, ": ", problem));
  }
  const std::vector<std::string> header(fields.begin(), fields.end());
  CsvParser parser(schema, file, static_cast<int>(header.size()));

  // The header position of column `name`, read as `what`.
  auto bind = [&](const std::string& name, std::string_view what) -> absl::StatusOr<int> {
    int found = -1;
    std::string case_differs;
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) {
        if (found >= 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(file, ":1: the header names column ", Shown(name), " (", Sv(what),
                           ") twice, as columns ", found + 1, " and ", i + 1,
                           "; rename one, so that the schema reads one column by that name"));
        }
        found = static_cast<int>(i);
      } else if (header[i].size() == name.size() && case_differs.empty() &&
                 absl::EqualsIgnoreCase(header[i], name)) {
        case_differs = header[i];
      }
    }
    if (found >= 0) return found;
    std::string hint;
    if (!case_differs.empty()) {
      hint = absl::StrCat(" (", Shown(case_differs), " differs in case; names must match exactly)");
    } else if (header.size() == 1) {
      for (char d : {',', ';', '\t', '|'}) {
        if (d != schema.delimiter && header[0].find(d) != std::string::npos) {
          hint = absl::StrCat(" (the header is one column: is the delimiter ", CharName(d),
                              "? set csv.delimiter)");
          break;
        }
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(file, ": the header has no column ", Shown(name),
                                                   " (", Sv(what),
                                                   "); its columns: ", ColumnList(header), hint));
  };
  PSTRAIN_ASSIGN_OR_RETURN(parser.label_field_, bind(schema.label, "the label"));
  for (const CsvNumericColumn& c : schema.numeric) {
    PSTRAIN_ASSIGN_OR_RETURN(const int field, bind(c.name, "a numeric column of the schema"));
    parser.numeric_fields_.push_back(field);
  }
  for (const CsvCategoricalColumn& c : schema.categorical) {
    PSTRAIN_ASSIGN_OR_RETURN(const int field, bind(c.name, "a categorical column of the schema"));
    parser.categorical_fields_.push_back(field);
  }
  parser.header_ = header;
  parser.dense_row_.resize(schema.numeric.size());
  parser.missing_dense_.resize(schema.numeric.size());
  for (size_t i = 0; i < schema.numeric.size(); ++i) {
    const CsvNumericColumn& c = schema.numeric[i];
    if (c.default_value) (void)Transform(c, *c.default_value, &parser.missing_dense_[i]);
  }
  return parser;
}

std::string CsvParser::ColumnName(size_t field) const {
  return field < header_.size() ? absl::StrCat("column ", Shown(header_[field]))
                                : absl::StrCat("field ", field + 1);
}

absl::Status CsvParser::FieldError(int64_t line_number, size_t field, std::string_view text,
                                   std::string_view problem) const {
  return absl::InvalidArgumentError(absl::StrCat(file_, ":", line_number, ": ", ColumnName(field),
                                                 ": ", Shown(text), " ", Sv(problem)));
}

absl::Status CsvParser::MissingError(int64_t line_number, size_t field) const {
  if (static_cast<int>(field) == label_field_) {
    return absl::InvalidArgumentError(absl::StrCat(
        file_, ":", line_number, ": the label column ", Shown(header_[field]),
        " is empty; every record needs its label (csv.missing: skip drops such records)"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      file_, ":", line_number, ": column ", Shown(header_[field]),
      " is empty (a missing value); write a value, or set csv.missing to default (a numeric "
      "column takes its default or 0, a categorical one no ids) or to skip (the record is "
      "dropped)"));
}

absl::Status CsvParser::AppendLine(std::string_view line, int64_t line_number) {
  if (line.size() > kCsvMaxRecordBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        file_, ":", line_number, ": a record of ", line.size(), " bytes, over the limit of ",
        kCsvMaxRecordBytes, " (is a quoted field not closed?)"));
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return absl::OkStatus();
  size_t bad_field = 0;
  const char* problem = SplitFields(line, schema_.delimiter, &fields_, &unescaped_, &bad_field);
  if (*problem != '\0') {
    return absl::InvalidArgumentError(
        absl::StrCat(file_, ":", line_number, ": ", ColumnName(bad_field), ": ", problem));
  }
  if (fields_.size() != static_cast<size_t>(num_fields_)) {
    return absl::InvalidArgumentError(absl::StrCat(file_, ":", line_number, ": ", fields_.size(),
                                                   " fields, but the header has ", num_fields_,
                                                   " (", ColumnList(header_),
                                                   "); every record has one field per column (the "
                                                   "delimiter is ",
                                                   CharName(schema_.delimiter), ")"));
  }

  // Missing fields: the whole record is dropped or refused before anything
  // of it is parsed.
  if (schema_.missing == CsvMissing::kSkip) {
    bool missing = fields_[label_field_].empty();
    for (int f : numeric_fields_) missing = missing || fields_[f].empty();
    for (int f : categorical_fields_) missing = missing || fields_[f].empty();
    if (missing) {
      ++skipped_;
      return absl::OkStatus();
    }
  }
  if (fields_[label_field_].empty()) return MissingError(line_number, label_field_);
  if (schema_.missing == CsvMissing::kError) {
    for (int f : numeric_fields_) {
      if (fields_[f].empty()) return MissingError(line_number, f);
    }
    for (int f : categorical_fields_) {
      if (fields_[f].empty()) return MissingError(line_number, f);
    }
  }

  // The label.
  const std::string_view label_text = fields_[label_field_];
  double label = 0;
  const NumberError label_error = ParseNumber(label_text, &label);
  if (label_error != NumberError::kNone || label < 0 ||
      label > std::numeric_limits<int32_t>::max() || label != std::floor(label)) {
    return FieldError(line_number, label_field_, label_text,
                      "is not a label: a class id, an integer >= 0 (0 or 1 for a click model)");
  }

  // The dense features.
  for (size_t i = 0; i < numeric_fields_.size(); ++i) {
    const std::string_view text = fields_[numeric_fields_[i]];
    if (text.empty()) {
      dense_row_[i] = missing_dense_[i];
      continue;
    }
    double x = 0;
    const NumberError e = ParseNumber(text, &x);
    if (e != NumberError::kNone) {
      return FieldError(line_number, numeric_fields_[i], text, NumberProblem(e));
    }
    const char* transform_problem = Transform(schema_.numeric[i], x, &dense_row_[i]);
    if (*transform_problem != '\0') {
      return FieldError(line_number, numeric_fields_[i], text, transform_problem);
    }
  }

  // Nothing below fails: the example is appended whole.
  data_.labels.push_back(static_cast<int32_t>(label));
  data_.dense.insert(data_.dense.end(), dense_row_.begin(), dense_row_.end());
  for (size_t c = 0; c < categorical_fields_.size(); ++c) {
    const CsvCategoricalColumn& column = schema_.categorical[c];
    SparseFeatureColumn& out = data_.sparse[c];
    std::string_view text = fields_[categorical_fields_[c]];
    if (!column.separator) {
      if (!text.empty()) {
        out.values.push_back(static_cast<uint64_t>(HashBucketFast(text, column.hash_buckets)));
      }
    } else {
      while (!text.empty()) {
        const size_t at = text.find(*column.separator);
        const std::string_view token = text.substr(0, at);
        if (!token.empty()) {
          out.values.push_back(static_cast<uint64_t>(HashBucketFast(token, column.hash_buckets)));
        }
        if (at == std::string_view::npos) break;
        text.remove_prefix(at + 1);
      }
    }
    out.offsets.push_back(static_cast<int64_t>(out.values.size()));
  }
  return absl::OkStatus();
}

Dataset CsvParser::Take() {
  Dataset out = std::move(data_);
  Reset();
  return out;
}

}  // namespace pstrain
