#include "data/formats/tabular_examples.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/record_reader.h"
#include "common/status_macros.h"
#include "data/feature_hash.h"
#include "data/formats/tfrecord_dataset.h"
#include "proto/example.pb.h"

namespace pstrain {
namespace {

// Enough of an Example's feature names to recognize it, in one line.
constexpr size_t kFeatureNamesShown = 20;

const char* KindName(const tf::Feature& feature) {
  switch (feature.kind_case()) {
    case tf::Feature::kBytesList:
      return "a bytes_list";
    case tf::Feature::kFloatList:
      return "a float_list";
    case tf::Feature::kInt64List:
      return "an int64_list";
    default:
      return "a Feature with no list";
  }
}

int ValueCount(const tf::Feature& feature) {
  if (feature.has_int64_list()) return feature.int64_list().value_size();
  if (feature.has_float_list()) return feature.float_list().value_size();
  if (feature.has_bytes_list()) return feature.bytes_list().value_size();
  return 0;
}

const char* KindName(SparseValueKind kind) {
  return kind == SparseValueKind::kIds ? "an int64_list (ids)" : "a bytes_list (tokens)";
}

// "; this Example has: a, b, c" (sorted), or "; this Example has no features".
std::string FeaturesItHas(const tf::Features& features) {
  if (features.feature().empty()) return "; this Example has no features";
  std::vector<std::string> names;
  for (const auto& [name, feature] : features.feature()) names.push_back(name);
  std::sort(names.begin(), names.end());
  const size_t more = names.size() > kFeatureNamesShown ? names.size() - kFeatureNamesShown : 0;
  names.resize(names.size() - more);
  std::string list = absl::StrJoin(names, ", ");
  if (more > 0) absl::StrAppend(&list, " and ", more, " more");
  return absl::StrCat("; this Example has: ", list);
}

}  // namespace

absl::Status CheckTabularFeatures(const TabularFeatures& features) {
  if (features.labels.empty()) return absl::InvalidArgumentError("tabular examples need a label");
  for (const TabularLabel& label : features.labels) {
    if (label.num_classes < 2 && label.num_classes != 0) {
      return absl::InvalidArgumentError(absl::StrCat("tabular examples whose label ", label.name,
                                                     " has ", label.num_classes,
                                                     " classes; 2 or more, or 0 (regression)"));
    }
  }
  if (features.num_dense < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tabular examples with ", features.num_dense, " dense features"));
  }
  std::vector<std::string> names, label_names;
  for (const TabularLabel& label : features.labels) label_names.push_back(label.name);
  names = label_names;
  if (features.num_dense > 0) names.push_back(features.dense);
  names.insert(names.end(), features.sparse.begin(), features.sparse.end());
  std::set<std::string> seen;
  for (const std::string& name : names) {
    if (name.empty()) return absl::InvalidArgumentError("a tabular feature with an empty name");
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "feature \"", name, "\" is named twice among the label",
          label_names.size() > 1 ? "s (\"" : " (\"", absl::StrJoin(label_names, "\", \""),
          "\"), the dense feature (\"", features.dense, "\") and the sparse features (",
          absl::StrJoin(features.sparse, ", "), "); each must be its own feature"));
    }
  }
  return absl::OkStatus();
}

TabularExampleParser::TabularExampleParser(const TabularFeatures& features)
    : features_(features), first_seen_(features.sparse.size()) {
  Reset();
}

void TabularExampleParser::Reset() {
  data_ = Dataset();
  data_.tabular = true;
  data_.num_dense = features_.num_dense;
  data_.label_width = static_cast<int>(features_.labels.size());
  data_.sparse.resize(features_.sparse.size());
  for (size_t c = 0; c < features_.sparse.size(); ++c) {
    data_.sparse[c].name = features_.sparse[c];
    data_.sparse[c].kind = kinds_.empty() ? SparseValueKind::kIds : kinds_[c];
  }
}

