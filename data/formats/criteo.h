#ifndef PSTRAIN_DATA_FORMATS_CRITEO_H_
#define PSTRAIN_DATA_FORMATS_CRITEO_H_

// Reading and writing the Criteo click-log TSV format (data/formats/criteo_format.h)
// as columns: what a sparse model's input pipeline consumes.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "data/formats/criteo_format.h"

namespace pstrain {

// A batch of examples as row-major columns; row i of each column is example i.
struct CriteoBatch {
  std::vector<float> labels;  // 0 or 1, one per example
  // The 13 integer features as read, kCriteoNumDense per example; 0 where
  // missing (dense_present says which). Transform with CriteoDenseLog1p.
  std::vector<int64_t> dense;
  std::vector<uint8_t> dense_present;  // 1 if the field was non-empty, else 0
  // The 26 categorical values parsed from hex, kCriteoNumCategorical per
  // example; kCriteoMissingId where the field was empty.
  std::vector<uint32_t> categorical;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  void Clear();
  // Appends every row of `other`.
  void Append(const CriteoBatch& other);
  // Appends row `row` of `other`.
  void AppendRow(const CriteoBatch& other, int64_t row);
};

// The DLRM / TensorFlow-models practice for Criteo's integer features:
// log(1 + x) for x >= 0, and 0 for a missing or negative value (negatives are
// clamped to 0 first, as DLRM's preprocessing does).
float CriteoLog1p(int64_t value, bool present);

// CriteoLog1p of every dense value of `batch`, row-major [size, 13].
std::vector<float> CriteoDenseLog1p(const CriteoBatch& batch);

// Parses one line (without its terminator) and appends it to `*batch`; on
// error `*batch` is unchanged. InvalidArgument naming the field (1-based, and
// its Criteo name: label, I1..I13, C1..C26) for a wrong field count, an empty
// or non-0/1 label, a non-integer or over-long dense value, or a categorical
// value that is not 8 hex digits; for a line over kCriteoMaxLineBytes.
absl::Status ParseCriteoLine(std::string_view line, CriteoBatch* batch);

// Appends row `row` of `batch` to `*out` as one line with its '\n'; missing
// dense values and kCriteoMissingId are written as empty fields, ids as 8
// lowercase hex digits.
void AppendCriteoLine(const CriteoBatch& batch, int64_t row, std::string* out);

// Reads a Criteo TSV file in batches of a bounded number of rows.
//
// Memory: the Env interface reads whole files, so the reader holds the file's
// bytes (the 24 files of the 1 TB logs are ~50 GB each: split them first,
// e.g. `split -l 10000000`); the parsed columns are bounded by the batch size
// (about 230 bytes per row). When Env gains sequential reads only Open
// changes. Not thread-safe; one reader per thread.
class CriteoReader {
 public:
  // NotFound (or the Env's error) if `path` cannot be read.
  static absl::StatusOr<std::unique_ptr<CriteoReader>> Open(Env* env, const std::string& path);

  // Replaces `*batch` with the next up to `max_rows` (>= 1) examples.
  // OutOfRange once every line has been read. Errors name path:line: the
  // InvalidArgument of ParseCriteoLine; DataLoss for a bad last line without
  // its '\n' (a truncated file). After an error the reader stays at the bad
  // line (every later call returns the same error); rows of the batch before
  // it are in `*batch`.
  absl::Status ReadBatch(int64_t max_rows, CriteoBatch* batch);

  // 1-based number of the next line to be read.
  int64_t line_number() const { return line_; }

 private:
  CriteoReader(std::string path, std::string text)
      : path_(std::move(path)), text_(std::move(text)) {}

  std::string path_;
  std::string text_;
  size_t pos_ = 0;
  int64_t line_ = 1;
};

// Reads a whole file: ReadBatch until OutOfRange.
absl::StatusOr<CriteoBatch> ReadCriteoFile(Env* env, const std::string& path);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_CRITEO_H_
