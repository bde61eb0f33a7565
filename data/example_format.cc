#include "data/example_format.h"

#include <algorithm>
#include <string_view>

namespace pstrain {

ExampleFormat ExampleFormatOfFiles(const std::vector<std::string>& files) {
  const auto all_end_with = [&files](std::string_view a, std::string_view b) {
    return std::all_of(files.begin(), files.end(),
                       [&](const std::string& f) { return f.ends_with(a) || f.ends_with(b); });
  };
  if (all_end_with(".tsv", ".tsv.gz")) return ExampleFormat::kCriteoTsv;
  if (all_end_with(".csv", ".csv.gz")) return ExampleFormat::kCsv;
  return ExampleFormat::kTfExamples;
}

}  // namespace pstrain
