#include "data/formats/csv_id_text.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/float_text.h"
#include "common/status_macros.h"
#include "data/feature_hash.h"
#include "data/formats/csv_format_internal.h"
#include "data/formats/csv_lines.h"
#include "data/formats/record_stream.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

using csv_internal::kByteOrderMark;
using csv_internal::SplitFields;

// A hashed column being named: where it is in the file, and its ids left.
struct Column {
  const CsvCategoricalColumn* schema;
  std::set<int64_t> left;
  std::map<int64_t, std::string>* texts;
  int field = -1;  // in the current file's header; -1: not there
};

}  // namespace

std::string BucketText(const std::vector<double>& boundaries, int64_t id) {
  const auto num = [](double v) { return ShortestFloatText(static_cast<float>(v)); };
  if (boundaries.empty()) return "";
  if (id <= 0) return absl::StrCat("< ", num(boundaries.front()));
  if (id >= static_cast<int64_t>(boundaries.size())) {
    return absl::StrCat(">= ", num(boundaries.back()));
  }
  return absl::StrCat("[", num(boundaries[id - 1]), ", ", num(boundaries[id]), ")");
}

absl::StatusOr<CsvIdTextResult> NameCsvIds(Env* env, const CsvSchema& schema,
                                           const std::vector<std::string>& files,
                                           const CsvIdsWanted& wanted,
                                           const CsvIdTextLimits& limits) {
  CsvIdTextResult result;
  std::vector<Column> hashed;
  for (const CsvCategoricalColumn& column : schema.categorical) {
    auto it = wanted.find(column.name);
    if (it == wanted.end() || it->second.empty()) continue;
    result.wanted += static_cast<int64_t>(it->second.size());
    std::map<int64_t, std::string>& texts = result.texts[column.name];
    if (column.bucketized()) {
      for (int64_t id : it->second) {
        if (id >= 0 && id < column.num_ids()) texts[id] = BucketText(column.boundaries, id);
      }
      result.named += static_cast<int64_t>(texts.size());
      continue;
    }
    hashed.push_back({&column, it->second, &texts});
  }
  int64_t left = 0;
  for (const Column& c : hashed) left += static_cast<int64_t>(c.left.size());
  const absl::Time deadline = absl::Now() + limits.max_time;
  std::vector<std::string_view> fields;
  std::string unescaped, joined;
  for (const std::string& path : files) {
    if (left == 0 || result.records >= limits.max_records || absl::Now() >= deadline) break;
    PSTRAIN_ASSIGN_OR_RETURN(
        std::unique_ptr<RecordStream> stream,
        RecordStream::Open(env, path, Compression::kAuto, RecordFraming::kLines));
    stream->AcceptUnterminatedLastLine();
    absl::StatusOr<std::string_view> header = stream->Next();
    if (absl::IsOutOfRange(header.status())) continue;  // an empty file
    PSTRAIN_RETURN_IF_ERROR(header.status());
    std::string_view line = *header;
    if (line.substr(0, kByteOrderMark.size()) == kByteOrderMark) {
      line.remove_prefix(kByteOrderMark.size());
    }
    size_t bad_field = 0;
    if (*SplitFields(line, schema.delimiter, &fields, &unescaped, &bad_field) != '\0') continue;
    bool all_there = true;
    for (Column& c : hashed) {
      c.field = -1;
      for (size_t f = 0; f < fields.size(); ++f) {
        if (fields[f] == c.schema->name) c.field = static_cast<int>(f);
      }
      all_there = all_there && c.field >= 0;
    }
    if (!all_there) continue;  // not a file of this schema
    for (;;) {
      if (left == 0 || result.records >= limits.max_records) break;
      if (result.records % 4096 == 0 && absl::Now() >= deadline) break;
      absl::StatusOr<std::string_view> next = stream->Next();
      if (absl::IsOutOfRange(next.status())) break;
      PSTRAIN_RETURN_IF_ERROR(next.status());
      absl::StatusOr<std::string_view> record =
          JoinCsvRecord(stream.get(), *next, schema.delimiter, &joined, [](uint64_t) {});
      if (absl::IsDataLoss(record.status())) break;  // a quote never closed: the rest is damaged
      PSTRAIN_RETURN_IF_ERROR(record.status());
      ++result.records;
      if (*SplitFields(*record, schema.delimiter, &fields, &unescaped, &bad_field) != '\0') {
        continue;
      }
      for (Column& c : hashed) {
        if (c.left.empty() || static_cast<size_t>(c.field) >= fields.size()) continue;
        csv_internal::ForEachToken(
            fields[c.field], c.schema->separator, [&](std::string_view token) {
              const int64_t id = HashBucketFast(token, c.schema->hash_buckets);
              if (c.left.erase(id) == 0) return;
              (*c.texts)[id] = std::string(token);
              ++result.named;
              --left;
            });
      }
    }
  }
  return result;
}

void CsvRowNamer::Name(std::vector<RowsToName>* rows) {
  // What is asked now: ids named before are kept, the rest looked for.
  CsvIdsWanted all, missing;
  for (const RowsToName& r : *rows) {
    if (r.feature.empty()) continue;
    const auto known = known_.find(r.feature);
    for (int64_t id : r.ids) {
      all[r.feature].insert(id);
      if (known == known_.end() || !known->second.contains(id)) missing[r.feature].insert(id);
    }
  }
  CsvIdTexts now;
  for (const auto& [column, ids] : all) {
    const auto known = known_.find(column);
    if (known == known_.end()) continue;
    for (int64_t id : ids) {
      if (auto it = known->second.find(id); it != known->second.end()) now[column][id] = it->second;
    }
  }
  if (!missing.empty()) {
    absl::StatusOr<CsvIdTextResult> found = NameCsvIds(env_, schema_, files_, missing, limits_);
    if (!found.ok()) {
      LOG(WARNING) << "the projector's rows are not all named by their raw values: "
                   << found.status();
    } else {
      for (auto& [column, texts] : found->texts) now[column].merge(texts);
      // Looked for and not found (past the limits, or in no file): not
      // looked for again while they stay in the set.
      for (const auto& [column, ids] : missing) {
        for (int64_t id : ids) now[column].try_emplace(id);
      }
    }
  }
  known_ = std::move(now);
  for (RowsToName& r : *rows) {
    const auto texts = known_.find(r.feature);
    if (r.feature.empty() || texts == known_.end()) continue;
    r.texts.clear();
    for (int64_t id : r.ids) {
      const auto it = texts->second.find(id);
      r.texts.push_back(it == texts->second.end() ? "" : it->second);
    }
  }
}

}  // namespace pstrain
