#ifndef PSTRAIN_PS_CHECKPOINT_PATHS_H_
#define PSTRAIN_PS_CHECKPOINT_PATHS_H_

// A ps writes and reads only inside its job dir: the checkpoint a Save or
// Restore request names, checked against it.

#include <string>

#include "absl/status/statusor.h"

namespace pstrain {

enum class CheckpointPathKind {
  kPrefix,  // Save: "model.ckpt-<N>" (its files get suffixes)
  kIndex,   // Restore: "model.ckpt-<N>.index"
};

// The path in `job_dir` that `given` names, if it names a checkpoint of the
// job: the checkpoint's name alone ("model.ckpt-12", "model.ckpt-12.index"),
// or that name in `job_dir` written out (the same directory however spelled:
// "job/", "./job", a symlink to it; compared by real path for local dirs).
// Anything else -- another directory, a "..", a subdirectory of the job dir
// (a symlink in it may lead anywhere), a name that is not a checkpoint's --
// is InvalidArgument naming `what`, `given` and the job dir.
absl::StatusOr<std::string> CheckpointPathInJobDir(const std::string& job_dir,
                                                   const std::string& given,
                                                   CheckpointPathKind kind, const char* what);

}  // namespace pstrain

#endif  // PSTRAIN_PS_CHECKPOINT_PATHS_H_
