// The sparse side of Model (model.h): the tables its layers read, a batch's
// sparse columns checked against them, and a step's rows prepared from them.
#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "data/feature_hash.h"
#include "models/model.h"

namespace pstrain {

absl::Status Model::BindSparseTables(Layer* layer) {
  // The index of `feature` in sparse_features_, added at its first use.
  auto feature_index = [this](const std::string& feature) {
    auto it = std::find(sparse_features_.begin(), sparse_features_.end(), feature);
    if (it == sparse_features_.end()) it = sparse_features_.insert(it, feature);
    return static_cast<int>(it - sparse_features_.begin());
  };
  std::vector<int> tables, features;
  for (const SparseTableSpec& spec : layer->SparseTables()) {
    SparseTableInfo info;
    info.name = spec.shared.empty() ? absl::StrCat(layer->name(), "/", spec.name) : spec.shared;
    info.feature = feature_index(spec.cross.empty() ? spec.feature : spec.cross[0]);
    for (const std::string& feature : spec.cross) info.cross.push_back(feature_index(feature));
    info.dim = spec.dim;
    info.buckets = spec.buckets;
    info.initializer = spec.initializer;
    auto same = std::find_if(sparse_tables_.begin(), sparse_tables_.end(),
                             [&](const SparseTableInfo& t) { return t.name == info.name; });
    if (same != sparse_tables_.end()) {
      if (spec.shared.empty() || !same->cross.empty() || same->dim != info.dim ||
          same->buckets != info.buckets || !(same->initializer == info.initializer)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "layer ", layer->name(), " reads table ", info.name,
            spec.shared.empty()
                ? ", which another layer has"
                : ", which an earlier layer declares with another dim, buckets or initializer; "
                  "every layer that shares a table declares it alike"));
      }
      if (same->feature != info.feature &&
          std::find(same->shared_features.begin(), same->shared_features.end(), info.feature) ==
              same->shared_features.end()) {
        same->shared_features.push_back(info.feature);
      }
      tables.push_back(static_cast<int>(same - sparse_tables_.begin()));
      features.push_back(info.feature);
      continue;
    }
    tables.push_back(static_cast<int>(sparse_tables_.size()));
    features.push_back(info.feature);
    sparse_tables_.push_back(std::move(info));
  }
  if (!tables.empty()) layer->BindSparse(std::move(tables), std::move(features));
  return absl::OkStatus();
}

