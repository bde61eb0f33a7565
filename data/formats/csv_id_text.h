#ifndef PSTRAIN_DATA_FORMATS_CSV_ID_TEXT_H_
#define PSTRAIN_DATA_FORMATS_CSV_ID_TEXT_H_

// The raw values behind a CSV categorical column's ids (data/formats/csv_format.h),
// for people looking at the rows of an embedding table (TensorBoard's
// projector, io/projector.h): which text a hashed id came from, which range a
// bucketized id is.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/rows_to_name.h"
#include "data/formats/csv_format.h"

namespace pstrain {

// Column name -> ids, and column name -> id -> text.
using CsvIdsWanted = std::map<std::string, std::set<int64_t>>;
using CsvIdTexts = std::map<std::string, std::map<int64_t, std::string>>;

struct CsvIdTextLimits {
  int64_t max_records = 2000000;                // read at most this many records in all
  absl::Duration max_time = absl::Seconds(60);  // and for at most this long
};

struct CsvIdTextResult {
  CsvIdTexts texts;
  int64_t records = 0;  // read
  int64_t wanted = 0;   // ids asked for, of categorical columns
  int64_t named = 0;
};

// A bucketized column's id as a range of its boundaries: "< 18", "[18, 25)",
// ">= 65".
std::string BucketText(const std::vector<double>& boundaries, int64_t id);

// Names the `wanted` ids of `schema`'s categorical columns: a bucketized
// column's by its range (BucketText), a hashed column's by the first token
// of that column in `files` (read in order, from their start; .gz by name)
// whose id it is. Several tokens may share an id: the first seen names it.
// Reading stops once every id is named, or at the limits. Ids of columns
// the schema does not have as categorical, and ids never seen, stay
// unnamed. A record that is not valid CSV is skipped, as are files whose
// header lacks a column. Errors: a file that cannot be opened or read.
absl::StatusOr<CsvIdTextResult> NameCsvIds(Env* env, const CsvSchema& schema,
                                           const std::vector<std::string>& files,
                                           const CsvIdsWanted& wanted,
                                           const CsvIdTextLimits& limits = {});

// Names embedding table rows (the projector's) whose feature is a
// categorical column of a CSV schema, by NameCsvIds over the job's files.
// Keeps the names of the ids it was last asked for, so that the next call
// reads the files only for ids new to the set: its memory is bounded by
// the rows asked for. Not thread-safe.
class CsvRowNamer {
 public:
  // `files` are read in order (a job's train_files, expanded). `env` must
  // outlive the namer.
  CsvRowNamer(Env* env, CsvSchema schema, std::vector<std::string> files,
              CsvIdTextLimits limits = {})
      : env_(env), schema_(std::move(schema)), files_(std::move(files)), limits_(limits) {}

  // Fills rows[i].texts for every table of a named feature. A file that
  // cannot be read is logged as a warning: the rows found before it are
  // named, the rest are not.
  void Name(std::vector<RowsToName>* rows);

 private:
  Env* env_;
  const CsvSchema schema_;
  const std::vector<std::string> files_;
  const CsvIdTextLimits limits_;
  CsvIdTexts known_;
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_CSV_ID_TEXT_H_
