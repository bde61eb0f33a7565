#ifndef PSTRAIN_ROLE_ROLE_CONTEXT_H_
#define PSTRAIN_ROLE_ROLE_CONTEXT_H_

#include "common/env.h"
#include "common/termination.h"
#include "common/trace.h"

namespace pstrain {

// What a role's library code is handed instead of reading process globals:
// the file system of the job and data dirs, the stop request, and the
// trace recorder. main() wires the process's (Env::Default(),
// ProcessTerminationNotice(), the --trace_steps recorder); a test wires a
// MemEnv and a ManualTerminationNotice. All must outlive the role.
struct RoleContext {
  Env* env = nullptr;
  const TerminationNotice* termination = nullptr;
  TraceRecorder* trace = nullptr;  // null: tracing off
};

}  // namespace pstrain

#endif  // PSTRAIN_ROLE_ROLE_CONTEXT_H_
