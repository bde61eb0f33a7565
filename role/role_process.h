#ifndef PSTRAIN_ROLE_ROLE_PROCESS_H_
#define PSTRAIN_ROLE_ROLE_PROCESS_H_

#include <functional>

#include "absl/status/status.h"
#include "role/role_context.h"
#include "role/role_flags.h"

namespace pstrain {

// Parses the command line (hyphen spellings accepted), sets up logging and
// malloc, for any pstrain binary. Call first in main().
void InitProcess(int* argc, char*** argv, const char* usage);

using RoleRunner = std::function<absl::Status(const RoleConfig&, const RoleContext&)>;

// The cluster part of a role's main(): resolves the role from --config or
// TF_CONFIG (read through `env`), checks it is a `job_name` task, installs
// the SIGTERM/SIGINT handlers, caps the compute threads, and runs `run` with
// `env` (the process's: local files and gs:// paths) and the process's
// termination notice. Returns the process exit code: 0; kExitRestartable
// when `run` fails with Unavailable (a task it needs was gone for longer
// than its retry budget, or lost its state: starting this task again may
// resume the job); 1 for any other failure of `run`; 2 for a bad command
// line or config. Every failure is logged with its reason.
int RunRole(const char* job_name, const RoleRunner& run, Env* env);

// The exit status of a task that a supervisor (pstrain-launch, systemd's
// Restart=on-failure, the GCE startup script, Kubernetes) should start again.
// 138 (128 + SIGUSR1's 10) because Kubeflow's training operator, under a
// TFJob's `restartPolicy: ExitCode`, recreates a pod only for exit codes of
// 128 and more (IsRetryableExitCode in pkg/util/train/train_util.go; its
// 2018 tf-operator version retried only 130, 137, 143 and 138, "the user's
// retryable error") and fails the whole job on 1..127. Exits 1 and 2 stay
// permanent failures there too.
inline constexpr int kExitRestartable = 138;

// Compute threads for a `threads` setting: itself, or every core for 0.
int ComputeThreads(int threads);

}  // namespace pstrain

#endif  // PSTRAIN_ROLE_ROLE_PROCESS_H_
