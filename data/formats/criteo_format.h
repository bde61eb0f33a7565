#ifndef PSTRAIN_DATA_FORMATS_CRITEO_FORMAT_H_
#define PSTRAIN_DATA_FORMATS_CRITEO_FORMAT_H_

// The text format of the Criteo Display Advertising Challenge (Kaggle 2014)
// train.txt, and of the 1 TB Click Logs, shared by the reader and the writer
// in data/formats/criteo.h.
//
// One example per line, fields separated by one tab, the line ended by '\n'
// (a "\r\n" ending and a last line without its '\n' are accepted):
//   label \t I1 .. I13 \t C1 .. C26
// - label: "0" or "1" (clicked);
// - I1..I13: integer counts, decimal, optionally with a leading '-' (I2 has
//   small negative values in the real data), at most 18 digits;
// - C1..C26: categorical values, each exactly 8 hexadecimal digits (either
//   case): a 32-bit hash of the original value.
// Any of the 39 feature fields may be empty: the value is missing. The label
// may not be. The Kaggle test.txt lacks the label column (39 fields) and is
// not this format.

#include <cstdint>

namespace pstrain {

inline constexpr int kCriteoNumDense = 13;
inline constexpr int kCriteoNumCategorical = 26;
inline constexpr int kCriteoNumFields = 1 + kCriteoNumDense + kCriteoNumCategorical;  // 40
inline constexpr int kCriteoHexDigits = 8;
inline constexpr int kCriteoMaxIntDigits = 18;  // so every value fits an int64

// The longest line accepted, terminator excluded. The longest well-formed line
// is 1 + 13 * 19 + 26 * 8 + 39 tabs = 495 bytes; anything much longer is not
// this format (or is a file without newlines), and is refused before it is
// scanned for fields.
inline constexpr int kCriteoMaxLineBytes = 4096;

// The id the reader stores for an empty categorical field, the convention of
// the DLRM reference preprocessing (facebookresearch/dlrm: missing -> 0). The
// value "00000000" reads as the same id; in the real data it does not occur.
inline constexpr uint32_t kCriteoMissingId = 0;

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_CRITEO_FORMAT_H_
