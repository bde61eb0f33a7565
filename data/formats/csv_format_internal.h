#ifndef PSTRAIN_DATA_FORMATS_CSV_FORMAT_INTERNAL_H_
#define PSTRAIN_DATA_FORMATS_CSV_FORMAT_INTERNAL_H_

// Internal to the CSV format's files: the text rules of data/formats/csv_format.h
// that both the schema (csv_schema.cc) and the parser (csv_parser.cc) apply,
// defined in csv_format.cc: fields and quotes, numbers, transforms, and how a
// value is shown in a message.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "data/formats/csv_format.h"

namespace pstrain {
namespace csv_internal {

inline constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";

// Debian's abseil has its own string_view type; absl functions get this.
inline absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// `text` as it appears in a message: quoted, escaped, cut at 40 bytes
// (enough to recognize it).
std::string Shown(std::string_view text);

std::string CharName(char c);

// "a, b, c" and " and N more" past 30 names.
std::string ColumnList(const std::vector<std::string>& names);

enum class NumberError { kNone, kNotANumber, kNotFinite, kOutOfRange };

// A decimal number, as the file comment of csv_format.h says: spaces around
// it and a leading '+' allowed; no hexadecimal, no locale.
NumberError ParseNumber(std::string_view text, double* value);

// "is not a number" and the like, for an error; "" for kNone.
const char* NumberProblem(NumberError e);

// The dense feature of raw value `x` in `column`, or the problem ("" when
// fine).
const char* Transform(const CsvNumericColumn& column, double x, float* out);

// Splits `line` into `*fields` by the quoting rules of csv_format.h. Views
// point into `line` or `*unescaped`, which is reserved here so that it never
// moves while fields are added. On a quoting error returns the problem and
// sets *bad_field; "" on success.
const char* SplitFields(std::string_view line, char delimiter,
                        std::vector<std::string_view>* fields, std::string* unescaped,
                        size_t* bad_field);

// Calls fn(token) for each token of a categorical field's text: the whole
// text, or its pieces between `separator`s, empty ones skipped; none for an
// empty field.
template <class Fn>
void ForEachToken(std::string_view text, std::optional<char> separator, Fn fn) {
  if (!separator) {
    if (!text.empty()) fn(text);
    return;
  }
  while (!text.empty()) {
    const size_t at = text.find(*separator);
    const std::string_view token = text.substr(0, at);
    if (!token.empty()) fn(token);
    if (at == std::string_view::npos) break;
    text.remove_prefix(at + 1);
  }
}

}  // namespace csv_internal
}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_CSV_FORMAT_INTERNAL_H_
