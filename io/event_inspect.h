#ifndef PSTRAIN_IO_EVENT_INSPECT_H_
#define PSTRAIN_IO_EVENT_INSPECT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace pstrain {

// A quick look at a TensorBoard log dir without TensorBoard: every run (a
// directory holding event files, "." for `dir` itself), its tags with their
// kind (scalar, histogram, image), number of points, step range and, for
// scalars, the last value. Every record of every event file is read and its
// checksums verified: DataLoss naming the file and the record's offset for a
// damaged one (a cut last record, which a crash while writing may leave, is
// reported as such). NotFound if `dir` holds no event file.
absl::StatusOr<std::string> InspectEventDir(Env* env, const std::string& dir);

// One point of a scalar's curve.
struct ScalarPoint {
  int64_t step = 0;
  double wall_time = 0;  // seconds since the epoch
  float value = 0;
};

// Every scalar of every event file under `dir` (the TensorBoard runs as
// InspectEventDir finds them), by "<run>/<tag>" ("<tag>" for the run "."),
// in the order written (by file name, then record). Checked and with the
// errors as InspectEventDir; a cut last record ends its file's points.
absl::StatusOr<std::map<std::string, std::vector<ScalarPoint>>> ReadEventScalars(
    Env* env, const std::string& dir);

}  // namespace pstrain

#endif  // PSTRAIN_IO_EVENT_INSPECT_H_
