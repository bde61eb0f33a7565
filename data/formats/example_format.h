#ifndef PSTRAIN_DATA_FORMATS_EXAMPLE_FORMAT_H_
#define PSTRAIN_DATA_FORMATS_EXAMPLE_FORMAT_H_

// The formats tabular examples are streamed from (data/stream/example_stream.h),
// and how a file's format is told: by its name, file by file, never by the
// text of a pattern that named it ("stream/*" names .tsv files as well as
// TFRecords). Every reader of input files (the training replicas, the
// evaluation, pstrain-data) asks here.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain {

enum class ExampleFormat {
  kTfExamples,  // TFRecord files of tf.train.Example (data/formats/tabular_examples.h)
  kCriteoTsv,   // Criteo's click-log TSV (data/formats/criteo_format.h)
  kCsv,         // CSV with a header, read by a schema (data/formats/csv_format.h)
};

// The format of the file `name`: kCriteoTsv for a name ending .tsv or
// .tsv.gz, kCsv for .csv or .csv.gz, kTfExamples (TFRecord, plain or
// gzip'd) for any other.
ExampleFormat ExampleFormatOfFile(std::string_view name);

// "TFRecord Examples", "Criteo TSV" or "CSV", for messages.
const char* ExampleFormatName(ExampleFormat format);

// The one format of `files`, each told by ExampleFormatOfFile. A stream
// reads one format: files of two formats are InvalidArgument naming a file
// of each, and no files InvalidArgument too; messages begin with `what`
// (the key or command that named the files, "training.eval_files").
absl::StatusOr<ExampleFormat> ExampleFormatOfFiles(const std::vector<std::string>& files,
                                                   std::string_view what);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_FORMATS_EXAMPLE_FORMAT_H_
