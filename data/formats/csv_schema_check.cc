// The CSV schema's checks (data/formats/csv_format.h): what no file can
// satisfy (CheckCsvSchema), and whether a schema's rows are a model's input
// (CheckCsvSchemaFits). The YAML form is read in csv_schema.cc.

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/formats/csv_format.h"
#include "data/formats/csv_format_internal.h"

namespace pstrain {

using csv_internal::CharName;
using csv_internal::Shown;
using csv_internal::Transform;

absl::Status CheckCsvSchema(const CsvSchema& schema) {
  auto bad_char = [](char c) { return c == '"' || c == '\r' || c == '\n'; };
  if (bad_char(schema.delimiter)) {
    return absl::InvalidArgumentError(absl::StrCat("csv delimiter ", CharName(schema.delimiter),
                                                   ": a delimiter cannot be '\"' or a line break"));
  }
  // Names within each group (a bucketized column may share a numeric one's
  // name: the group of the label and the numeric columns, and the group of
  // the label and the categorical ones, each has every name once).
  if (schema.labels.empty()) {
    return absl::InvalidArgumentError("csv schema: no label column (label: or labels:)");
  }
  std::vector<std::string> label_and_numeric = schema.labels;
  for (const CsvNumericColumn& c : schema.numeric) label_and_numeric.push_back(c.name);
  std::vector<std::string> label_and_categorical = schema.labels;
  std::set<std::string> hashed;
  for (const CsvCategoricalColumn& c : schema.categorical) {
    label_and_categorical.push_back(c.name);
    if (!c.bucketized()) hashed.insert(c.name);
  }
  for (const std::string& name : label_and_numeric) {
    if (hashed.contains(name) &&
        std::find(schema.labels.begin(), schema.labels.end(), name) == schema.labels.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "csv schema: column ", Shown(name),
          " is read twice (as a numeric and a hashed categorical column); each column is "
          "read once, or as a number and bucketized"));
    }
  }
  for (const std::vector<std::string>* group : {&label_and_numeric, &label_and_categorical}) {
    std::set<std::string> seen;
    for (const std::string& name : *group) {
      if (name.empty()) {
        return absl::InvalidArgumentError(
            "csv schema: a column (the label, a numeric or a categorical one) has no name");
      }
      if (!seen.insert(name).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "csv schema: column ", Shown(name),
            " is read twice (among the label, numeric and categorical columns); each column is "
            "read once, or as a number and bucketized"));
      }
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
    if (c.bucketized()) {
      if (c.hash_buckets != 0 || c.separator) {
        return absl::InvalidArgumentError(
            absl::StrCat("csv schema: categorical column ", Shown(c.name),
                         " is bucketized; it has no hash_buckets and no separator"));
      }
      for (size_t i = 0; i < c.boundaries.size(); ++i) {
        if (!std::isfinite(c.boundaries[i]) ||
            (i > 0 && !(c.boundaries[i] > c.boundaries[i - 1]))) {
          return absl::InvalidArgumentError(absl::StrCat(
              "csv schema: categorical column ", Shown(c.name), "'s bucketize boundary ", i + 1,
              " (", c.boundaries[i], ") is not finite or not above the one before"));
        }
      }
      continue;
    }
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

absl::Status CheckCsvSchemaFits(const CsvSchema& schema, int64_t num_dense,
                                const std::vector<std::string>& sparse_features) {
  if (static_cast<int64_t>(schema.numeric.size()) != num_dense) {
    return absl::InvalidArgumentError(absl::StrCat("the CSV schema has ", schema.numeric.size(),
                                                   " numeric columns; the model takes ", num_dense,
                                                   " dense features"));
  }
  for (const std::string& feature : sparse_features) {
    bool found = false;
    for (const CsvCategoricalColumn& c : schema.categorical) found = found || c.name == feature;
    if (!found) {
      return absl::InvalidArgumentError(
          absl::StrCat("the model reads sparse feature ", Shown(feature),
                       ", which is no categorical column of the CSV schema"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain
