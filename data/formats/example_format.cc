#include "data/formats/example_format.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace pstrain {

ExampleFormat ExampleFormatOfFile(std::string_view name) {
  const absl::string_view n(name.data(), name.size());
  const auto ends_with = [n](absl::string_view suffix) {
    return absl::EndsWith(n, suffix) || absl::EndsWith(n, absl::StrCat(suffix, ".gz"));
  };
  if (ends_with(".tsv")) return ExampleFormat::kCriteoTsv;
  if (ends_with(".csv")) return ExampleFormat::kCsv;
  return ExampleFormat::kTfExamples;
}

const char* ExampleFormatName(ExampleFormat format) {
  switch (format) {
    case ExampleFormat::kTfExamples:
      return "TFRecord Examples";
    case ExampleFormat::kCriteoTsv:
      return "Criteo TSV";
    case ExampleFormat::kCsv:
      return "CSV";
  }
  return "an unknown format";
}

absl::StatusOr<ExampleFormat> ExampleFormatOfFiles(const std::vector<std::string>& files,
                                                   std::string_view what) {
  const absl::string_view key(what.data(), what.size());
  if (files.empty()) return absl::InvalidArgumentError(absl::StrCat(key, ": no input files"));
  const ExampleFormat format = ExampleFormatOfFile(files[0]);
  for (const std::string& file : files) {
    const ExampleFormat other = ExampleFormatOfFile(file);
    if (other == format) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        key, " names files of two formats: ", files[0], " is ", ExampleFormatName(format), " and ",
        file, " ", ExampleFormatName(other),
        " by their names (.tsv or .tsv.gz: Criteo TSV; .csv or .csv.gz: CSV; any other: TFRecord "
        "Examples); an input stream reads one format, so name the files of one (or convert the "
        "others with pstrain-data convert)"));
  }
  return format;
}

}  // namespace pstrain
