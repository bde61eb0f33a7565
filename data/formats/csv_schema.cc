// The CSV schema (data/formats/csv_format.h): its YAML form, read with config's YAML
// helpers (config/config_yaml_util.h) and checked by csv_schema_check.cc.

#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "config/config_yaml_util.h"
#include "data/formats/csv_format.h"
#include "data/formats/csv_format_internal.h"

namespace pstrain {

using csv_internal::NumberError;
using csv_internal::NumberProblem;
using csv_internal::ParseNumber;
using csv_internal::Shown;
using csv_internal::Sv;
using csv_internal::Transform;

using config_internal::CatchYamlExceptions;
using config_internal::ChildPath;
using config_internal::ErrorAt;
using config_internal::ForEachEntry;
using config_internal::LoadYaml;
using config_internal::ScalarOf;
using config_internal::Source;

namespace {

// --- The YAML form, read with config's YAML helpers -------------------------

// Where an error about the value of `key` is reported: the value, or the
// key for a key with no value (yaml-cpp places that after the key's line).
const YAML::Node& At(const YAML::Node& key, const YAML::Node& value) {
  return value.IsNull() || value.Mark().is_null() ? key : value;
}

// One character: a delimiter or a separator.
absl::StatusOr<char> CharOf(const Source& source, const YAML::Node& key, const YAML::Node& value,
                            const std::string& path, std::string_view example) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::string text, ScalarOf(source, value, path));
  if (text.size() != 1 || text[0] == '"' || text[0] == '\r' || text[0] == '\n') {
    return ErrorAt(source, At(key, value),
                   absl::StrCat(path, " = ", Shown(text),
                                ": write one character other than '\"' "
                                "and a line break, quoted, e.g. ",
                                Sv(example)));
  }
  return text[0];
}

absl::StatusOr<double> NumberOf(const Source& source, const YAML::Node& key,
                                const YAML::Node& value, const std::string& path,
                                std::string_view example) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::string text, ScalarOf(source, value, path));
  double number = 0;
  const NumberError e = ParseNumber(text, &number);
  if (e != NumberError::kNone) {
    return ErrorAt(source, At(key, value),
                   absl::StrCat(path, " = ", Shown(text), ": ", NumberProblem(e),
                                "; write a decimal number, e.g. ", Sv(example)));
  }
  return number;
}

// Calls visit(key, key_node, value, key_path) for each entry of map `node`
// at `path`, refusing a key given twice (ForEachEntry); a node that is not a
// map (or null) is refused with `expected`, an example of one.
template <typename Visit>
absl::Status ForEachKey(const Source& source, const YAML::Node& node, const std::string& path,
                        std::string_view expected, Visit visit) {
  if (!node.IsMap()) {
    return ErrorAt(source, node, absl::StrCat(path, " must be a map, e.g. ", Sv(expected)));
  }
  return ForEachEntry(
      source, node, path,
      [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& value) {
        return visit(key, key_node, value, ChildPath(path, key));
      });
}

absl::Status UnknownKey(const Source& source, const YAML::Node& key_node,
                        const std::string& key_path, std::string_view keys) {
  return ErrorAt(source, key_node,
                 absl::StrCat("unknown key ", key_path, "; the keys here are ", Sv(keys)));
}

// A column's name and where it was given, to report a name used twice.
struct NameAt {
  std::string name;
  std::string path;
  YAML::Node node;
  // A numeric column, or a bucketized one: the two may read one column.
  enum Kind { kOther, kNumeric, kBucketized } kind = kOther;
};

// Whether two columns of the schema may have one name: a column read as a
// number and as its bucket.
bool MayShareAName(NameAt::Kind a, NameAt::Kind b) {
  return (a == NameAt::kNumeric && b == NameAt::kBucketized) ||
         (a == NameAt::kBucketized && b == NameAt::kNumeric);
}

