#ifndef PSTRAIN_IO_EVENT_INSPECT_H_
#define PSTRAIN_IO_EVENT_INSPECT_H_

#include <string>

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

}  // namespace pstrain

#endif  // PSTRAIN_IO_EVENT_INSPECT_H_
