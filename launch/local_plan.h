#ifndef PSTRAIN_LAUNCH_LOCAL_PLAN_H_
#define PSTRAIN_LAUNCH_LOCAL_PLAN_H_

#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "launch/spawn.h"

namespace pstrain {

// The processes a local launch starts for `job`: every ps first, then the
// chief, then the workers, each with --config `config_path`, its job name and
// task index, and `threads` compute threads. Binaries are looked up in
// `bin_dir` (pstrain-ps, pstrain-chief, pstrain-worker).
std::vector<ProcessSpec> PlanProcesses(const JobConfig& job, const std::string& config_path,
                                       const std::string& bin_dir, int threads);

// Compute threads per process when the config leaves it to the launcher:
// the cores divided among the processes that train, at least 1, so the
// processes of one machine do not oversubscribe it.
int ThreadsPerProcess(const JobConfig& job, int cores);

}  // namespace pstrain

#endif  // PSTRAIN_LAUNCH_LOCAL_PLAN_H_