absl::StatusOr<CsvNumericColumn> ParseNumeric(const Source& source, const YAML::Node& node,
                                              const std::string& path) {
  CsvNumericColumn column;
  // Nodes are kept in optionals: assigning to a YAML::Node that refers to a
  // node would assign into the document.
  std::optional<YAML::Node> mean_key, std_key, default_node;
  PSTRAIN_RETURN_IF_ERROR(ForEachKey(
      source, node, path, "{name: price, transform: log1p}",
      [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& value,
          const std::string& key_path) -> absl::Status {
        if (key == "name") {
          PSTRAIN_ASSIGN_OR_RETURN(column.name, ScalarOf(source, value, key_path));
        } else if (key == "transform") {
          PSTRAIN_ASSIGN_OR_RETURN(const std::string t, ScalarOf(source, value, key_path));
          if (t == "none") {
            column.transform = CsvTransform::kNone;
          } else if (t == "log1p") {
            column.transform = CsvTransform::kLog1p;
          } else if (t == "standardize") {
            column.transform = CsvTransform::kStandardize;
          } else {
            return ErrorAt(source, At(key_node, value),
                           absl::StrCat(key_path, " = ", Shown(t),
                                        ": write none, log1p or standardize (with mean and "
                                        "std)"));
          }
        } else if (key == "mean") {
          PSTRAIN_ASSIGN_OR_RETURN(column.mean,
                                   NumberOf(source, key_node, value, key_path, "35.2"));
          mean_key.emplace(key_node);
        } else if (key == "std") {
          PSTRAIN_ASSIGN_OR_RETURN(column.stddev,
                                   NumberOf(source, key_node, value, key_path, "12.1"));
          if (!(column.stddev > 0)) {
            return ErrorAt(source, At(key_node, value),
                           absl::StrCat(key_path, " = ", value.Scalar(),
                                        ": the standard deviation must be > 0"));
          }
          std_key.emplace(key_node);
        } else if (key == "default") {
          PSTRAIN_ASSIGN_OR_RETURN(const double d,
                                   NumberOf(source, key_node, value, key_path, "0"));
          if (!(std::fabs(d) <= std::numeric_limits<float>::max())) {
            return ErrorAt(
                source, value,
                absl::StrCat(key_path, " = ", value.Scalar(), ": is out of the range of a float"));
          }
          column.default_value = static_cast<float>(d);
          default_node.emplace(value);
        } else {
          return UnknownKey(source, key_node, key_path, "name, transform, mean, std and default");
        }
        return absl::OkStatus();
      }));
  if (column.name.empty()) {
    return ErrorAt(source, node,
                   absl::StrCat(path, " needs name: the column's name in the CSV header"));
  }
  const bool standardize = column.transform == CsvTransform::kStandardize;
  if (!standardize && (mean_key || std_key)) {
    return ErrorAt(source, mean_key ? *mean_key : *std_key,
                   absl::StrCat(path, ".", mean_key ? "mean" : "std",
                                " goes with transform: standardize; add it, or remove mean "
                                "and std"));
  }
  if (standardize && !(mean_key && std_key)) {
    return ErrorAt(source, node,
                   absl::StrCat(path,
                                ": transform: standardize needs mean and std (the column's "
                                "mean and standard deviation), e.g. {name: ",
                                column.name, ", transform: standardize, mean: 35.2, std: 12.1}"));
  }
  if (default_node) {
    float unused;
    const char* problem = Transform(column, *column.default_value, &unused);
    if (*problem != '\0') {
      return ErrorAt(source, *default_node,
                     absl::StrCat(path, ".default = ", default_node->Scalar(), " ", problem));
    }
  }
  return column;
}

