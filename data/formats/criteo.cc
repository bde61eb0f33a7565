#include "data/formats/criteo.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pstrain {
namespace {

// "label", "I1".."I13", "C1".."C26" for the 0-based field index.
std::string FieldName(int field) {
  if (field == 0) return "label";
  if (field <= kCriteoNumDense) return absl::StrCat("I", field);
  return absl::StrCat("C", field - kCriteoNumDense);
}

absl::Status FieldError(int field, std::string_view value, std::string_view problem) {
  constexpr size_t kShown = 24;  // enough to recognize, short enough to read
  const std::string shown = value.size() > kShown
                                ? absl::StrCat(std::string(value.substr(0, kShown)), "...")
                                : std::string(value);
  return absl::InvalidArgumentError(absl::StrCat("field ", field + 1, " (", FieldName(field),
                                                 ") \"", absl::CEscape(shown),
                                                 "\": ", std::string(problem)));
}

bool ParseInt(std::string_view s, int64_t* value) {
  bool negative = false;
  if (!s.empty() && s[0] == '-') {
    negative = true;
    s.remove_prefix(1);
  }
  if (s.empty() || s.size() > kCriteoMaxIntDigits) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');  // 18 digits cannot overflow
  }
  *value = negative ? -v : v;
  return true;
}

bool ParseHex(std::string_view s, uint32_t* value) {
  if (s.size() != kCriteoHexDigits) return false;
  uint32_t v = 0;
  for (char c : s) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return false;
    }
    v = (v << 4) | static_cast<uint32_t>(digit);
  }
  *value = v;
  return true;
}

}  // namespace

void CriteoBatch::Clear() {
  labels.clear();
  dense.clear();
  dense_present.clear();
  categorical.clear();
}

void CriteoBatch::Append(const CriteoBatch& other) {
  labels.insert(labels.end(), other.labels.begin(), other.labels.end());
  dense.insert(dense.end(), other.dense.begin(), other.dense.end());
  dense_present.insert(dense_present.end(), other.dense_present.begin(), other.dense_present.end());
  categorical.insert(categorical.end(), other.categorical.begin(), other.categorical.end());
}

void CriteoBatch::AppendRow(const CriteoBatch& other, int64_t row) {
  labels.push_back(other.labels[row]);
  const auto d = other.dense.begin() + row * kCriteoNumDense;
  dense.insert(dense.end(), d, d + kCriteoNumDense);
  const auto p = other.dense_present.begin() + row * kCriteoNumDense;
  dense_present.insert(dense_present.end(), p, p + kCriteoNumDense);
  const auto c = other.categorical.begin() + row * kCriteoNumCategorical;
  categorical.insert(categorical.end(), c, c + kCriteoNumCategorical);
}

float CriteoLog1p(int64_t value, bool present) {
  if (!present || value <= 0) return 0.0f;
  return static_cast<float>(std::log1p(static_cast<double>(value)));
}

std::vector<float> CriteoDenseLog1p(const CriteoBatch& batch) {
  std::vector<float> out(batch.dense.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = CriteoLog1p(batch.dense[i], batch.dense_present[i] != 0);
  }
  return out;
}

absl::Status ParseCriteoLine(std::string_view line, CriteoBatch* batch) {
  if (line.size() > kCriteoMaxLineBytes) {
    return absl::InvalidArgumentError(absl::StrCat("line of ", line.size(),
                                                   " bytes is longer than the limit of ",
                                                   kCriteoMaxLineBytes, "; not Criteo TSV?"));
  }
  std::string_view fields[kCriteoNumFields];
  int count = 0;
  for (size_t start = 0;;) {
    const size_t tab = line.find('\t', start);
    const std::string_view field =
        line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start);
    if (count < kCriteoNumFields) fields[count] = field;
    ++count;
    if (tab == std::string_view::npos) break;
    start = tab + 1;
  }
  if (count != kCriteoNumFields) {
    return absl::InvalidArgumentError(absl::StrCat(
        count, " tab-separated fields, expected ", kCriteoNumFields, " (label, ", kCriteoNumDense,
        " integer, ", kCriteoNumCategorical, " categorical; empty fields are still separated)"));
  }
  float label;
  if (fields[0] == "0") {
    label = 0.0f;
  } else if (fields[0] == "1") {
    label = 1.0f;
  } else {
    return FieldError(0, fields[0], "the label must be 0 or 1");
  }
  int64_t dense[kCriteoNumDense];
  uint8_t present[kCriteoNumDense];
  for (int i = 0; i < kCriteoNumDense; ++i) {
    const std::string_view f = fields[1 + i];
    present[i] = !f.empty();
    dense[i] = 0;
    if (!f.empty() && !ParseInt(f, &dense[i])) {
      return FieldError(1 + i, f,
                        absl::StrCat("not a decimal integer of at most ", kCriteoMaxIntDigits,
                                     " digits (or empty for missing)"));
    }
  }
  uint32_t categorical[kCriteoNumCategorical];
  for (int i = 0; i < kCriteoNumCategorical; ++i) {
    const int field = 1 + kCriteoNumDense + i;
    const std::string_view f = fields[field];
    categorical[i] = kCriteoMissingId;
    if (!f.empty() && !ParseHex(f, &categorical[i])) {
      return FieldError(
          field, f,
          absl::StrCat("not ", kCriteoHexDigits, " hexadecimal digits (or empty for missing)"));
    }
  }
  batch->labels.push_back(label);
  batch->dense.insert(batch->dense.end(), dense, dense + kCriteoNumDense);
  batch->dense_present.insert(batch->dense_present.end(), present, present + kCriteoNumDense);
  batch->categorical.insert(batch->categorical.end(), categorical,
                            categorical + kCriteoNumCategorical);
  return absl::OkStatus();
}

