#include "launch/local_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pstrain {

std::vector<ProcessSpec> PlanProcesses(const JobConfig& job, const std::string& config_path,
                                       const std::string& bin_dir, int threads) {
  std::vector<ProcessSpec> specs;
  auto add = [&](const std::string& job_name, int index, const std::string& binary) {
    ProcessSpec spec;
    spec.name = absl::StrCat(job_name, ":", index);
    spec.argv = {absl::StrCat(bin_dir, "/", binary), absl::StrCat("--config=", config_path),
                 absl::StrCat("--job_name=", job_name), absl::StrCat("--task_index=", index),
                 absl::StrCat("--threads=", threads)};
    specs.push_back(std::move(spec));
  };
  for (size_t i = 0; i < job.cluster.ps.size(); ++i) add("ps", static_cast<int>(i), "pstrain-ps");
  for (size_t i = 0; i < job.cluster.chief.size(); ++i) {
    add("chief", static_cast<int>(i), "pstrain-chief");
  }
  for (size_t i = 0; i < job.cluster.worker.size(); ++i) {
    add("worker", static_cast<int>(i), "pstrain-worker");
  }
  return specs;
}

int ThreadsPerProcess(const JobConfig& job, int cores) {
  if (job.training.threads > 0) return job.training.threads;
  const int trainers = std::max(1, NumTrainingReplicas(job));
  return std::max(1, cores / trainers);
}

}  // namespace pstrain