absl::StatusOr<CsvCategoricalColumn> ParseCategorical(const Source& source, const YAML::Node& node,
                                                      const std::string& path) {
  CsvCategoricalColumn column;
  bool has_buckets = false;
  std::optional<YAML::Node> bucketize_key, separator_key;
  PSTRAIN_RETURN_IF_ERROR(ForEachKey(
      source, node, path, "{name: country, hash_buckets: 1000}",
      [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& value,
          const std::string& key_path) -> absl::Status {
        if (key == "name") {
          PSTRAIN_ASSIGN_OR_RETURN(column.name, ScalarOf(source, value, key_path));
        } else if (key == "hash_buckets") {
          PSTRAIN_ASSIGN_OR_RETURN(const std::string text, ScalarOf(source, value, key_path));
          const char* end = text.data() + text.size();
          const std::from_chars_result r = std::from_chars(text.data(), end, column.hash_buckets);
          if (r.ec != std::errc() || r.ptr != end || column.hash_buckets < 1) {
            return ErrorAt(source, At(key_node, value),
                           absl::StrCat(key_path, " = ", Shown(text),
                                        ": write an integer >= 1, the number of ids the "
                                        "values hash into, e.g. 1000"));
          }
          has_buckets = true;
        } else if (key == "separator") {
          PSTRAIN_ASSIGN_OR_RETURN(column.separator,
                                   CharOf(source, key_node, value, key_path, "\"|\""));
          separator_key.emplace(key_node);
        } else if (key == "bucketize") {
          constexpr std::string_view kExample = "[18, 25, 35, 50, 65]";
          if (!value.IsSequence() || value.size() == 0) {
            return ErrorAt(source, At(key_node, value),
                           absl::StrCat(key_path,
                                        " must be a list of one or more boundaries, increasing, "
                                        "e.g. ",
                                        Sv(kExample)));
          }
          for (size_t i = 0; i < value.size(); ++i) {
            const std::string item_path = absl::StrCat(key_path, "[", i, "]");
            PSTRAIN_ASSIGN_OR_RETURN(const double b,
                                     NumberOf(source, key_node, value[i], item_path, "18"));
            if (!column.boundaries.empty() && !(b > column.boundaries.back())) {
              return ErrorAt(source, At(key_node, value[i]),
                             absl::StrCat(item_path, " = ", value[i].Scalar(),
                                          ": the boundaries must be strictly increasing, e.g. ",
                                          Sv(kExample)));
            }
            column.boundaries.push_back(b);
          }
          bucketize_key.emplace(key_node);
        } else {
          return UnknownKey(source, key_node, key_path,
                            "name, hash_buckets, separator and bucketize");
        }
        return absl::OkStatus();
      }));
  if (column.name.empty()) {
    return ErrorAt(source, node,
                   absl::StrCat(path, " needs name: the column's name in the CSV header"));
  }
  if (bucketize_key && has_buckets) {
    return ErrorAt(source, *bucketize_key,
                   absl::StrCat(path,
                                " has both bucketize (ids by the value's bucket) and "
                                "hash_buckets (ids by the text's hash); keep one"));
  }
  if (bucketize_key && separator_key) {
    return ErrorAt(source, *separator_key,
                   absl::StrCat(path,
                                ".separator: a bucketized column holds one number; remove "
                                "separator, or hash the tokens with hash_buckets"));
  }
  if (!has_buckets && !bucketize_key) {
    return ErrorAt(source, node,
                   absl::StrCat(path,
                                " needs hash_buckets: the number of ids its values hash "
                                "into (tf.strings.to_hash_bucket_fast), e.g. {name: ",
                                column.name,
                                ", hash_buckets: 1000}, or bucketize: the boundaries a "
                                "number's id is counted by, e.g. {name: ",
                                column.name, ", bucketize: [18, 25, 35, 50, 65]}"));
  }
  return column;
}

