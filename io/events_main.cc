// pstrain-events: the runs, tags and scalar series under a TensorBoard log
// dir (a quick look without TensorBoard); verifies every record's checksums.
//   pstrain-events <dir>
#include <cstdio>

#include "cloud/gcs_env.h"
#include "common/env.h"
#include "common/version.h"
#include "io/event_inspect.h"

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-events")) return 0;
  if (argc != 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: pstrain-events <log dir, e.g. a job dir>\n");
    return 2;
  }
  absl::StatusOr<std::string> report = pstrain::InspectEventDir(pstrain::ProcessEnv(), argv[1]);
  if (!report.ok()) {
    std::fprintf(stderr, "pstrain-events: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  std::fputs(report->c_str(), stdout);
  return 0;
}
