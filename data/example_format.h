#ifndef PSTRAIN_DATA_EXAMPLE_FORMAT_H_
#define PSTRAIN_DATA_EXAMPLE_FORMAT_H_

// The formats tabular examples are streamed from (data/example_stream.h),
// and how a file's format is told.

#include <string>
#include <vector>

namespace pstrain {

enum class ExampleFormat {
  kTfExamples,  // TFRecord files of tf.train.Example (data/tabular_examples.h)
  kCriteoTsv,   // Criteo's click-log TSV (data/criteo_format.h)
  kCsv,         // CSV with a header, read by a schema (data/csv_format.h)
};

// The format of `files` by their names: kCriteoTsv when every one ends .tsv
// or .tsv.gz, kCsv when every one ends .csv or .csv.gz, else kTfExamples.
ExampleFormat ExampleFormatOfFiles(const std::vector<std::string>& files);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_EXAMPLE_FORMAT_H_
