// The CSV format's text rules (data/formats/csv_format.h): fields and quotes,
// numbers, transforms, and how values are shown in messages. The schema is
// read in csv_schema.cc, records become examples in csv_parser.cc.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/formats/csv_format_internal.h"

namespace pstrain {
namespace csv_internal {
namespace {

constexpr size_t kTextShown = 40;     // of a bad field, enough to recognize it
constexpr size_t kColumnsShown = 30;  // of a header, in an error

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

}  // namespace

std::string Shown(std::string_view text) {
  const bool cut = text.size() > kTextShown;
  return absl::StrCat("\"", absl::CHexEscape(Sv(text.substr(0, kTextShown))), cut ? "...\"" : "\"");
}

std::string CharName(char c) { return Shown(std::string_view(&c, 1)); }

std::string ColumnList(const std::vector<std::string>& names) {
  const size_t shown = std::min(names.size(), kColumnsShown);
  std::vector<std::string> quoted;
  for (size_t i = 0; i < shown; ++i) quoted.push_back(Shown(names[i]));
  std::string list = absl::StrJoin(quoted, ", ");
  if (names.size() > shown) absl::StrAppend(&list, " and ", names.size() - shown, " more");
  return list;
}

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

}  // namespace csv_internal

bool CsvRecordComplete(std::string_view text, char delimiter) {
  if (std::memchr(text.data(), '"', text.size()) == nullptr) return true;
  return CsvQuoteScanner(delimiter).Complete(text);
}

bool CsvQuoteScanner::Complete(std::string_view text) {
  bool quoted = quoted_;
  bool field_start = field_start_;
  size_t i = next_;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c != '"') continue;
      if (i + 1 == text.size()) {
        // A quote at the end closes the field, unless what is appended next
        // makes it "" (a quote inside it): read it again then.
        next_ = i;
        quoted_ = true;
        field_start_ = field_start;
        return true;
      }
      if (text[i + 1] == '"') {
        ++i;  // "" inside quotes
      } else {
        quoted = false;
      }
    } else if (c == delimiter_) {
      field_start = true;
    } else {
      quoted = field_start && c == '"';
      field_start = false;
    }
  }
  next_ = i;
  quoted_ = quoted;
  field_start_ = field_start;
  return !quoted;
}

int64_t BucketOf(const std::vector<double>& boundaries, double x) {
  return std::upper_bound(boundaries.begin(), boundaries.end(), x) - boundaries.begin();
}

}  // namespace pstrain