// The entries of list `node` at `path` (null: none).
template <typename Parse>
absl::Status ForEachItem(const Source& source, const YAML::Node& node, const std::string& path,
                         Parse parse) {
  if (node.IsNull()) return absl::OkStatus();
  if (!node.IsSequence()) {
    return ErrorAt(source, node,
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

absl::StatusOr<CsvSchema> ParseSchema(const YAML::Node& node, const Source& source) {
  constexpr std::string_view kExample = "{label: clicked, numeric: [{name: price}]}";
  if (node.IsNull()) {
    return ErrorAt(source, node,
                   absl::StrCat("csv is empty; it needs at least label: the label column, "
                                "e.g. csv: ",
                                Sv(kExample)));
  }
  CsvSchema schema;
  std::vector<NameAt> names;
  PSTRAIN_RETURN_IF_ERROR(ForEachKey(
      source, node, "csv", kExample,
      [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& value,
          const std::string& key_path) -> absl::Status {
        if (key == "delimiter") {
          PSTRAIN_ASSIGN_OR_RETURN(schema.delimiter,
                                   CharOf(source, key_node, value, key_path, "\";\""));
        } else if (key == "label" || key == "labels") {
          if (!schema.labels.empty()) {
            return ErrorAt(source, key_node,
                           absl::StrCat(key_path,
                                        ": give label (one column) or labels (one per head), "
                                        "not both"));
          }
          if (key == "label") {
            PSTRAIN_ASSIGN_OR_RETURN(std::string label, ScalarOf(source, value, key_path));
            if (label.empty()) {
              return ErrorAt(source, At(key_node, value),
                             absl::StrCat(key_path, " is empty; write the label column's name"));
            }
            names.push_back({label, key_path, value});
            schema.labels.push_back(std::move(label));
            return absl::OkStatus();
          }
          if (!value.IsSequence() || value.size() == 0) {
            return ErrorAt(source, At(key_node, value),
                           absl::StrCat(key_path,
                                        " is a list of label columns, one per head of the "
                                        "model: labels: [delayed, delay]"));
          }
          return ForEachItem(source, value, key_path,
                             [&](const YAML::Node& item, const std::string& path) -> absl::Status {
                               PSTRAIN_ASSIGN_OR_RETURN(std::string label,
                                                        ScalarOf(source, item, path));
                               if (label.empty()) {
                                 return ErrorAt(source, item,
                                                absl::StrCat(path,
                                                             " is empty; write a label "
                                                             "column's name"));
                               }
                               names.push_back({label, path, item});
                               schema.labels.push_back(std::move(label));
                               return absl::OkStatus();
                             });
        } else if (key == "numeric") {
          return ForEachItem(source, value, key_path,
                             [&](const YAML::Node& item, const std::string& path) -> absl::Status {
                               PSTRAIN_ASSIGN_OR_RETURN(CsvNumericColumn c,
                                                        ParseNumeric(source, item, path));
                               names.push_back({c.name, path, item, NameAt::kNumeric});
                               schema.numeric.push_back(std::move(c));
                               return absl::OkStatus();
                             });
        } else if (key == "categorical") {
          return ForEachItem(
              source, value, key_path,
              [&](const YAML::Node& item, const std::string& path) -> absl::Status {
                PSTRAIN_ASSIGN_OR_RETURN(CsvCategoricalColumn c,
                                         ParseCategorical(source, item, path));
                names.push_back(
                    {c.name, path, item, c.bucketized() ? NameAt::kBucketized : NameAt::kOther});
                schema.categorical.push_back(std::move(c));
                return absl::OkStatus();
              });
        } else if (key == "missing") {
          PSTRAIN_ASSIGN_OR_RETURN(const std::string m, ScalarOf(source, value, key_path));
          if (m == "error") {
            schema.missing = CsvMissing::kError;
          } else if (m == "default") {
            schema.missing = CsvMissing::kDefault;
          } else if (m == "skip") {
            schema.missing = CsvMissing::kSkip;
          } else {
            return ErrorAt(source, At(key_node, value),
                           absl::StrCat(key_path, " = ", Shown(m),
                                        ": write error (an empty field is an error), default "
                                        "(numeric columns take their default or 0, categorical "
                                        "ones no ids) or skip (the record is dropped)"));
          }
        } else {
          return UnknownKey(source, key_node, key_path,
                            "delimiter, label (or labels), numeric, categorical and missing");
        }
        return absl::OkStatus();
      }));
  if (schema.labels.empty()) {
    return ErrorAt(source, node,
                   "csv needs label: the name of the label column (or labels: one per head)");
  }
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (names[i].name != names[j].name || MayShareAName(names[i].kind, names[j].kind)) {
        continue;
      }
      const YAML::Mark first = names[j].node.Mark();
      return ErrorAt(
          source, names[i].node,
          absl::StrCat(
              names[i].path, " reads column ", Shown(names[i].name), ", as ", names[j].path,
              first.is_null() ? std::string() : absl::StrCat(" (line ", first.line + 1, ")"),
              " does; each column is read once (or as a number and bucketized)"));
    }
  }
  if (absl::Status s = CheckCsvSchema(schema); !s.ok()) {
    return ErrorAt(source, node, std::string(s.message()));
  }
  return schema;
}

}  // namespace

absl::StatusOr<CsvSchema> ParseCsvSchema(const YAML::Node& node, const std::string& where) {
  // yaml-cpp throws (e.g. on a node that became invalid); nothing leaves here
  // but a Status.
  const Source source{where, /*show_lines=*/true};
  return CatchYamlExceptions<CsvSchema>(absl::StrCat(where, ": csv"),
                                        [&] { return ParseSchema(node, source); });
}

absl::StatusOr<CsvSchema> LoadCsvSchema(Env* env, const std::string& path) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
  return ParseCsvSchemaText(text, path);
}

absl::StatusOr<CsvSchema> ParseCsvSchemaText(const std::string& text, const std::string& path) {
  PSTRAIN_ASSIGN_OR_RETURN(YAML::Node root, CatchYamlExceptions<YAML::Node>(path, [&] {
                             return LoadYaml(text, path, "YAML");
                           }));
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a CSV schema is a map (csv: {label: ..., numeric: [...], categorical: [...]})"));
  }
  const YAML::Node csv = root["csv"];
  return ParseCsvSchema(csv.IsDefined() ? csv : root, path);
}

}  // namespace pstrain
