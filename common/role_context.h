#ifndef PSTRAIN_COMMON_ROLE_CONTEXT_H_
#define PSTRAIN_COMMON_ROLE_CONTEXT_H_

#include "common/env.h"
#include "common/termination.h"

namespace pstrain {

// What a role's library code is handed instead of reading process globals:
// the file system of the job and data dirs, and the stop request. main()
// wires the process's (Env::Default(), ProcessTerminationNotice()); a test
// wires a MemEnv and a ManualTerminationNotice. Both must outlive the role.
struct RoleContext {
  Env* env = nullptr;
  const TerminationNotice* termination = nullptr;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_ROLE_CONTEXT_H_