Dataset TabularExampleParser::Take() {
  Dataset out = std::move(data_);
  kinds_.clear();
  for (const SparseFeatureColumn& column : out.sparse) kinds_.push_back(column.kind);
  Reset();
  return out;
}

absl::Status TabularExampleParser::AppendRecord(std::string_view record, const std::string& where) {
  if (!example_.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
    return absl::DataLossError(absl::StrCat(where, " is not a tf.train.Example"));
  }
  // On an error the examples parsed before it stay; this one is dropped.
  const int64_t size = data_.size();
  const size_t dense = data_.dense.size();
  absl::Status status = Append(example_.features(), where);
  if (!status.ok()) {
    data_.labels.resize(size * data_.label_width);
    data_.dense.resize(dense);
    for (SparseFeatureColumn& column : data_.sparse) {
      column.offsets.resize(size + 1);
      column.values.resize(column.offsets.back());
    }
  }
  return status;
}

absl::Status TabularExampleParser::ReadFile(Env* env, const std::string& path) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::string contents, env->ReadFile(path));
  RecordReader reader(contents, path);
  for (int64_t index = 0;; ++index) {
    const uint64_t offset = reader.offset();
    absl::StatusOr<std::string_view> record = reader.ReadRecord();
    if (absl::IsOutOfRange(record.status())) {
      if (index > 0) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(path, " holds no records"));
    }
    PSTRAIN_RETURN_IF_ERROR(record.status());
    PSTRAIN_RETURN_IF_ERROR(
        AppendRecord(*record, absl::StrCat(path, ": record ", index, " (offset ", offset, ")")));
  }
}

absl::Status TabularExampleParser::Append(const tf::Features& f, const std::string& where) {
  for (const TabularLabel& label : features_.labels) {
    PSTRAIN_RETURN_IF_ERROR(AppendLabel(f, label, where));
  }
  if (features_.num_dense > 0) PSTRAIN_RETURN_IF_ERROR(AppendDense(f, where));
  for (size_t c = 0; c < features_.sparse.size(); ++c) {
    PSTRAIN_RETURN_IF_ERROR(AppendSparse(f, c, where));
  }
  return absl::OkStatus();
}

absl::Status TabularExampleParser::AppendLabel(const tf::Features& f, const TabularLabel& label,
                                               const std::string& where) {
  const std::string& name = label.name;
  const int classes = label.num_classes;
  const std::string what =
      absl::StrCat("label feature \"", name, "\" (an int64_list or float_list of one value, ",
                   classes == 0   ? "a regression head's number)"
                   : classes == 2 ? "0 or 1)"
                                  : absl::StrCat("a class in [0, ", classes, "))"));
  auto it = f.feature().find(name);
  if (it == f.feature().end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": every Example needs ", what, FeaturesItHas(f)));
  }
  const tf::Feature& feature = it->second;
  std::optional<double> value;
  if (feature.has_int64_list() && feature.int64_list().value_size() == 1) {
    value = static_cast<double>(feature.int64_list().value(0));
  } else if (feature.has_float_list() && feature.float_list().value_size() == 1) {
    value = feature.float_list().value(0);
  }
  if (!value) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": \"", name, "\" is ", KindName(feature),
                                                   " of ", ValueCount(feature),
                                                   " values; write the ", what));
  }
  if (classes == 0) {
    if (!std::isfinite(static_cast<float>(*value))) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": label \"", name, "\" is ", *value,
                                                     "; a regression label is a finite number"));
    }
    data_.labels.push_back(static_cast<float>(*value));
    return absl::OkStatus();
  }
  if (classes == 2 && *value != 0 && *value != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": label \"", name, "\" is ", *value, "; a binary label is 0 or 1"));
  }
  if (!(*value >= 0 && *value < classes && *value == std::floor(*value))) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": label \"", name, "\" is ", *value,
                                                   "; the model's ", classes, " classes are 0 to ",
                                                   classes - 1));
  }
  data_.labels.push_back(static_cast<float>(*value));
  return absl::OkStatus();
}

