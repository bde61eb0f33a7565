#ifndef PSTRAIN_LAUNCH_SPAWN_H_
#define PSTRAIN_LAUNCH_SPAWN_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain {

// One local process of a job (a ps, the chief or a worker).
struct ProcessSpec {
  // Unique within a job; its output lines are prefixed "[name] ", e.g. "[ps:0] ".
  std::string name;
  // argv[0] is the path of the executable; it is run as is (execve, no PATH search).
  std::vector<std::string> argv;
  // Added to, or overriding, the launcher's environment.
  std::vector<std::pair<std::string, std::string>> env;
};

// A started child. The caller owns output_fd and must reap pid.
struct SpawnedProcess {
  pid_t pid = -1;
  // Non-blocking read end of the pipe that is the child's stdout and stderr.
  int output_fd = -1;
};

// The calling process's environment, as "NAME=value" strings.
std::vector<std::string> CurrentEnvironment();

// Starts `spec` with `base_env` plus spec.env (fork + execve) in a new process
// group, with stdin on /dev/null, default signal dispositions and an empty
// signal mask, no inherited descriptors but 0-2, and PR_SET_PDEATHSIG=SIGKILL
// (so the child dies with the thread that called this). Returns once execve()
// has succeeded; if it fails, the child is reaped and the error carries its
// errno, e.g. NotFound "cannot start worker:1: /path/x: No such file or
// directory". Safe to call while other threads run: the child only makes
// async-signal-safe calls before execve().
absl::StatusOr<SpawnedProcess> SpawnProcess(const ProcessSpec& spec,
                                            const std::vector<std::string>& base_env);

}  // namespace pstrain

#endif  // PSTRAIN_LAUNCH_SPAWN_H_