void AppendCriteoLine(const CriteoBatch& batch, int64_t row, std::string* out) {
  absl::StrAppend(out, batch.labels[row] != 0.0f ? "1" : "0");
  for (int i = 0; i < kCriteoNumDense; ++i) {
    const int64_t k = row * kCriteoNumDense + i;
    out->push_back('\t');
    if (batch.dense_present[k]) absl::StrAppend(out, batch.dense[k]);
  }
  for (int i = 0; i < kCriteoNumCategorical; ++i) {
    const uint32_t id = batch.categorical[row * kCriteoNumCategorical + i];
    out->push_back('\t');
    if (id != kCriteoMissingId) absl::StrAppendFormat(out, "%08x", id);
  }
  out->push_back('\n');
}

absl::StatusOr<std::unique_ptr<CriteoReader>> CriteoReader::Open(Env* env,
                                                                 const std::string& path) {
  absl::StatusOr<std::string> text = env->ReadFile(path);
  if (!text.ok()) return text.status();
  return std::unique_ptr<CriteoReader>(new CriteoReader(path, *std::move(text)));
}

absl::Status CriteoReader::ReadBatch(int64_t max_rows, CriteoBatch* batch) {
  if (max_rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat("batch of ", max_rows, " rows; must be >= 1"));
  }
  batch->Clear();
  const std::string_view text(text_);
  while (batch->size() < max_rows && pos_ < text.size()) {
    // Look for the terminator no further than a maximal line (and its "\r\n"),
    // so a file without newlines is refused at once, not scanned to its end.
    const size_t window = std::min<size_t>(text.size() - pos_, kCriteoMaxLineBytes + 2);
    const size_t newline = text.substr(pos_, window).find('\n');
    const bool terminated = newline != std::string_view::npos;
    std::string_view line;
    if (terminated) {
      line = text.substr(pos_, newline);
    } else if (window == text.size() - pos_) {
      line = text.substr(pos_);  // the last line, without its '\n'
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ":", line_, ": no end of line within ", kCriteoMaxLineBytes,
                       " bytes (the longest line accepted); not Criteo TSV?"));
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (absl::Status s = ParseCriteoLine(line, batch); !s.ok()) {
      const std::string where = absl::StrCat(path_, ":", line_, ": ");
      if (!terminated) {
        return absl::DataLossError(absl::StrCat(
            where, s.message(), " (the last line has no end of line: truncated file?)"));
      }
      return absl::Status(s.code(), absl::StrCat(where, s.message()));
    }
    pos_ = terminated ? pos_ + newline + 1 : text.size();
    ++line_;
  }
  if (batch->size() == 0) {
    return absl::OutOfRangeError(absl::StrCat(path_, ": end of file after ", line_ - 1, " lines"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CriteoBatch> ReadCriteoFile(Env* env, const std::string& path) {
  absl::StatusOr<std::unique_ptr<CriteoReader>> reader = CriteoReader::Open(env, path);
  if (!reader.ok()) return reader.status();
  CriteoBatch all;
  CriteoBatch chunk;
  constexpr int64_t kChunkRows = 1 << 16;
  for (;;) {
    const absl::Status s = (*reader)->ReadBatch(kChunkRows, &chunk);
    if (absl::IsOutOfRange(s)) return all;
    if (!s.ok()) return s;
    all.Append(chunk);
  }
}

}  // namespace pstrain