namespace {

// The row of `value` (of kind `kind`) in `table`, or an error message.
absl::StatusOr<int64_t> RowId(const SparseTableInfo& table, SparseValueKind kind, uint64_t value) {
  constexpr uint64_t kLow63 = (uint64_t{1} << 63) - 1;
  if (kind == SparseValueKind::kTokens) {
    if (table.buckets > 0)
      return static_cast<int64_t>(value % static_cast<uint64_t>(table.buckets));
    return static_cast<int64_t>(value & kLow63);
  }
  const auto id = static_cast<int64_t>(value);
  if (id < 0) {
    return absl::InvalidArgumentError(absl::StrCat("id ", id, " is negative; ids are >= 0"));
  }
  if (table.buckets > 0 && id >= table.buckets) {
    return absl::InvalidArgumentError(
        absl::StrCat("id ", id, " is out of range for table ", table.name, " of ", table.buckets,
                     " buckets (ids of an integer feature are its rows: give the table more "
                     "buckets, make it dynamic: true, or feed the ids as strings to hash them)"));
  }
  return id;
}

// A crossed table's name for messages: "cross [a, b] (table wide/a_X_b)".
std::string CrossName(const SparseTableInfo& table, const std::vector<std::string>& features) {
  std::vector<std::string> names;
  for (int f : table.cross) names.push_back(features[f]);
  return absl::StrCat("cross [", absl::StrJoin(names, ", "), "] (table ", table.name, ")");
}

// The number of value combinations of example i in a cross of `columns`, or
// an error message when it is over kMaxValuesPerExample. Every column's
// count is at most kMaxValuesPerExample (checked before), so the running
// product, stopped once over the cap, cannot overflow.
absl::StatusOr<int64_t> CrossCount(const std::vector<const SparseFeatureColumn*>& columns,
                                   int64_t i) {
  int64_t count = 1;
  std::vector<int64_t> counts;
  for (const SparseFeatureColumn* column : columns) {
    counts.push_back(column->offsets[i + 1] - column->offsets[i]);
    if (count <= kMaxValuesPerExample) count *= counts.back();
  }
  // A feature without values leaves no combination, however many the others have.
  if (std::find(counts.begin(), counts.end(), 0) != counts.end()) return 0;
  if (count <= kMaxValuesPerExample) return count;
  return absl::InvalidArgumentError(
      absl::StrCat("has ", absl::StrJoin(counts, " x "), " combinations of values, more than the ",
                   kMaxValuesPerExample, " one example may have in one cross"));
}

// The index of row `id` in table->ids, added at its first sight (`index`
// holds the ids seen so far).
using RowIndex = absl::flat_hash_map<int64_t, int32_t>;
int32_t SlotOf(int64_t id, RowIndex* index, TableStep* table) {
  auto [it, added] = index->try_emplace(id, static_cast<int32_t>(table->ids.size()));
  if (added) table->ids.push_back(id);
  return it->second;
}

// A crossed table's part of PrepareSparse: its rows, slots and offsets.
absl::Status PrepareCross(const SparseBatch& batch, int64_t examples, const SparseTableInfo& info,
                          const std::vector<std::string>& features, RowIndex* index,
                          TableStep* table) {
  constexpr uint64_t kLow63 = (uint64_t{1} << 63) - 1;
  const size_t n = info.cross.size();
  std::vector<const SparseFeatureColumn*> columns;
  for (int f : info.cross) columns.push_back(&batch.features[f]);
  table->slots.clear();
  table->offsets.assign(1, 0);
  // An odometer over the example's values, the last feature fastest;
  // prefix[j] is the fingerprint of the key and the first j values, so a
  // step recomputes only from the first position it changed.
  std::vector<int64_t> begin(n), end(n), at(n);
  std::vector<uint64_t> prefix(n + 1, kCrossHashKey);
  for (int64_t i = 0; i < examples; ++i) {
    absl::StatusOr<int64_t> count = CrossCount(columns, i);
    if (!count.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(CrossName(info, features), ": example ", i,
                                                     " of the batch ", count.status().message()));
    }
    if (*count > 0) {
      for (size_t j = 0; j < n; ++j) {
        begin[j] = at[j] = columns[j]->offsets[i];
        end[j] = columns[j]->offsets[i + 1];
      }
      size_t changed = 0;  // positions from here on need their prefix recomputed
      for (int64_t c = 0; c < *count; ++c) {
        for (size_t j = changed; j < n; ++j) {
          prefix[j + 1] = FingerprintCat64(prefix[j], columns[j]->values[at[j]]);
        }
        const uint64_t h = prefix[n];
        const int64_t id = info.buckets > 0
                               ? static_cast<int64_t>(h % static_cast<uint64_t>(info.buckets))
                               : static_cast<int64_t>(h & kLow63);
        table->slots.push_back(SlotOf(id, index, table));
        // Advance: the last position that is not at its end, the ones after it back to
        // their beginnings.
        size_t j = n;
        while (j > 0 && ++at[j - 1] == end[j - 1]) {
          at[j - 1] = begin[j - 1];
          --j;
        }
        changed = j == 0 ? 0 : j - 1;
      }
    }
    table->offsets.push_back(static_cast<int64_t>(table->slots.size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Model::CheckSparseColumns(const std::vector<const SparseFeatureColumn*>& columns,
                                       const std::string& source) const {
  if (columns.size() != sparse_features_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("model ", name_, " reads ",
                                                   sparse_features_.size(), " sparse features, ",
                                                   source, " gives ", columns.size()));
  }
  for (const SparseFeatureColumn* column : columns) {
    for (int64_t i = 0; i < column->examples(); ++i) {
      const int64_t n = column->offsets[i + 1] - column->offsets[i];
      if (n > kMaxValuesPerExample) {
        return absl::InvalidArgumentError(
            absl::StrCat("feature ", column->name, ": example ", i, " of ", source, " has ", n,
                         " values, more than the ", kMaxValuesPerExample,
                         " one example may have in one feature"));
      }
    }
  }
  for (const SparseTableInfo& info : sparse_tables_) {
    if (!info.cross.empty()) {  // every combination's fingerprint has a row; only count them
      std::vector<const SparseFeatureColumn*> crossed;
      int64_t examples = columns[info.cross[0]]->examples();
      for (int f : info.cross) {
        crossed.push_back(columns[f]);
        examples = std::min(examples, columns[f]->examples());
      }
      for (int64_t i = 0; i < examples; ++i) {
        absl::StatusOr<int64_t> count = CrossCount(crossed, i);
        if (!count.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(CrossName(info, sparse_features_),
                                                         ": example ", i, " of ", source, " ",
                                                         count.status().message()));
        }
      }
      continue;
    }
    std::vector<int> read = {info.feature};
    read.insert(read.end(), info.shared_features.begin(), info.shared_features.end());
    for (int f : read) {
      const SparseFeatureColumn& column = *columns[f];
      if (column.kind == SparseValueKind::kTokens) continue;  // every fingerprint has a row
      for (int64_t i = 0; i < column.examples(); ++i) {
        for (int64_t k = column.offsets[i]; k < column.offsets[i + 1]; ++k) {
          absl::StatusOr<int64_t> id = RowId(info, column.kind, column.values[k]);
          if (!id.ok()) {
            return absl::InvalidArgumentError(absl::StrCat("feature ", column.name, ", example ", i,
                                                           " of ", source, ": ",
                                                           id.status().message()));
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Model::PrepareSparse(const SparseBatch& batch, int64_t examples,
                                  SparseStep* step) const {
  if (batch.features.size() != sparse_features_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", name_, " reads ", sparse_features_.size(),
                     " sparse features, the batch has ", batch.features.size()));
  }
  step->examples = examples;
  step->offsets.resize(sparse_features_.size());
  for (size_t f = 0; f < sparse_features_.size(); ++f) {
    const SparseFeatureColumn& column = batch.features[f];
    if (column.name != sparse_features_[f] || column.examples() != examples) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model ", name_, ": sparse feature ", f, " should be ", sparse_features_[f], " of ",
          examples, " examples, the batch has ", column.name, " of ", column.examples()));
    }
    for (int64_t i = 0; i < examples; ++i) {
      const int64_t n = column.offsets[i + 1] - column.offsets[i];
      if (n > kMaxValuesPerExample) {
        return absl::InvalidArgumentError(
            absl::StrCat("feature ", column.name, ": example ", i, " of the batch has ", n,
                         " values, more than the ", kMaxValuesPerExample,
                         " one example may have in one feature"));
      }
    }
    step->offsets[f] = column.offsets;
  }
  step->tables.resize(sparse_tables_.size());
  RowIndex index;
  for (size_t t = 0; t < sparse_tables_.size(); ++t) {
    const SparseTableInfo& info = sparse_tables_[t];
    TableStep& table = step->tables[t];
    table.ids.clear();
    table.offsets.clear();
    table.rows.clear();
    table.grads.clear();
    index.clear();
    if (!info.cross.empty()) {
      PSTRAIN_RETURN_IF_ERROR(
          PrepareCross(batch, examples, info, sparse_features_, &index, &table));
      continue;
    }
    // The values of the table's feature, then of each feature sharing it.
    std::vector<int> read = {info.feature};
    read.insert(read.end(), info.shared_features.begin(), info.shared_features.end());
    table.slots.clear();
    table.feature_slots.clear();
    for (int f : read) {
      const SparseFeatureColumn& column = batch.features[f];
      const size_t first = table.slots.size();
      if (read.size() > 1) table.feature_slots.emplace_back(f, static_cast<int64_t>(first));
      table.slots.resize(first + column.values.size());
      for (size_t k = 0; k < column.values.size(); ++k) {
        absl::StatusOr<int64_t> id = RowId(info, column.kind, column.values[k]);
        if (!id.ok()) {
          const int64_t example =
              std::upper_bound(column.offsets.begin(), column.offsets.end(), k) -
              column.offsets.begin() - 1;
          return absl::InvalidArgumentError(absl::StrCat("feature ", column.name, ", example ",
                                                         example,
                                                         " of the batch: ", id.status().message()));
        }
        table.slots[first + k] = SlotOf(*id, &index, &table);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain
