// pstrain-data describe: each file's record count, feature names, types and
// sizes (data/formats/tfrecord_dataset.h), its checksums verified.
#include <cstdio>
#include <string>

#include "data/formats/tfrecord_dataset.h"
#include "data/tool/commands.h"

namespace pstrain::data_tool {

int RunDescribe(Env* env, std::span<const std::string> args) {
  if (args.empty()) return Usage();
  int rc = 0;
  for (const std::string& path : args) {
    absl::StatusOr<std::string> text = DescribeExampleFile(env, path);
    if (!text.ok()) {
      rc = Fail(text.status());  // and on to the next file
      continue;
    }
    std::fputs(text->c_str(), stdout);
  }
  return rc;
}

}  // namespace pstrain::data_tool