absl::Status TabularExampleParser::AppendDense(const tf::Features& f, const std::string& where) {
  const std::string& name = features_.dense;
  const int64_t n = features_.num_dense;
  const std::string what =
      absl::StrCat("dense feature \"", name, "\" (a float_list of ", n, " values)");
  auto it = f.feature().find(name);
  if (it == f.feature().end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": every Example needs ", what, FeaturesItHas(f)));
  }
  const tf::Feature& feature = it->second;
  if (feature.has_float_list() && feature.float_list().value_size() == n) {
    data_.dense.insert(data_.dense.end(), feature.float_list().value().begin(),
                       feature.float_list().value().end());
    return absl::OkStatus();
  }
  if (feature.has_int64_list() && feature.int64_list().value_size() == n) {
    for (int64_t v : feature.int64_list().value()) data_.dense.push_back(static_cast<float>(v));
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      where, ": \"", name, "\" is ", KindName(feature), " of ", ValueCount(feature),
      " values, but the model takes ", n, " dense features; every Example needs ", what));
}

absl::Status TabularExampleParser::AppendSparse(const tf::Features& f, size_t c,
                                                const std::string& where) {
  SparseFeatureColumn& column = data_.sparse[c];
  auto it = f.feature().find(column.name);
  // Absent, or a Feature with no list: no values, as VarLenFeature reads it.
  if (it == f.feature().end() || it->second.kind_case() == tf::Feature::KIND_NOT_SET) {
    column.offsets.push_back(static_cast<int64_t>(column.values.size()));
    return absl::OkStatus();
  }
  const tf::Feature& feature = it->second;
  if (feature.has_float_list()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": sparse feature \"", column.name,
        "\" is a float_list; a sparse feature holds ids (int64_list) or tokens (bytes_list)",
        features_.num_dense > 0
            ? absl::StrCat("; floats belong in the dense feature \"", features_.dense, "\"")
            : ""));
  }
  const SparseValueKind kind =
      feature.has_int64_list() ? SparseValueKind::kIds : SparseValueKind::kTokens;
  if (first_seen_[c].empty()) {
    column.kind = kind;
    first_seen_[c] = where;
  } else if (column.kind != kind) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": sparse feature \"", column.name, "\" is ", KindName(kind), ", but ",
                     KindName(column.kind), " in ", first_seen_[c],
                     "; a sparse feature must hold the same kind in every Example"));
  }
  if (kind == SparseValueKind::kIds) {
    for (int64_t id : feature.int64_list().value()) {
      column.values.push_back(static_cast<uint64_t>(id));
    }
  } else {
    for (const std::string& token : feature.bytes_list().value()) {
      column.values.push_back(Fingerprint64(token));
    }
  }
  column.offsets.push_back(static_cast<int64_t>(column.values.size()));
  return absl::OkStatus();
}

absl::StatusOr<Dataset> ReadTabularExamples(Env* env, const std::string& path,
                                            const TabularFeatures& features) {
  PSTRAIN_RETURN_IF_ERROR(CheckTabularFeatures(features));
  TabularExampleParser parser(features);
  PSTRAIN_RETURN_IF_ERROR(parser.ReadFile(env, path));
  return parser.Take();
}

absl::StatusOr<Dataset> LoadTabularExamples(Env* env, const std::string& dir, Split split,
                                            const TabularFeatures& features) {
  const std::vector<std::string> paths = FindExampleFiles(env, dir, split);
  if (paths.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no TFRecord files of the ", SplitName(split), " split in ", dir, " (",
        split == Split::kTrain ? "train.tfrecords" : "eval.tfrecords or test.tfrecords", ")"));
  }
  PSTRAIN_RETURN_IF_ERROR(CheckTabularFeatures(features));
  TabularExampleParser parser(features);
  for (const std::string& path : paths) PSTRAIN_RETURN_IF_ERROR(parser.ReadFile(env, path));
  return parser.Take();
}

}  // namespace pstrain
