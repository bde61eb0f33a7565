// pstrain-data instances: the first <count> test examples of a data dir as
// prediction instances, one JSON list of pixel / 255 per line
// (pstrain-predict --json_instances), and their labels on stderr.
#include <algorithm>
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/load.h"
#include "data/tool/commands.h"

namespace pstrain::data_tool {

int RunInstances(Env* env, std::span<const std::string> args) {
  if (args.size() != 2) return Usage();
  const std::string& dir = args[0];
  int64_t count = 0;
  if (!absl::SimpleAtoi(args[1], &count) || count < 1) return Usage();
  absl::StatusOr<Dataset> test = LoadDataset(env, dir, Split::kTest);
  if (!test.ok()) return Fail(test.status());
  count = std::min(count, test->size());
  std::string labels;
  for (int64_t i = 0; i < count; ++i) {
    std::string line = "[";
    for (int64_t k = 0; k < test->example_size(); ++k) {
      const int pixel = test->images[i * test->example_size() + k];
      absl::StrAppend(&line, k ? "," : "", absl::StrFormat("%.4g", pixel / 255.0));
    }
    std::printf("%s]\n", line.c_str());
    absl::StrAppend(&labels, i ? " " : "", test->labels[i]);
  }
  std::fprintf(stderr, "labels: %s\n", labels.c_str());
  return 0;
}

}  // namespace pstrain::data_tool
